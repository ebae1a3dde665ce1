"""What the command line looks like on a terminal: colour, a status line while something slow
happens, and counts that read as English.

Colour follows the common conventions (https://no-color.org, https://force-color.org): a
non-empty ``NO_COLOR`` switches it off, a non-empty ``FORCE_COLOR`` (other than ``0``) switches
it on, else a stream gets colour when it is a terminal and ``TERM`` is not ``dumb``. Each stream
is decided on its own, so ``skillgrove check | less`` prints plain text while its stderr keeps
colour. Errors are red, warnings yellow, rule ids dim.

Everything the command line prints passes through :class:`SafeText`: a library's or a skill's
text (a description, an output, an error a skill wrote on stderr) cannot move the cursor,
clear the screen, set a title, hide or reorder what follows (bidi overrides, zero-width
characters): each control or format character is written as an escape (``\\u001b``,
``\\u202e``: the same in JSON, so ``--json`` output stays valid and means the same). Only
the styles this module paints itself pass, and only to a stream that has colour.

>>> plural(1, "group file")
'1 group file'
>>> plural(2, "error")
'2 errors'
>>> plural(3, "match", "matches")
'3 matches'
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    """``count`` and the noun in the number it needs (``1 error``, ``0 errors``)."""
    noun = singular if count == 1 else (plural_form or singular + "s")
    return f"{count} {noun}"


def wants_colour(stream: TextIO) -> bool:
    """True when text written to ``stream`` should carry ANSI colour (see the module docstring)."""
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR")
    if force:
        return force != "0"
    return is_terminal(stream) and os.environ.get("TERM") != "dumb"


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Style:
    """ANSI styles for one stream; each method returns its text unchanged when colour is off."""

    RED = "31"
    YELLOW = "33"
    GREEN = "32"
    BOLD = "1"
    DIM = "2"

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        return cls(wants_colour(stream))

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def error(self, text: str) -> str:
        return self.paint(text, f"{self.BOLD};{self.RED}")

    def warning(self, text: str) -> str:
        return self.paint(text, f"{self.BOLD};{self.YELLOW}")

    def ok(self, text: str) -> str:
        return self.paint(text, self.GREEN)

    def bold(self, text: str) -> str:
        return self.paint(text, self.BOLD)

    def dim(self, text: str) -> str:
        return self.paint(text, self.DIM)

    def diagnostic(self, text: str) -> str:
        """A formatted diagnostic (``path:1:2: error: message (hint) [rule]`` and its indented
        follow-ons): the severity coloured, the rule ids dim."""
        if not self.enabled:
            return text
        text = _SEVERITY.sub(lambda m: f": {self._severity(m.group(1))}: ", text, count=1)
        return _RULE.sub(lambda m: " " + self.dim(m.group(0).lstrip()), text)

    def _severity(self, word: str) -> str:
        return self.error(word) if word == "error" else self.warning(word)


_SEVERITY = re.compile(r": (error|warning): ")
_RULE = re.compile(r" \[[a-z0-9][a-z0-9-]*\]$", re.M)

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

# What this module writes itself: the SGR codes of Style, and the clearing of the status line.
_OWN_SEQUENCES = re.compile(
    rf"\x1b\[(?:0|{Style.BOLD}|{Style.DIM}|{Style.RED}|{Style.GREEN}|{Style.YELLOW}|"
    rf"{Style.BOLD};{Style.RED}|{Style.BOLD};{Style.YELLOW})m|\r\x1b\[2K")


def escaped(text: str, *, keep_own_styles: bool = False) -> str:
    r"""``text`` with every character that is not printable written as its escape, line
    breaks and tabs kept: C0 and C1 controls, DEL, format characters (zero-width, bidi
    controls, U+2028), lone surrogates. ``keep_own_styles``: the sequences that this module
    paints (:class:`Style`, :class:`Status`) pass.

    >>> escaped("red\x1b[2J\u202eevil\u200b\U000e0041\n")
    'red\\u001b[2J\\u202eevil\\u200b\\udb40\\udc41\n'
    >>> escaped("\x1b[32mok\x1b[0m", keep_own_styles=True)
    '\x1b[32mok\x1b[0m'
    """
    if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():
        return text
    parts: list[str] = []
    at = 0
    own = _OWN_SEQUENCES.finditer(text) if keep_own_styles else iter(())
    for match in (*own, None):
        end = match.start() if match is not None else len(text)
        parts.extend(ch if ch.isprintable() or ch in "\n\t" else _escape(ch)
                     for ch in text[at:end])
        if match is not None:
            parts.append(match.group())
            at = match.end()
    return "".join(parts)


def _escape(ch: str) -> str:
    """``\\uXXXX`` (a surrogate pair beyond the BMP): read the same in JSON, Python and
    JavaScript, so JSON stays JSON."""
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class SafeText:
    r"""A text stream that writes :func:`escaped` text to ``stream``: what the command line
    prints to stdout and stderr. The styles of :class:`Style` pass where the stream has colour.
    Everything else (``isatty``, ``fileno``, ``encoding``, ...) is the stream's.

    >>> import io
    >>> inner = io.StringIO()
    >>> _ = SafeText(inner).write("name: send\u200b-email\n")
    >>> inner.getvalue()
    'name: send\\u200b-email\n'
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.keep_own_styles = wants_colour(stream)

    def write(self, text: str) -> int:
        self.stream.write(escaped(text, keep_own_styles=self.keep_own_styles))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def safe(stream: TextIO) -> TextIO:
    """``stream`` as a :class:`SafeText` (once)."""
    return stream if isinstance(stream, SafeText) else cast(TextIO, SafeText(stream))


