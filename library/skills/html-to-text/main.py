"""Readable text and metadata from an HTML file, with html.parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "title", "head"}
BOILERPLATE = {"nav", "header", "footer", "aside", "form"}
BLOCKS = {"p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "br", "section", "article",
          "blockquote", "pre", "dd", "dt", "figcaption", "main", "table", "ul", "ol"}
VOID = {"br", "img", "meta", "link", "input", "hr", "area", "base", "col", "embed", "source",
        "track", "wbr"}


class _Reader(HTMLParser):
    def __init__(self, keep_boilerplate: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.keep_boilerplate = keep_boilerplate
        self.stack: list[str] = []
        self.meta: dict[str, str] = {}
        self.title = ""
        self.language = ""
        self.blocks: list[tuple[bool, str]] = []  # (inside main/article, text)
        self.headings: list[dict[str, Any]] = []
        self.current: list[str] = []
        self.heading_level = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "html":
            self.language = values.get("lang", "")
        if tag == "meta" and values.get("name"):
            self.meta[values["name"].lower()] = values.get("content", "")
        if tag in BLOCKS:
            self._flush()
        if tag in {"h1", "h2", "h3", "h4", "h5", "h6"}:
            self.heading_level = int(tag[1])
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in BLOCKS:
            self._flush()
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if "title" in self.stack and not self.title:
            self.title = " ".join(data.split())
        if any(t in SKIP for t in self.stack):
            return
        if not self.keep_boilerplate and any(t in BOILERPLATE for t in self.stack):
            return
        self.current.append(data)

    def _flush(self) -> None:
        text = " ".join("".join(self.current).split())
        self.current = []
        if not text:
            return
        if self.heading_level:
            self.headings.append({"level": self.heading_level, "text": text})
            self.heading_level = 0
        self.blocks.append((any(t in ("main", "article") for t in self.stack), text))


def run(path: str, keep_boilerplate: bool = False) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    raw = file.read_bytes()
    charset = re.search(rb"charset=[\"']?([\w-]+)", raw[:2048])
    try:
        markup = raw.decode(charset.group(1).decode() if charset else "utf-8", errors="replace")
    except LookupError:
        markup = raw.decode("utf-8", errors="replace")
    reader = _Reader(keep_boilerplate)
    reader.feed(markup)
    reader.close()
    reader._flush()
    in_main = [text for inside, text in reader.blocks if inside]
    lines = in_main or [text for _, text in reader.blocks]
    text = "\n\n".join(lines)
    title = reader.title or next((h["text"] for h in reader.headings if h["level"] == 1), "")
    words = len(re.findall(r"[A-Za-z0-9À-ɏ'’-]+", text)) + len(re.findall(r"[\u3400-\u9fff]", text))
    return {"title": title, "description": reader.meta.get("description", ""),
            "author": reader.meta.get("author", ""), "language": reader.language,
            "headings": reader.headings, "text": text, "word_count": words}
