"""BM25 search over a folder of Markdown help articles (English and Chinese)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

KB = Path(__file__).resolve().parent / "kb"
_STOPWORDS = frozenset("""
a an and are as at be but by can do does for from has have how i if in into is it its me my no
not of on or our please so that the their them then there this to was we were what when where
which will with would you your hello hi thanks thank
""".split())


class Article(NamedTuple):
    id: str
    title: str
    category: str
    tags: str
    body: str
    path: Path


def run(query: str, category: str = "", limit: int = 3, kb_dir: str = "") -> dict[str, Any]:
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query: the question is empty")
    if limit is not None and limit < 1:
        raise ValueError(f"limit: must be at least 1, not {limit}")
    folder = Path(kb_dir).expanduser() if kb_dir else KB
    if not folder.is_dir():
        raise ValueError(f"kb_dir: no such folder: {folder}")
    articles = [_read(p) for p in sorted(folder.glob("*.md"))]
    if not articles:
        raise ValueError(f"kb_dir: no .md articles in {folder}")

    docs = [tokens(f"{a.title} {a.title} {a.tags} {a.tags} {a.body}") for a in articles]
    average = sum(len(d) for d in docs) / len(docs)
    frequency = Counter(term for doc in docs for term in set(doc))
    terms = set(tokens(query))
    ranked = []
    for article, doc in zip(articles, docs, strict=True):
        counts = Counter(doc)
        score = 0.0
        for term in terms & counts.keys():
            idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / average))
        if score > 0 and category and article.category == category.lower():
            score *= 1.5
        if score > 0:
            ranked.append((score, article))
    ranked.sort(key=lambda item: (-item[0], item[1].id))
    results = [{"id": a.id, "title": a.title, "category": a.category, "score": round(s, 3),
                "snippet": _snippet(a.body, terms), "path": str(a.path)}
               for s, a in ranked[: limit or 3]]
    best = ranked[0][1] if ranked else None
    return {"results": results, "found": bool(results),
            "best_title": best.title if best else "", "best_answer": best.body if best else ""}


def tokens(text: str) -> list[str]:
    words = [_stem(w) for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())
             if w not in _STOPWORDS and len(w) > 1]
    for chunk in re.findall(r"[\u3400-\u9fff]+", text):
        words.extend(chunk[i:i + 2] for i in range(len(chunk) - 1))
    return words


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _read(path: Path) -> Article:
    lines = path.read_text(encoding="utf-8").splitlines()
    title = lines[0].lstrip("# ").strip() if lines else path.stem
    meta: dict[str, str] = {}
    index = 1
    while index < len(lines) and (m := re.match(r"^(category|tags):\s*(.*)$", lines[index])):
        meta[m.group(1)] = m.group(2).strip()
        index += 1
    body = "\n".join(lines[index:]).strip()
    return Article(path.stem, title, meta.get("category", "").lower(), meta.get("tags", ""),
                   body, path)


def _snippet(body: str, terms: set[str], width: int = 160) -> str:
    flat = " ".join(body.split())
    positions = [flat.lower().find(t) for t in terms if len(t) > 2 or re.search(r"[^\x00-\x7f]", t)]
    start = max(0, min((p for p in positions if p >= 0), default=0) - 40)
    snippet = flat[start:start + width]
    return ("…" if start else "") + snippet + ("…" if start + width < len(flat) else "")
