"""Lexical analysis for retrieval: tokens that handle case, English plurals and CJK text.

CJK runs have no spaces, so a whole run would be one useless token. Each run becomes its
overlapping bigrams ("周报生成" -> 周报 报生 生成), as Lucene's CJK analyzer does, so "生成周报"
still matches; single characters alone match too much of any long text to be evidence. A run of
one character stays a token unless it is a function word (的, 了, 我...).

>>> tokenize("Sending Emails to the Teams")
['send', 'email', 'team']
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import lru_cache

_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK_CHARS}]+|[^\W_{_CJK_CHARS}]+")
_CJK = re.compile(rf"^[{_CJK_CHARS}]+$")

STOPWORDS = frozenset(
    "a an and are as at be by for from has have how i in into is it its me my of on or our so "
    "that the their them then there these this those to us use used using was we what when "
    "where which while who will with you your can could would should do does please want need "
    "help".split())


# Function characters of Chinese that carry no topic on their own (they still count inside
# bigrams): 的 了 是 我 帮 ... .
CJK_STOP_CHARS = frozenset("的了是在我你他她它们这那个一和与及帮请要把给吗呢吧啊也就都还又很会能可以对从到为被让用有不")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: plurals and the commonest verb endings, nothing aggressive."""
    if len(word) <= 3 or not word.isascii():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) > 5:
        base = word[:-3]
        return base[:-1] if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "lsz" \
            else base
    if word.endswith("ed") and len(word) > 4 and not word.endswith("eed"):
        base = word[:-2]
        return base[:-1] if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "lsz" \
            else base
    return word


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    tokens: list[str] = []
    for match in _WORD.finditer(text.lower()):
        run = match.group()
        if _CJK.match(run):
            if len(run) == 1:
                if run not in CJK_STOP_CHARS:
                    tokens.append(run)
            else:
                tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
            continue
        if not keep_stopwords and run in STOPWORDS:
            continue
        tokens.append(stem(run))
    return tokens


_TOKENIZER_PROBE = ("Sending Emails to the Teams' reports: 3 PDFs, v2.1, snake_case, CamelCase; "
                    "生成周报的工具 把网页转换成 Markdown、日本語のテキスト 한국어 텍스트")


def tokenizer_signature(tokens: Callable[[str], list[str]] = tokenize) -> str:
    """A fingerprint of the tokenizer: its tokens for a probe text of English, Chinese,
    Japanese and Korean. When it changes, tokens a store kept are stale (the Neo4j store's
    ``tokens`` property, the embedded store's lexicon)."""
    joined = "\x1f".join(tokens(_TOKENIZER_PROBE))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


@lru_cache(maxsize=256)
def query_tokens(text: str) -> tuple[str, ...]:
    """``tokenize`` for a request, remembered: one search reads the same request several times
    (groups, examples, skills, the router)."""
    return tuple(tokenize(text))


_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_WEB = re.compile(r"\b(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)


def as_matched(request: str) -> str:
    """The request as retrieval matches it: an email address or a web address it carries is
    a value the task is done with, not a word of the task, and stands as its kind ("email it
    to ann@example.com" reads "email it to an email address": the address's own words matched
    skills whose examples hold other addresses).

    >>> as_matched("email it to ann@example.com, and see https://example.com/q?x=1")
    'email it to an email address, and see a web address'
    """
    text = _WEB.sub("a web address", request)
    return _ADDRESS.sub("an email address", text)


def cjk_share(text: str) -> float:
    """The share of a text's letters that are CJK characters."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 0.0
    return sum(1 for ch in letters if _CJK.match(ch)) / len(letters)
