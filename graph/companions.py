""""Usually used with" for a cold library (no groups, no runs), read from the library itself.

Four sources, strongest first; each companion says which one put it there and why:

- ``depends_on``: a prerequisite the skill declares, or a skill that declares it as one.
- ``data_flow``: a declared output of one skill feeds a required input of the other, by name and
  compatible type. A name more than ``max_fan`` skills produce or require (``result``, ``id``)
  says nothing about which two go together and is skipped.
- ``mentions``: the skill's description or instructions name the other (or the other's name
  it). A name with a hyphen, an underscore or a space (``scientific-schematics``) counts
  wherever it stands as a whole word. A one-word name (``pdf``, ``linear``, ``connect``) counts
  only in a form that means the skill: ``the pdf skill`` (not ``a pdf skill``, a kind of
  skill in an example), ``pdf/SKILL.md``, ``../pdf``, ``skills/pdf/``, ``superpowers:pdf``,
  ``use pdf`` closing a clause ("for tables use polars;"), or after words saying two tools
  work together ("complements Scanpy", "integration with scanpy", "combine with matplotlib";
  not "integrates with XLSX files"). Backticks alone are not enough: they mark code
  (```matplotlib```, ```.pdf```) as often as skills. A clause that says ``instead``, ``not``,
  ``never`` or ``rather than`` names a substitute or a skill to avoid, and does not count; nor
  does a skill's own name spelled another way (``Zoho Desk Automation`` in
  ``zoho_desk-automation``). A compound name found bare in more than ``common_share`` of the
  library's texts (and in at least ``common_min``) is a common word: only its strong forms
  count. A sibling in the same folder is also named by what it does, followed by ``skill``:
  "select an available image generation skill" names ``baoyu-image-gen`` beside
  ``baoyu-slide-deck`` (the folder's own word ``baoyu`` left out, ``gen`` read as the start of
  a word; see :func:`roles`).
- ``package``: skills in the same folder (a plugin's or package's), when that folder holds
  between ``package_sizes`` skills and is not the library's root or its ``skills`` folder, nor
  the one folder all the library's skills sit in. A folder whose names make two families or
  more (``gh-fix-ci`` and ``gh-address-comments`` beside four ``notion-...``) collects several
  packages: each family is one (see :func:`families`).

Text is read in one pass per skill with one pattern of every name (names × texts would be 1.7M
searches on a 1,300-skill library).

>>> found = companions(load_library([Path("library")]).skills.values())
>>> found["csv-normalize"][0]
Companion(name='csv-deduplicate', id='sk-...', source='mentions', reason='its instructions name `csv-deduplicate`', outgoing=True, also=())
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from skillgrove.skills.model import Skill, relative_folder

Source = Literal["depends_on", "data_flow", "mentions", "package"]
SOURCES: tuple[Source, ...] = ("depends_on", "data_flow", "mentions", "package")
"""Strongest first: the order companions are listed in."""


@dataclass(frozen=True)
class CompanionSettings:
    """Defaults chosen on ``shared/corpora/skills`` (1,299 skills); ``None`` turns a source off.

    >>> CompanionSettings(package_sizes=None).package_sizes is None
    True
    """

    package_sizes: tuple[int, int] | None = (2, 12)
    """A folder is a package when it directly holds this many skills (inclusive)."""
    max_fan: int | None = 12
    """A data-flow name produced or required by more skills than this links none of them."""
    common_share: float | None = 0.05
    """A compound name found in more than this share of the texts needs a strong form."""
    common_min: int = 20
    """... and in at least this many texts (a small library has no common compound names)."""
    limit: int | None = 12
    """At most this many companions per skill, the strongest kept."""
    role_share: float | None = 1 / 3
    """A word in more than this share of a folder's names (of three or more) is the folder's
    own (``baoyu`` in ``baoyu-image-gen``, ``automation``): the other words of a sibling's name
    say what it does, and a text asking for a skill by them names it (see :func:`roles`)."""


DEFAULT_SETTINGS = CompanionSettings()


@dataclass(frozen=True)
class Companion:
    """A skill usually used with another one, and why.

    ``outgoing``: the skill itself declares, feeds or names the companion (``False``: the
    companion declares, feeds or names the skill). ``also``: weaker sources linking the same two
    skills."""

    name: str
    id: str
    source: Source
    reason: str
    outgoing: bool
    also: tuple[Source, ...] = ()


def companions(skills: Iterable[Skill], settings: CompanionSettings = DEFAULT_SETTINGS,
               read_body: Callable[[Skill], str] | None = None,
               ) -> dict[str, tuple[Companion, ...]]:
    """Each skill's companions by its name (an empty tuple for none), strongest first: by
    source (:data:`SOURCES`), the skill's own declarations and words before the others', then by
    name. ``read_body`` reads a skill's instructions (``Skill.body`` by default; a body that
    cannot be read counts as empty)."""
    by_name: dict[str, Skill] = {}
    for skill in skills:
        by_name.setdefault(skill.name, skill)
    links: dict[tuple[str, str], list[tuple[Source, str, bool]]] = defaultdict(list)

    def link(a: str, b: str, source: Source, out_reason: str, in_reason: str) -> None:
        if a != b:
            links[a, b].append((source, out_reason, True))
            links[b, a].append((source, in_reason, False))

    for skill in by_name.values():
        for needed in dict.fromkeys(skill.depends_on):
            if needed in by_name:
                link(skill.name, needed, "depends_on", f"it declares it needs `{needed}` first",
                     f"`{skill.name}` declares it needs it first")
    if settings.max_fan is not None:
        for producer, output, consumer in data_flow(by_name.values(), settings.max_fan):
            link(producer, consumer, "data_flow",
                 f"its output `{output}` feeds `{consumer}`'s required input `{output}`",
                 f"`{producer}`'s output `{output}` feeds its required input `{output}`")
    texts = {name: _text(skill, read_body) for name, skill in by_name.items()}
    for name, named in mentions(texts, settings).items():
        for other, where in named.items():
            verb = "names" if where == "description" else "name"
            link(name, other, "mentions", f"its {where} {verb} `{other}`",
                 f"`{name}`'s {where} {verb} it")
    if settings.role_share is not None:
        folders = {name: str(skill.folder.parent) for name, skill in by_name.items()}
        for name, asked in roles(texts, folders, settings.role_share).items():
            for other, (label, phrase) in asked.items():
                verb = "asks" if label == "description" else "ask"
                link(name, other, "mentions", f"its {label} {verb} for `{other}`: '{phrase}'",
                     f"`{name}`'s {label} {verb} for it: '{phrase}'")
    if settings.package_sizes is not None:
        for folder, members in packages(by_name.values(), settings.package_sizes).items():
            for family, names in families(members):
                reason = f"same package folder '{folder}' ({len(members)} skills)" + (
                    f", both '{family}-'" if family else "")
                for a in names:
                    for b in names:
                        if a < b:
                            link(a, b, "package", reason, reason)
    out: dict[str, tuple[Companion, ...]] = {name: () for name in by_name}
    grouped: dict[str, list[Companion]] = defaultdict(list)
    for (a, b), found in links.items():
        found.sort(key=lambda f: (SOURCES.index(f[0]), not f[2]))
        source, reason, outgoing = found[0]
        also = tuple(dict.fromkeys(s for s, _, _ in found[1:] if s != source))
        grouped[a].append(Companion(b, by_name[b].id, source, reason, outgoing, also))
    for name, items in grouped.items():
        items.sort(key=lambda c: (SOURCES.index(c.source), not c.outgoing, c.name))
        out[name] = tuple(items[: settings.limit] if settings.limit is not None else items)
    return out


def _text(skill: Skill, read_body: Callable[[Skill], str] | None) -> tuple[str, str]:
    try:
        body = read_body(skill) if read_body is not None else skill.body()
    except (OSError, UnicodeError):
        body = ""
    return skill.description, body


# -- data flow ---------------------------------------------------------------------------------


def data_flow(skills: Iterable[Skill], max_fan: int = 12) -> list[tuple[str, str, str]]:
    """(producer, name, consumer): ``producer`` declares an output ``name`` that ``consumer``
    requires as an input, of a compatible JSON Schema type (equal, one of them untyped, or an
    integer where a number is wanted). Names more than ``max_fan`` skills produce, or more than
    ``max_fan`` require, are left out."""
    producers: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    consumers: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for skill in skills:
        for name, spec in skill.output_properties().items():
            producers[name].append((skill.name, _type(spec)))
        properties = skill.input_properties()
        for name in skill.required_inputs():
            consumers[name].append((skill.name, _type(properties.get(name))))
    found = []
    for name in sorted(producers.keys() & consumers.keys()):
        if len(producers[name]) > max_fan or len(consumers[name]) > max_fan:
            continue
        for producer, given in producers[name]:
            for consumer, wanted in consumers[name]:
                if producer != consumer and _compatible(given, wanted):
                    found.append((producer, name, consumer))
    return found


def _type(spec: Any) -> frozenset[str]:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(k for k in kind if isinstance(k, str))
    return frozenset()


def _compatible(given: frozenset[str], wanted: frozenset[str]) -> bool:
    if not given or not wanted or given & wanted:
        return True
    return "integer" in given and "number" in wanted


# -- packages ----------------------------------------------------------------------------------


def packages(skills: Iterable[Skill], sizes: tuple[int, int] = (2, 12),
             ) -> dict[str, tuple[str, ...]]:
    """Folders holding between ``sizes`` skills directly (by their path below the root, the
    names sorted), except a library root, its ``skills`` folder (the layout of
    :mod:`groups.library`) and a folder holding every skill of the library."""
    members: dict[Path, list[str]] = defaultdict(list)
    roots: dict[Path, Path] = {}
    every = 0
    for skill in skills:
        every += 1
        members[skill.folder.parent].append(skill.name)
        roots[skill.folder.parent] = skill.root
    low, high = sizes
    out = {}
    for folder, names in members.items():
        if not low <= len(names) <= high or len(names) == every:
            continue
        if _same(folder, roots[folder]) or _same(folder, roots[folder] / "skills"):
            continue
        out[relative_folder(folder, roots[folder])] = tuple(sorted(names))
    return dict(sorted(out.items()))


def families(names: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """A package folder's skills that go together: all of them (family ``""``), unless their
    names make two families or more (a first word two names share: ``gh-fix-ci`` and
    ``gh-address-comments``, ``notion-...``): then the folder collects several packages, and
    each family is one (a name in no family is in none).

    >>> families(["gh-fix-ci", "gh-address-comments", "notion-capture", "notion-spec"])
    [('gh', ('gh-fix-ci', 'gh-address-comments')), ('notion', ('notion-capture', 'notion-spec'))]
    """
    first = {name: _words(name)[0] if _words(name) else "" for name in names}
    counts = Counter(first.values())
    shared = sorted(word for word, count in counts.items() if word and count >= 2)
    if len(shared) < 2:
        return [("", tuple(names))]
    return [(word, tuple(n for n in names if first[n] == word)) for word in shared]


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_\s]+", name.lower()) if w]


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


# -- roles -------------------------------------------------------------------------------------

_GLUE = frozenset({"a", "an", "and", "for", "in", "of", "on", "the", "to", "with"})
_ROLE_AFTER = re.compile(r"[`*'\"]*\s+skills?(?![a-z0-9_-])", re.IGNORECASE)
_LAST_WORD = re.compile(r"([a-z0-9]+)[`*'\"]*$", re.IGNORECASE)


def _role_pattern(words: Sequence[str]) -> re.Pattern[str]:
    """The words in order, as a text ending there: each of three letters or more possibly
    longer (``gen``: generation), glue words allowed between them."""
    glue = r"[\s_-]+(?:(?:" + "|".join(sorted(_GLUE)) + r")[\s_-]+)?"
    body = glue.join(re.escape(w) + ("[a-z]*" if len(w) >= 3 else "") for w in words)
    return re.compile(rf"(?<![a-z0-9_-]){body}$", re.IGNORECASE)


def role_words(names: Sequence[str], share: float = 1 / 3) -> dict[str, tuple[str, ...]]:
    """The words of each name that say what the skill does: without the folder's own words (in
    more than ``share`` of ``names``, when there are three or more) and glue words. A name left
    with fewer than two words has no role: one word (``comic``) is said of too many things.

    >>> role_words(["baoyu-image-gen", "baoyu-slide-deck", "baoyu-comic"])
    {'baoyu-image-gen': ('image', 'gen'), 'baoyu-slide-deck': ('slide', 'deck')}
    """
    words = {name: [w for w in _words(name) if w not in _GLUE] for name in names}
    counts = Counter(w for ws in words.values() for w in set(ws))
    own = ({w for w, n in counts.items() if n > share * len(names)} if len(names) >= 3
           else set())
    out = {}
    for name, ws in words.items():
        kept = tuple(w for w in ws if w not in own)
        if len(kept) >= 2:
            out[name] = kept
    return out


def roles(texts: Mapping[str, Sequence[str]], folders: Mapping[str, str],
          share: float = 1 / 3) -> dict[str, dict[str, tuple[str, str]]]:
    """Siblings a skill's texts ask for by what they do rather than by name: "Select an
    available image generation skill" asks for ``baoyu-image-gen`` beside it. The words of the
    sibling's role (:func:`role_words`) in order, each word of three letters or more possibly
    longer (``gen``: generation), glue words between them allowed, then ``skill``. Only
    siblings of one folder: what makes a word the folder's own is known there. For each skill
    (its name -> its texts: description, instructions), {sibling: (where, the words said)}."""
    by_folder: dict[str, list[str]] = defaultdict(list)
    for name in texts:
        by_folder[folders.get(name, "")].append(name)
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for members in by_folder.values():
        if len(members) < 2:
            continue
        role = role_words(members, share)
        if not role:
            continue
        # Tried only before each "skill" a text says, and only the roles whose last word
        # starts the word said there: every role at every position took 13 s on the corpus
        # (its 832-skill folder).
        prefixed: dict[str, list[str]] = defaultdict(list)
        exact: dict[str, list[str]] = defaultdict(list)
        for other, words in role.items():
            (prefixed if len(words[-1]) >= 3 else exact)[words[-1]].append(other)
        patterns: dict[str, re.Pattern[str]] = {}
        for name in members:
            own = _key(name)
            for label, text in zip(("description", "instructions"), texts[name], strict=False):
                for after in _ROLE_AFTER.finditer(text):
                    last = _LAST_WORD.search(text, max(0, after.start() - 40), after.start())
                    if last is None:
                        continue
                    word = last.group(1).lower()
                    candidates = exact.get(word, []) + [
                        o for k in range(3, len(word) + 1) for o in prefixed.get(word[:k], ())]
                    for other in candidates:
                        if _key(other) == own or other in out.get(name, {}):
                            continue
                        if other not in patterns:
                            patterns[other] = _role_pattern(role[other])
                        match = patterns[other].search(text, max(0, after.start() - 80),
                                                       after.start())
                        if match is None or _AVOID.search(
                                _clause(text, match.start(), after.end())):
                            continue
                        said = text[match.start():after.end()]
                        phrase = " ".join(said.replace("`", "").replace("*", "").split())
                        out.setdefault(name, {})[other] = (label, phrase)
    return out


# -- mentions ----------------------------------------------------------------------------------

_SKILL_AFTER = re.compile(r"[`*'\"]*\s+skill\b", re.IGNORECASE)
_PATH_BEFORE = ("../", "skills/", "skill/")
"""A folder name after these is a skill's folder (``../pdf/scripts``, ``skills/pdf/``); other
slashes join lists as often as paths (``PNG/PDF/SVG``, ``pandas/polars``)."""
_USE_BEFORE = re.compile(r"\buse\s+(?:the\s+)?$", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[`*]*(?:[;.)]|\s*$)")
"""Not a comma: "use pdf, docx or html" lists formats."""
_NAMESPACE_BEFORE = re.compile(r"(?<![A-Za-z0-9_./:-])[a-z][a-z0-9-]*:$")
_A_BEFORE = re.compile(r"\b(?:a|an)\s+[`*'\"]*$", re.IGNORECASE)
"""``a pdf skill``, ``an xlsx skill``: a kind of skill in an example ("a negative test for a PDF
skill"), not a skill of the library."""
_WITH_BEFORE = re.compile(
    r"\b(?:complements?|complementary\s+to|integrat(?:es|ed|ing|ion)\s+with|combined?\s+with"
    r"|in\s+conjunction\s+with|together\s+with)\s+(?:the\s+)?[`*'\"]*$", re.IGNORECASE)
"""Words saying two tools are used together: "Complements Scanpy", "integration with scanpy",
"Combine with Matplotlib"."""
_FORMAT_AFTER = re.compile(r"[`*'\"]*\s+(?:files?|formats?|documents?|data)\b", re.IGNORECASE)
"""... unless what follows makes the name a file format: "integrates with XLSX files"."""

_AVOID = re.compile(r"\b(?:instead|not|never|don't|do not|rather than)\b", re.IGNORECASE)
"""A clause that says to use the other skill instead, or not to, names a substitute or a
skill to avoid: "use the `treatment-plans` skill instead", "Do NOT invoke frontend-design"."""

Form = Literal["compound", "skill", "path", "namespace", "use", "with"]


class MentionFinder:
    """Which names of a library a text mentions: one compiled pattern of every name (a trie, so
    a position is rejected after a character or two) run once over the text, letter case
    ignored. A name matches as a whole word: not inside ``python-docx``, ``pdf_tools`` or
    ``file.pdf``. Names in ``common`` need a strong form even when compound.

    >>> finder = MentionFinder(["pdf", "docx-tools"])
    >>> finder.find("Convert the PDF first; then use the pdf skill, or docx-tools.")
    {'pdf': 'skill', 'docx-tools': 'compound'}
    """

    def __init__(self, names: Iterable[str], common: Iterable[str] = ()) -> None:
        self._names: dict[str, list[str]] = defaultdict(list)
        for name in names:
            spelled = " ".join(name.lower().split())
            if spelled:
                self._names[spelled].append(name)
        self.common = frozenset(common)
        trie = _trie(self._names) if self._names else "(?!)"
        whole = rf"(?<![a-z0-9_-])(?<![a-z0-9]\.){trie}(?![a-z0-9_-])(?!\.[a-z0-9])"
        self._pattern = re.compile(whole)
        # Lower case first, then a case-sensitive pattern: three times faster than ignoring
        # case. A text whose lower case changes its length (a dotted capital I) is matched
        # as it is, ignoring case, so positions stay the text's own.
        self._pattern_any_case = re.compile(whole, re.IGNORECASE)

    def find(self, text: str, skip: str | None = None) -> dict[str, Form]:
        """Each name ``text`` mentions (but ``skip``) with the strongest form it was found in
        (any but ``compound`` before ``compound``), in the order first found."""
        found: dict[str, Form] = {}
        own = _key(skip) if skip is not None else None
        lowered = text.lower()
        matches = (self._pattern.finditer(lowered) if len(lowered) == len(text)
                   else self._pattern_any_case.finditer(text))
        for match in matches:
            for name in self._names.get(" ".join(match.group().lower().split()), ()):
                if found.get(name, "compound") != "compound" or _key(name) == own:
                    continue
                start, end = match.span()
                if _AVOID.search(_clause(text, start, end)):
                    continue
                form = self._form(text, start, end, name)
                if form is not None:
                    found[name] = form
        return found

    def _form(self, text: str, start: int, end: int, name: str) -> Form | None:
        before, after = text[max(0, start - 40):start], text[end:end + 40]
        if _SKILL_AFTER.match(after):
            return None if _A_BEFORE.search(before) else "skill"
        if after.lower().startswith("/skill.md") or before.lower().endswith(_PATH_BEFORE):
            return "path"
        if _NAMESPACE_BEFORE.search(before):
            return "namespace"
        if _USE_BEFORE.search(before) and _CLAUSE_END.match(after):
            return "use"
        if _WITH_BEFORE.search(before) and not _FORMAT_AFTER.match(after):
            return "with"
        if is_compound(name) and name not in self.common:
            return "compound"
        return None


def _key(name: str) -> str:
    """``Zoho Desk Automation`` and ``zoho_desk-automation`` are one name written two ways: a
    skill whose title is another's name names a copy of itself, not a companion."""
    return re.sub(r"[-_\s]+", "", name.lower())


def _clause(text: str, start: int, end: int) -> str:
    """The clause around ``text[start:end]``: from the last ``.;:`` or line break before it to
    the next one after it (at most 120 characters each way)."""
    head = text[max(0, start - 120):start]
    cut = max(head.rfind(c) for c in ".;:\n")
    tail = text[end:end + 120]
    stops = [i for i in (tail.find(c) for c in ".;\n") if i >= 0]
    return head[cut + 1:] + text[start:end] + tail[:min(stops, default=len(tail))]


def is_compound(name: str) -> bool:
    """A name with a hyphen, an underscore or a space: unlikely to be an ordinary word."""
    return any(c in name for c in "-_ ")


def mentions(texts: Mapping[str, Sequence[str]], settings: CompanionSettings = DEFAULT_SETTINGS,
             ) -> dict[str, dict[str, str]]:
    """For each skill (its name -> its texts: description, instructions), the names of the
    others it mentions, in order, each with where it was first found (``description`` or
    ``instructions``). Compound names found bare in too many of the texts are common words
    (see :class:`CompanionSettings`): only their strong forms count."""
    finder = MentionFinder(texts)
    found = {name: [finder.find(text, name) for text in parts] for name, parts in texts.items()}
    common: set[str] = set()
    if settings.common_share is not None and texts:
        bare: Counter[str] = Counter()
        for per_text in found.values():
            strong = {n for forms in per_text for n, form in forms.items() if form != "compound"}
            bare.update({n for forms in per_text for n in forms} - strong)
        floor = max(settings.common_min, settings.common_share * len(texts))
        common = {n for n, count in bare.items() if count > floor}
    out: dict[str, dict[str, str]] = {}
    for name, per_text in found.items():
        where: dict[str, str] = {}
        for label, forms in zip(("description", "instructions"), per_text, strict=False):
            for other, form in forms.items():
                if form != "compound" or other not in common:
                    where.setdefault(other, label)
        if where:
            out[name] = where
    return out


def _trie(names: Iterable[str]) -> str:
    """A pattern matching exactly ``names`` (lower case; a space matches any white space), the
    longer of two names that share a start tried first."""
    root: dict[str, Any] = {}
    for name in names:
        node = root
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [(r"\s+" if char == " " else re.escape(char)) + emit(child)
                    for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)
