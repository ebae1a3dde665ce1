"""Lexicon sentiment with negation and intensifiers, English and Chinese."""

from __future__ import annotations

import math
import re
from typing import Any

POSITIVE = frozenset("""
good great excellent amazing love loved lovely happy pleased helpful quick fast easy thanks thank
appreciate appreciated perfect wonderful fantastic smooth resolved recommend glad satisfied nice
""".split()) | frozenset("满意 感谢 谢谢 好评 很好 不错 方便 及时 喜欢 专业 高效 推荐".split())
NEGATIVE = frozenset("""
bad terrible awful horrible angry upset frustrated frustrating disappointed disappointing annoyed
broken slow useless worst hate poor wrong unacceptable ridiculous failed failure problem problems
issue issues error errors locked charged refund complaint complain never cannot can't waiting
delay delayed late lost damaged rude unhappy
""".split()) | frozenset("""
投诉 失望 生气 差评 糟糕 太差 很差 拖延 延误 没有回复 不回复 欺骗 愤怒 退款 损坏 破损 恶劣
""".split())
NEGATORS = frozenset("not no never hardly isn't wasn't don't didn't doesn't 不 没 没有 别".split())
INTENSIFIERS = frozenset("very really extremely so totally absolutely 非常 特别 太 十分 极其".split())


def run(text: str) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: nothing to score")
    tokens = _tokens(text)
    total = 0.0
    positives: list[str] = []
    negatives: list[str] = []
    for index, token in enumerate(tokens):
        polarity = 1 if token in POSITIVE else -1 if token in NEGATIVE else 0
        if not polarity:
            continue
        before = tokens[max(0, index - 3):index]
        weight = 2.0 if any(t in INTENSIFIERS for t in before[-2:]) else 1.0
        if any(t in NEGATORS for t in before) and token not in NEGATORS:
            polarity = -polarity
        total += polarity * weight
        (positives if polarity > 0 else negatives).append(
            token if polarity == (1 if token in POSITIVE else -1) else f"not {token}")
    if text.count("!") >= 3:
        total *= 1.5
    score = round(math.tanh(total / 4), 3)
    label = "positive" if score > 0.15 else "negative" if score < -0.15 else "neutral"
    return {"score": score, "label": label, "positive_terms": positives,
            "negative_terms": negatives}


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    cjk_words = sorted(POSITIVE | NEGATIVE | NEGATORS | INTENSIFIERS, key=len, reverse=True)
    cjk_words = [w for w in cjk_words if re.search(r"[\u4e00-\u9fff]", w)]
    for piece in re.findall(r"[a-z]+(?:'[a-z]+)?|[\u4e00-\u9fff]+", text.lower()):
        if not re.match(r"[\u4e00-\u9fff]", piece):
            out.append(piece)
            continue
        i = 0
        while i < len(piece):  # greedy longest match against the Chinese lexicon
            word = next((w for w in cjk_words if piece.startswith(w, i)), None)
            out.append(word or piece[i])
            i += len(word) if word else 1
    return out
