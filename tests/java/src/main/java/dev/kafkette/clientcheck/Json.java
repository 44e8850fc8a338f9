package dev.kafkette.clientcheck;

import java.util.Map;

/** Just enough JSON writing for the harness's reports: strings, null, flat objects and objects of them. */
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
    return members(entries, true);
  }

  /** An object whose values are JSON already (objects made by {@link #object}). */
  static String objectOfJson(Map<String, String> entries) {
    return members(entries, false);
  }

  private static String members(Map<String, String> entries, boolean quoteValues) {
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<String, String> entry : entries.entrySet()) {
      if (out.length() > 1) {
        out.append(", ");
      }
      String value = quoteValues ? string(entry.getValue()) : entry.getValue();
      out.append(string(entry.getKey())).append(": ").append(value);
    }
    return out.append('}').toString();
  }
}
