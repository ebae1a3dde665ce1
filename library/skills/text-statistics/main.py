"""Counts, reading time and script of a text."""

from __future__ import annotations

import re
from typing import Any

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-zÀ-ɏЀ-ӿ0-9]+(?:['’-][A-Za-zÀ-ɏЀ-ӿ0-9]+)*")


def run(text: str, words_per_minute: int = 230) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: nothing to measure")
    if words_per_minute is None or words_per_minute < 50:
        raise ValueError(f"words_per_minute: must be at least 50, not {words_per_minute}")
    latin_words = _WORD.findall(text)
    cjk = len(_CJK.findall(text))
    words = len(latin_words) + cjk
    sentences = max(1, len([s for s in re.split(r"[.!?。！？]+", text) if s.strip()]))
    paragraphs = len([p for p in re.split(r"\n\s*\n", text) if p.strip()])
    distinct = len({w.lower() for w in latin_words}) + len(set(_CJK.findall(text)))
    latin_letters = sum(len(w) for w in latin_words)
    if cjk and latin_letters:
        share = cjk / (cjk + latin_letters / 2)  # two Latin letters weigh about one ideograph
        script = "cjk" if share > 0.8 else "latin" if share < 0.2 else "mixed"
    else:
        script = "cjk" if cjk else "latin" if latin_words else "other"
    minutes = len(latin_words) / words_per_minute + cjk / 300
    return {
        "words": words,
        "sentences": sentences,
        "paragraphs": paragraphs,
        "characters": len(re.sub(r"\s", "", text)),
        "cjk_characters": cjk,
        "average_sentence_words": round(words / sentences, 1),
        "lexical_diversity": round(distinct / words, 3) if words else 0.0,
        "reading_minutes": round(minutes, 1),
        "script": script,
    }