class Status:
    """A status line on stderr for something slow (loading a model, exporting it to ONNX).

    On a terminal: a spinner and the elapsed seconds while it runs, replaced by one line with
    the time it took. Elsewhere (a pipe, a log file): nothing, unless the step is ``announce``d,
    which prints one plain line when it starts, so a CI log shows why it paused.

        with Status(sys.stderr).step("loading the embedding model"):
            encoder.encode(["warm up"])
    """

    INTERVAL = 0.1

    def __init__(self, stream: TextIO, *, live: bool = True) -> None:
        self.stream = stream
        self.live = live and is_terminal(stream)
        self.style = Style.for_stream(stream)

    @contextmanager
    def step(self, what: str, *, announce: bool = False, keep: bool = True) -> Iterator[None]:
        """``what`` is running; ``keep``: leave a line with the time it took (else the status
        line is cleared, for steps that another display reports)."""
        if not self.live:
            if announce:
                self._write(f"skillgrove: {what}...\n")
            yield
            return
        started = time.monotonic()
        done = threading.Event()
        ticker = threading.Thread(target=self._spin, args=(what, started, done), daemon=True,
                                  name="skillgrove-status")
        ticker.start()
        try:
            yield
        except BaseException:
            done.set()
            ticker.join()
            self._write("\r\x1b[2K")
            raise
        done.set()
        ticker.join()
        seconds = time.monotonic() - started
        self._write(f"\r\x1b[2K{self.style.ok('✓')} {what} "
                    f"{self.style.dim(f'({seconds:.1f} s)')}\n" if keep else "\r\x1b[2K")

    def _spin(self, what: str, started: float, done: threading.Event) -> None:
        frame = 0
        while not done.wait(self.INTERVAL if frame else 0):
            seconds = time.monotonic() - started
            self._write(f"\r\x1b[2K{SPINNER[frame % len(SPINNER)]} {what}... "
                        f"{self.style.dim(f'{seconds:.0f} s')}")
            frame += 1

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: the work goes on regardless
            pass


class AnnouncedEncoder:
    """The encoder the engine would make for itself (ONNX Runtime, else PyTorch, behind the
    embedding cache), made on first use, that puts up a :class:`Status` while its first call
    loads the model; when the ONNX export of the model is missing it says so even off a
    terminal, since that takes about 40 s once per machine. Everything else is the wrapped
    encoder's (``embedded``, ``bulk``, ...)."""

    def __init__(self, model: str | None, status: Status) -> None:
        self._model = model
        self._status = status
        self._cached: Any = None
        self._lock = threading.Lock()

    def _built(self) -> Any:
        with self._lock:
            if self._cached is None:
                from skillgrove.graph.embeddings import (
                    CachedEncoder,
                    EmbeddingCache,
                    default_encoder,
                )
                from skillgrove.runtime.engine import cache_dir

                inner = _FirstLoad(default_encoder(self._model, cache_dir()), self._status)
                self._cached = CachedEncoder(inner, EmbeddingCache(cache_dir() /
                                                                   "embeddings.sqlite"))
            return self._cached

    @property
    def name(self) -> str:
        return str(self._built().name)

    @name.setter
    def name(self, value: str) -> None:
        self._built().name = value

    @property
    def dimensions(self) -> int:
        return int(self._built().dimensions)

    def encode(self, texts: Sequence[str]) -> Any:
        return self._built().encode(texts)

    def flush(self) -> None:
        """Save the query vectors embedded so far (nothing to do, and nothing built, when
        none was)."""
        if self._cached is not None:
            self._cached.flush()

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self._built(), attribute)


class _FirstLoad:
    """A model encoder whose first ``encode`` or ``bulk`` (the calls that load the model) runs
    under a status line."""

    def __init__(self, inner: Any, status: Status) -> None:
        self.inner = inner
        self.name = inner.name
        self._status = status
        self._loaded = False
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    MANY = 64
    """Texts in one call that get a status line of their own (indexing, not a search)."""

    def encode(self, texts: Sequence[str]) -> Any:
        if not texts:
            return self.inner.encode(texts)
        if not self._loaded:
            with self._loading():
                if len(texts) < self.MANY:
                    return self.inner.encode(texts)
                self.inner.encode(texts[:1])  # the load alone, so the rest gets its own line
        if len(texts) < self.MANY:
            return self.inner.encode(texts)
        with self._status.step(f"embedding {plural(len(texts), 'text')}", keep=False):
            return self.inner.encode(texts)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """The inner ``bulk``; when the ONNX export is missing, made first (announced), since
        the inner ``bulk`` may make it silently."""
        if not self._loaded and self._export_missing():
            self.encode(["skillgrove"])
        inner_bulk = getattr(self.inner, "bulk", None)
        if inner_bulk is None:
            yield
            return
        with inner_bulk():
            yield

    def _export_missing(self) -> bool:
        export = getattr(self.inner, "onnx_path", None)
        return export is not None and not Path(export).exists()

    @contextmanager
    def _loading(self) -> Iterator[None]:
        with self._lock:
            if self._loaded:
                yield
                return
            if self._export_missing():
                what = "exporting the embedding model to ONNX (once per machine, about 40 s)"
                announce = True
            else:
                what, announce = "loading the embedding model", False
            with self._status.step(what, announce=announce):
                yield
            self._loaded = True
