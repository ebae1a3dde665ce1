"""Links of an HTML page: absolute, de-duplicated, internal or external."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base = ""
        self.found: list[list[str]] = []  # [href, text]
        self.open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "base" and values.get("href") and not self.base:
            self.base = values["href"]
        if tag == "a" and values.get("href"):
            self.open = [values["href"].strip(), ""]
            self.found.append(self.open)

    def handle_data(self, data: str) -> None:
        if self.open is not None:
            self.open[1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self.open = None


def run(path: str, base_url: str = "") -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    if base_url and not urlparse(base_url).scheme.startswith("http"):
        raise ValueError(f"base_url: {base_url!r} must start with http:// or https://")
    parser = _Links()
    parser.feed(file.read_text(encoding="utf-8", errors="replace"))
    base = base_url or parser.base
    host = urlparse(base).netloc.lower()
    links: dict[str, dict[str, Any]] = {}
    emails: list[str] = []
    for href, raw_text in parser.found:
        text = " ".join(raw_text.split())
        scheme = urlparse(href).scheme.lower()
        if href.startswith("#") or scheme in ("javascript", "data", "vbscript"):
            continue
        if scheme == "mailto":
            address = unquote(href[7:].split("?")[0])
            if address and address not in emails:
                emails.append(address)
            continue
        url = urljoin(base, href) if base else href
        target = urlparse(url).netloc.lower()
        internal = (target == host) if target else True
        if url in links:
            links[url]["text"] = links[url]["text"] or text
            continue
        links[url] = {"url": url, "text": text, "internal": internal}
    items = list(links.values())
    domains = sorted({urlparse(i["url"]).netloc.lower() for i in items if not i["internal"]})
    return {"links": items, "internal_count": sum(1 for i in items if i["internal"]),
            "external_count": sum(1 for i in items if not i["internal"]), "domains": domains,
            "emails": emails}
