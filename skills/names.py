"""Names that look like other names: what lets a skill pose as another one.

A name is reduced to its *skeleton*: NFKC-normalised, case-folded, stripped of invisible
format characters (zero-width spaces and joiners, bidi controls, the BOM: Unicode category
``Cf``), and every character Unicode's confusables data (UTS #39, as shipped in the
``confusable-homoglyphs`` package) lists as confusable with an ASCII letter, digit or sign
replaced by it. Two different names with one skeleton look the same on a screen:
``send-email`` and ``sеnd-email`` (a Cyrillic ``е``), ``send\\u200b-email``, the NFC and NFD
spellings of ``café``, ``PDF-Tools`` and ``pdf-tools``.

This skeleton maps towards ASCII only; it does not equate two ASCII spellings (``rn`` and
``m``), which a reader can tell apart.

>>> skeleton("s\\u0435nd-Email") == skeleton("send-email")
True
>>> invisible_characters("send\\u200b-email")
['U+200B ZERO WIDTH SPACE']
"""

from __future__ import annotations

import functools
import json
import unicodedata
from importlib import resources


def _ascii_printable(text: str) -> bool:
    return all(" " < ch < "\x7f" for ch in text)


@functools.cache
def _to_ascii() -> dict[str, str]:
    """Each non-ASCII character that the confusables data pairs with an ASCII spelling, and the
    shortest (then smallest) such spelling."""
    try:
        data = json.loads(resources.files("confusable_homoglyphs").joinpath(
            "confusables.json").read_text(encoding="utf-8"))
    except (ModuleNotFoundError, FileNotFoundError, OSError, ValueError):
        return {}  # without the data the skeleton is NFKC + case fold + invisibles only
    mapping: dict[str, str] = {}

    def offer(char: str, spelling: str) -> None:
        if len(char) != 1 or _ascii_printable(char) or not _ascii_printable(spelling):
            return
        current = mapping.get(char)
        if current is None or (len(spelling), spelling) < (len(current), current):
            mapping[char] = spelling

    for key, entries in data.items():
        for entry in entries:
            other = entry.get("c", "") if isinstance(entry, dict) else ""
            offer(key, other)
            offer(other, key)
    return mapping


def invisible_characters(name: str) -> list[str]:
    """The format characters in ``name`` (zero-width, bidi controls, ...), named."""
    return [f"U+{ord(ch):04X} {unicodedata.name(ch, 'UNNAMED')}" for ch in name
            if unicodedata.category(ch) == "Cf"]


def skeleton(name: str) -> str:
    """What ``name`` looks like, reduced (see the module docstring)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    table = _to_ascii()
    out = []
    for ch in text:
        if unicodedata.category(ch) == "Cf":
            continue
        out.append(table.get(ch, ch))
    return unicodedata.normalize("NFKC", "".join(out)).casefold()


def describe_difference(name: str, other: str) -> str:
    """The characters of ``name`` that are not plain ASCII, named (why it looks like another)."""
    odd = [f"U+{ord(ch):04X} {unicodedata.name(ch, 'UNNAMED')}" for ch in name
           if not _ascii_printable(ch)]
    if odd:
        return ", ".join(dict.fromkeys(odd))
    if unicodedata.normalize("NFC", name) != unicodedata.normalize("NFC", other):
        return "letter case"
    return "normalisation (NFC and NFD spellings)"


def is_plain(name: str) -> bool:
    """A name of ASCII letters, digits and signs, NFC: the spelling kept when two look alike."""
    return _ascii_printable(name)
