package dev.kafkette.clientcheck;

import java.util.Map;

/** Just enough JSON writing for the harness's reports: strings, null and flat objects. */
final class Json {
  private Json() {}

  static String string(String text) {
    if (text == null) {
      return "null";
    }
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  static String object(Map<String, String> entries) {
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<String, String> entry : entries.entrySet()) {
      if (out.length() > 1) {
        out.append(", ");
      }
      out.append(string(entry.getKey())).append(": ").append(string(entry.getValue()));
    }
    return out.append('}').toString();
  }
}
