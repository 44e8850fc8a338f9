"""docs/architecture.md stays true to the tree: every path it and docs/performance.md name in backticks exists,
and its package diagram shows the layers and forbidden imports of .importlinter exactly."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
# The benchmarks and the record of what was measured, which name modules, scripts and reports as the page does.
PERFORMANCE_DOC = ROOT / "docs" / "performance.md"
CONFIG = ROOT / ".importlinter"

# A backticked token names a file when it ends so; with a "/" it names a file or folder from the root.
FILE_ENDINGS = (".py", ".md", ".sh", ".yaml", ".toml", ".json", ".importlinter")
PATH_CHARS = re.compile(r"[\w.*\-/]+")
# Folders whose files a bare file name (`raft.py`) may refer to; not the venv, caches or build output.
SOURCE_FOLDERS = ("broker", "operator", "pipeline", "tests", "e2e", "bench", "images", "docs", "charts", "crds")


def prose(markdown: str) -> str:
    """The text outside fenced code blocks (the diagram is checked against the contracts instead)."""
    return re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)


def named_paths(markdown: str) -> list[str]:
    """Backticked tokens that are paths: `broker/net/`, `broker/storage/log.py`, `raft.py`, `control*.py`."""
    tokens = re.findall(r"`([^`\n]+)`", prose(markdown))
    return [
        token
        for token in tokens
        if PATH_CHARS.fullmatch(token) and not token.startswith("..") and ("/" in token or token.endswith(FILE_ENDINGS))
    ]


def source_names(root: Path) -> set[str]:
    """Names of the files and folders in the tree (root level and below the source folders)."""
    below = (path.name for folder in SOURCE_FOLDERS for path in (root / folder).rglob("*"))
    return {path.name for path in root.iterdir()} | set(below)


def missing(paths: list[str], root: Path) -> list[str]:
    """The named paths the tree lacks: `a/b.py` from the root (globs allowed); a bare `b.py` or `b/` (as a
    table of a package's parts names them) anywhere in the tree."""
    names = source_names(root)
    absent = []
    for token in paths:
        path = token.rstrip("/")
        if "/" in path:
            found = any(root.glob(path)) if "*" in path else (root / path).exists()
        else:
            found = any(re.fullmatch(re.escape(path).replace(r"\*", r"\w*"), name) for name in names)
        if not found:
            absent.append(token)
    return absent


@pytest.mark.parametrize("doc", [DOC, PERFORMANCE_DOC], ids=lambda doc: doc.name)
def test_every_path_named_in_the_page_exists(doc: Path) -> None:
    paths = named_paths(doc.read_text())
    assert len(paths) > 50, paths  # the page names its modules; an extraction that finds none proves nothing
    assert missing(paths, ROOT) == []


def test_a_path_that_does_not_exist_is_caught(tmp_path: Path) -> None:
    (tmp_path / "broker" / "net").mkdir(parents=True)
    (tmp_path / "broker" / "net" / "frames.py").write_text("")
    text = (
        "`broker/net/` and `net/` read with `frames.py` and `broker/net/frames.py`; `broker/gone.py`, `gone.py`, "
        "`broker/*/nothing*.py` and `txn/` are stale; `socket.request.max.bytes`, `kafkette up --dir D` are no paths.\n"
        "```\nbroker/in/a/diagram.py\n```\n"
    )
    assert missing(named_paths(text), tmp_path) == ["broker/gone.py", "gone.py", "broker/*/nothing*.py", "txn/"]


def diagram_lines(markdown: str) -> list[str]:
    """The lines of the first fenced block, stripped."""
    block = re.search(r"^```\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)
    assert block is not None, "no diagram"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def diagram_rows(markdown: str) -> list[str]:
    """Each diagram line's first column: its text up to a gap of two spaces."""
    return [re.split(r"\s{2,}", line)[0] for line in diagram_lines(markdown)]


def contracts() -> list[configparser.SectionProxy]:
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return [config[name] for name in config.sections() if name.startswith("importlinter:contract:")]


def short(module: str, container: str) -> str:
    return module.removeprefix(container + ".")


@pytest.mark.parametrize("contract", [c for c in contracts() if c["type"] == "layers"], ids=lambda c: c.name)
def test_the_diagram_shows_each_layers_contract_in_order(contract: configparser.SectionProxy) -> None:
    container = contract.get("containers", "kafkette.broker").strip()
    layers = [
        " ".join(short(word, container) for word in line.split()) for line in contract["layers"].strip().splitlines()
    ]
    rows = diagram_rows(DOC.read_text())
    assert layers[0] in rows, f"{layers[0]!r} is not a row of the diagram"
    start = rows.index(layers[0])
    assert rows[start : start + len(layers)] == layers


@pytest.mark.parametrize("contract", [c for c in contracts() if c["type"] == "forbidden"], ids=lambda c: c.name)
def test_the_diagram_shows_each_forbidden_contract(contract: configparser.SectionProxy) -> None:
    forbidden = ", ".join(contract["forbidden_modules"].split())
    line = f"{contract['source_modules'].strip()} -> {forbidden}"
    lines = [" ".join(text.removeprefix("forbidden:").split()) for text in diagram_lines(DOC.read_text())]
    assert line in lines
