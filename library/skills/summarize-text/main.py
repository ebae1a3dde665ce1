"""Extractive summary: keep the sentences that best cover the text's frequent words."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

_STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most my
no nor not now of off on once only or other our ours out over own same she should so some such
than that the their theirs them then there these they this those through to too under until up
very was we were what when where which while who whom why will with would you your yours
""".split())
_CJK = re.compile(r"[\u3400-\u9fff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|(?<=[。！？；])")
_NOISE = re.compile(r"^(page \d+( of \d+)?|\d+)$", re.IGNORECASE)


def run(text: str, max_sentences: int = 4, metrics: list[dict[str, Any]] | None = None
        ) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: nothing to summarise")
    if max_sentences is not None and max_sentences < 1:
        raise ValueError(f"max_sentences: must be at least 1, not {max_sentences}")
    sentences = split_sentences(text)
    if not sentences:
        raise ValueError("text: no complete sentences found to summarise")
    frequencies = Counter(token for s in sentences for token in tokens(s))
    figures = [str(m.get("display", "")) for m in metrics or [] if isinstance(m, dict)]
    scored = []
    for index, sentence in enumerate(sentences):
        words = tokens(sentence)
        if not words:
            continue
        score = sum(frequencies[w] for w in set(words)) / math.sqrt(len(words))
        if re.search(r"\d", sentence):
            score *= 1.2
        score *= 1 + 0.5 * sum(1 for f in figures if f and f in sentence)
        score *= 1.15 if index < 2 else 1.0
        scored.append((score, index))
    keep = sorted(index for _, index in sorted(scored, reverse=True)[: max_sentences or 4])
    chosen = [sentences[i] for i in keep]
    joiner = "" if chosen and _CJK.search(chosen[0]) else " "
    return {"summary": joiner.join(chosen), "sentences": chosen,
            "total_sentences": len(sentences)}


def split_sentences(text: str) -> list[str]:
    """Sentences of prose; headings, footers and short fragments are left out."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=[-*•]\s)", text):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not _NOISE.match(ln)]
        if len(lines) == 1 and not re.search(r"[.!?。！？]$", lines[0]):
            continue  # a heading or label standing alone
        # A short line without final punctuation on its own is a heading or a label.
        prose = [ln for ln in lines if len(ln.split()) > 6 or re.search(r"[.!?。！？]$", ln)
                 or _CJK.search(ln)]
        joined = " ".join(prose) if not any(_CJK.search(ln) for ln in prose) else "".join(prose)
        for part in _SENTENCE_END.split(joined):
            part = part.strip()
            if len(part.split()) >= 4 or (len(_CJK.findall(part)) >= 8):
                out.append(part)
    return out


def tokens(sentence: str) -> list[str]:
    words = [w for w in re.findall(r"[a-z][a-z'-]+", sentence.lower()) if w not in _STOPWORDS]
    for chunk in re.findall(r"[\u3400-\u9fff]+", sentence):
        words.extend(chunk[i:i + 2] for i in range(len(chunk) - 1))
    return words
