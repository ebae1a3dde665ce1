"""Extract the text of a PDF, page by page, with pypdf."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pypdf import PdfReader
from pypdf.errors import PdfReadError


def run(path: str, max_pages: int = 0, password: str = "") -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    if max_pages is not None and max_pages < 0:
        raise ValueError(f"max_pages: must be 0 (all) or a positive number, not {max_pages}")
    try:
        reader = PdfReader(file)
        if reader.is_encrypted and not reader.decrypt(password or ""):
            raise ValueError(f"password: cannot open the encrypted PDF {file.name}"
                             + (" with the password given" if password else "; give a password"))
        pages = reader.pages
        count = len(pages)
        limit = count if not max_pages else min(max_pages, count)
        page_texts = [_clean(pages[i].extract_text() or "") for i in range(limit)]
        title = str((reader.metadata or {}).get("/Title") or "")
    except PdfReadError as exc:
        raise ValueError(f"path: {file.name} is not a readable PDF ({exc})") from exc
    return {
        "text": "\n\n".join(t for t in page_texts if t),
        "pages": count,
        "page_texts": page_texts,
        "title": title,
        "empty_pages": sum(1 for t in page_texts if not t),
    }


def _clean(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip()
