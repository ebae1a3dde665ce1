"""Frequent content words and phrases of a text (English words, Chinese character pairs)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from typing import Any

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further get
got had has have having he her here hers him his how i if in into is it its itself just me more
most my no nor not now of off on once only or other our ours out over own same she should so
some such than that the their theirs them then there these they this those through to too under
until up very was we were what when where which while who whom why will with would you your
yours one two three four five six seven eight nine ten per less far every each many much
""".split())
CJK_STOP = frozenset("的了是在和也有就都而及与或这那个我你他她它们以为对于但如果因为所以已经还没"
                     "一不人上下中大到说要会可以能很")


def run(text: str, limit: int = 10) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: nothing to analyse")
    if limit is not None and limit < 1:
        raise ValueError(f"limit: must be at least 1, not {limit}")
    words = [_singular(w) for w in re.findall(r"[a-z][a-z'-]*[a-z]|[a-z]", text.lower())]
    content = [w for w in words if w not in STOPWORDS and len(w) > 2]
    counts: Counter[str] = Counter(content)
    pairs = Counter(f"{a} {b}" for a, b in itertools.pairwise(words)
                    if a not in STOPWORDS and b not in STOPWORDS and len(a) > 2 and len(b) > 2)
    counts.update({phrase: n for phrase, n in pairs.items() if n >= 2})
    counts.update(_chinese_terms(text))
    scored = []
    for term, count in counts.items():
        if count < 2 and len(counts) > limit * 2:
            continue
        weight = 1.5 if " " in term else 1.0 + min(len(term), 12) / 24
        scored.append((round(count * weight * (1 + math.log(count)), 3), count, term))
    scored.sort(key=lambda item: (-item[0], item[2]))
    keywords = [{"term": term, "count": count, "score": score}
                for score, count, term in scored[: limit or 10]]
    return {"keywords": keywords, "terms": [k["term"] for k in keywords]}


def _chinese_terms(text: str) -> Counter[str]:
    """Repeated 2-6 character strings; a string is dropped when a longer one always contains it."""
    grams: Counter[str] = Counter()
    for chunk in re.findall(r"[\u3400-\u9fff]+", text):
        for size in range(2, 7):
            for i in range(len(chunk) - size + 1):
                gram = chunk[i:i + size]
                if gram[0] not in CJK_STOP and gram[-1] not in CJK_STOP:
                    grams[gram] += 1
    repeated = {g: n for g, n in grams.items() if n >= 2}
    return Counter({g: n for g, n in repeated.items()
                    if not any(len(o) > len(g) and g in o and m >= n for o, m in repeated.items())})


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
