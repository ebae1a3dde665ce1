"""Safety at the door: a content scan of each skill before it is loaded.

Blocking rules reject the skill; warning rules load it and report. Every finding names its rule,
the file and the line, so a user can see exactly what tripped it. The scan covers SKILL.md and the
text files of the skill folder that could be executed (scripts), not nested skill folders.

The rules are deliberately about *patterns of harm* (fetch-and-execute, credential theft sent over
the network, reverse shells, wiping disks), not about tools: ``curl`` alone is fine,
``curl ... | sh`` is not.

The same ``prompt-injection`` rule also reads text that is not a skill at all: the outputs of a
run (a saved web page, an email, a PDF's text) before they are shown to the agent.
:func:`scan_untrusted_text` applies it together with ``instruction-lookalike``, a rule that only
makes sense for data — a heading named "Instructions", a ``<system>`` tag, a chat-template token —
because in a SKILL.md such headings are the point.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Action(StrEnum):
    BLOCK = "block"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    action: Action
    summary: str
    patterns: tuple[re.Pattern[str], ...]
    """Any one of them matching a line fires the rule."""
    together_with: tuple[re.Pattern[str], ...] = ()
    """If set, one of these must also match within ``window`` lines for the rule to fire."""
    window: int = 0
    triggers: tuple[str, ...] = ()
    """Cheap lowercase substrings, one of which must occur for the regexes to be worth running."""


@dataclass(frozen=True, slots=True)
class Finding:
    rule: Rule
    path: Path
    line: int
    excerpt: str


def _rx(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_NETWORK_SEND = _rx(
    r"\bcurl\b[^\n]*\s(-d|--data\S*|-F|--form|-T|--upload-file)\b",
    r"\bwget\b[^\n]*--post-(data|file)",
    r"\b(nc|ncat|netcat)\s+\S+\s+\d{2,5}\b",
    r"requests\.(post|put)\s*\(",
    r"urllib\.request\.urlopen\s*\([^)]*data\s*=",
    r"\bfetch\s*\([^)]*method\s*:\s*['\"](POST|PUT)",
    r"Invoke-(WebRequest|RestMethod)[^\n]*-Method\s+(Post|Put)",
)

_CREDENTIALS = _rx(
    r"~/\.ssh/(id_\w+|authorized_keys)|\.ssh/id_(rsa|ed25519|ecdsa|dsa)\b",
    r"\.aws/credentials|\.config/gcloud|\.azure/|\.kube/config|\.docker/config\.json",
    r"\.netrc\b|\.git-credentials\b|\.npmrc\b|\.pypirc\b",
    r"/etc/(shadow|passwd)\b",
    r"\b(printenv|env)\s*\|",
    r"os\.environ\b(?!\.get\(|\[)",
    r"(login|cookies?)\s*(data|\.sqlite)|Local State|keychain",
)

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        "download-and-execute",
        Action.BLOCK,
        "downloads code and pipes it straight into an interpreter",
        _rx(
            r"\b(curl|wget|fetch)\b[^\n|]*\|\s*(sudo\s+(-\S+\s+)*)?(ba|z|k|da)?sh\b",
            r"\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(python3?|perl|ruby|node)\b",
            r"\b(ba|z)?sh\s+(-c\s+)?[\"']?\$\(\s*(curl|wget)\b",
            r"\b(ba|z)?sh\s+<\(\s*(curl|wget)\b",
            r"\b(iex|Invoke-Expression)\b[^\n]*(DownloadString|iwr|Invoke-WebRequest|irm)\b",
            r"(DownloadString|iwr|irm|Invoke-WebRequest)\b[^\n]*\|\s*(iex|Invoke-Expression)\b",
        ),
        triggers=("curl", "wget", "fetch", "iex", "invoke-expression", "downloadstring", "iwr", "irm"),
    ),
    Rule(
        "obfuscated-execute",
        Action.BLOCK,
        "decodes a hidden payload and executes it",
        _rx(
            r"base64\s+(-d|--decode)[^\n|]*\|\s*(ba|z)?sh\b",
            r"exec\s*\(\s*(base64\.b64decode|zlib\.decompress|codecs\.decode)",
            r"eval\s*\(\s*(atob|Buffer\.from)\s*\(",
        ),
        triggers=("base64", "b64decode", "decompress", "codecs.decode", "atob", "buffer.from"),
    ),
    Rule(
        "credential-exfiltration",
        Action.BLOCK,
        "reads credentials or secrets and sends data over the network nearby",
        _CREDENTIALS,
        together_with=_NETWORK_SEND,
        window=5,
        triggers=(".ssh", ".aws", "gcloud", ".azure", ".kube", ".docker", ".netrc", "credentials", ".npmrc", ".pypirc", "/etc/", "printenv", "env", "cookie", "login", "local state", "keychain"),
    ),
    Rule(
        "reverse-shell",
        Action.BLOCK,
        "opens a shell for a remote host",
        _rx(
            r"\b(ba|z)?sh\s+-i\b[^\n]*/dev/tcp/",
            r"/dev/tcp/\S+/\d+\s*0\s*>\s*&\s*1",
            r"\bexec\s+\d+<>\s*/dev/tcp/",
            r"\b(nc|ncat|netcat)\b[^\n]*\s-(e|c)\s+/bin/(ba)?sh",
            r"socket\.socket\([^\n]*\)[^\n]*;[^\n]*(pty\.spawn|subprocess\.call\(\[?['\"]/bin/(ba)?sh)",
        ),
        triggers=("/dev/tcp", "/bin/sh", "/bin/bash", "pty.spawn"),
    ),
    Rule(
        "destructive-command",
        Action.BLOCK,
        "wipes the filesystem or a disk",
        _rx(
            r"\brm\s+(-[a-z]*r[a-z]*f[a-z]*|-[a-z]*f[a-z]*r[a-z]*)\s+(--no-preserve-root\s+)?(/|~|\$HOME)(\s|\*|$)",
            r"\bmkfs(\.\w+)?\s+/dev/",
            r"\bdd\s+[^\n]*of=/dev/(sd|nvme|hd|xvd|vd)[a-z]",
            r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
        ),
        triggers=("rm ", "mkfs", "dd ", ":(){"),
    ),
    Rule(
        "prompt-injection",
        Action.WARN,
        "tries to override the agent's instructions",
        _rx(
            r"\bignore\s+(all\s+)?(the\s+)?(previous|prior|above|earlier)\s+instructions\b",
            r"\bdisregard\s+(the\s+|your\s+)?(system\s+prompt|previous\s+instructions)\b",
            r"\byou\s+are\s+no\s+longer\s+bound\s+by\b",
        ),
        triggers=("ignore", "disregard", "no longer bound"),
    ),
    Rule(
        "hardcoded-secret",
        Action.WARN,
        "contains what looks like a real secret",
        _rx(
            r"\bAKIA[0-9A-Z]{16}\b",
            r"-----BEGIN (RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----",
            r"\bghp_[A-Za-z0-9]{36}\b",
            r"\bxox[baprs]-[A-Za-z0-9-]{10,}",
        ),
        triggers=("akia", "private key", "ghp_", "xox"),
    ),
    Rule(
        "shell-injection-risk",
        Action.WARN,
        "runs commands through a shell or evaluates strings as code",
        _rx(r"shell\s*=\s*True", r"\bos\.system\s*\(", r"(?<![\w.])eval\s*\(\s*input\s*\("),
        triggers=("shell", "os.system", "eval"),
    ),
    Rule(
        "world-writable",
        Action.WARN,
        "makes files writable by everyone",
        _rx(r"\bchmod\s+(-R\s+)?0?777\b"),
        triggers=("chmod",),
    ),
)

INSTRUCTION_LOOKALIKE = Rule(
    "instruction-lookalike",
    Action.WARN,
    "data that poses as instructions to the agent: a role tag, a chat-template token or a "
    "heading that addresses the model",
    _rx(
        r"</?\s*(system|assistant|developer|user|instructions?|system[_ -]?prompt|tool_call)\s*>",
        r"<\|\s*(im_start|im_end|system|assistant|user|endoftext|eot_id|start_header_id)\s*\|>",
        r"\[/?INST\]|<<\s*/?SYS\s*>>",
        r"^\s{0,3}#{1,6}\s*(new\s+|updated\s+|real\s+|system\s+)?(instructions?|system\s+prompt|"
        r"system\s+message|developer\s+message|assistant)\s*:?\s*$",
        r"^\s*(new|updated|real)\s+instructions\s*:",
        r"\b(reveal|print|repeat|show)\s+(me\s+)?(your|the)\s+(system\s+prompt|hidden\s+"
        r"instructions)\b",
        r"\byou\s+are\s+now\s+(in\s+)?(developer|god|jailbreak|dan)\b",
    ),
    triggers=("<", "[inst", "#", "instruction", "system prompt", "hidden instructions",
              "you are now"),
)
"""Not in :data:`DEFAULT_RULES`: it is for run outputs, never for SKILL.md (see the module
docstring)."""

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

RULES_BY_ID = {rule.id: rule for rule in DEFAULT_RULES}

SCANNED_SUFFIXES = frozenset(
    {".md", ".py", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".ps1", ".rb", ".pl"}
)


@dataclass(frozen=True, slots=True)
class SafetyPolicy:
    """Which rules apply. ``allow`` names rules a trusted library may switch off, explicitly."""

    rules: tuple[Rule, ...] = DEFAULT_RULES
    allow: frozenset[str] = frozenset()
    max_file_bytes: int = 256 * 1024

    def active_rules(self) -> tuple[Rule, ...]:
        return tuple(rule for rule in self.rules if rule.id not in self.allow)


def scan_text(text: str, path: Path, rules: Sequence[Rule]) -> list[Finding]:
    """Every rule hit in ``text``, at most one per rule (the first)."""
    findings: list[Finding] = []
    lowered = text.translate(_ASCII_LOWER)  # same length as text, so offsets carry over
    for rule in rules:
        offset = _first_hit(rule, text, lowered)
        if offset is not None:
            line_no = text.count("\n", 0, offset) + 1
            start = text.rfind("\n", 0, offset) + 1
            end = text.find("\n", offset)
            excerpt = text[start : end if end != -1 else len(text)].strip()[:160]
            findings.append(Finding(rule, path, line_no, excerpt))
    return findings


UNTRUSTED_TEXT_RULES: tuple[Rule, ...] = (RULES_BY_ID["prompt-injection"], INSTRUCTION_LOOKALIKE)


def scan_untrusted_text(text: str, source: str = "<text>",
                        rules: Sequence[Rule] = UNTRUSTED_TEXT_RULES) -> list[Finding]:
    """Where ``text`` — data from outside, such as a step's output — looks like instructions to
    the agent: the ``prompt-injection`` rule of the SKILL.md scan plus ``instruction-lookalike``.

    ``source`` names the text in the findings (``Finding.path``), e.g. ``"page.text"``::

        >>> [f.rule.id for f in scan_untrusted_text("Ignore previous instructions. <system>")]
        ['prompt-injection', 'instruction-lookalike']
    """
    return scan_text(text, Path(source), rules)


def _first_hit(rule: Rule, text: str, lowered: str) -> int | None:
    """Offset of the first match of the rule, or None.

    Rules are line-oriented. With triggers, only the lines holding one are searched, which keeps
    the scan of a thousand-skill library to a fraction of a second.
    """
    pattern = _combined(rule.patterns)
    if rule.triggers:
        candidates = _lines_with(text, lowered, rule.triggers)
    else:
        candidates = iter([(0, len(text))])
    for start, end in candidates:
        for match in pattern.finditer(text, start, end):
            if not rule.together_with:
                return match.start()
            lo, hi = _window(text, match.start(), match.end(), rule.window)
            if _combined(rule.together_with).search(text, lo, hi):
                return match.start()
    return None


def _lines_with(text: str, lowered: str, triggers: tuple[str, ...]) -> Iterator[tuple[int, int]]:
    last_line = -1
    for hit in _trigger_regex(triggers).finditer(lowered):
        start = text.rfind("\n", 0, hit.start()) + 1
        if start == last_line:
            continue
        last_line = start
        end = text.find("\n", hit.end())
        yield start, len(text) if end == -1 else end


def _window(text: str, start: int, end: int, lines: int) -> tuple[int, int]:
    lo = start
    for _ in range(lines + 1):
        lo = text.rfind("\n", 0, max(lo - 1, 0)) + 1 if lo > 0 else 0
    hi = end
    for _ in range(lines + 1):
        nxt = text.find("\n", hi + 1)
        hi = len(text) if nxt == -1 else nxt
    return lo, hi


@functools.lru_cache(maxsize=64)
def _trigger_regex(triggers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(t) for t in triggers))


@functools.lru_cache(maxsize=64)
def _combined(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), re.IGNORECASE | re.MULTILINE)


def companion_files(folder: Path, nested_skill_dirs: Iterable[Path] = ()) -> list[Path]:
    """Script files of a skill folder that the scan covers (not SKILL.md, not nested skills)."""
    skip = {p.resolve() for p in nested_skill_dirs}
    out: list[Path] = []
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                if entry.resolve() in skip or (entry / "SKILL.md").exists():
                    continue
                if entry.name in {"node_modules", "__pycache__"}:
                    continue
                stack.append(entry)
            elif entry.suffix.lower() in SCANNED_SUFFIXES and entry.name != "SKILL.md":
                out.append(entry)
    return out
