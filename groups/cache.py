"""A cache of library loads: an unchanged library is not parsed, scanned and validated again.

>>> library = load_library_cached([Path("library")], cache_file=Path(".skillgrove/library.cache"))

A load reads every file under the library roots (each skill folder is scanned whole: SKILL.md,
its scripts, its data, its ``.skill_id``), so the cache is keyed by all of them: the relative
path, type, mode, size, modification and change times, inode and device of every entry under
each root (folders included, by name and mode), plus what else a load depends on: the paths as
given and as they resolve, the working folder, the safety policy, the loader's own source code
and the Python version. Any added, removed, renamed, edited, touched or re-permissioned file
anywhere under a root is a miss, and the library is loaded (and scanned) afresh; a security
finding is never served from a load of other bytes.

A file modified less than :data:`RACY_SECONDS` before the key was taken could change again
within the same tick of the file system's clock without its times moving ("racy" files, as in
git): such files are also keyed by the sha256 of their bytes, read again on every lookup.

Availability (binaries, environment variables, platform) is not a property of the files: on
every hit it is checked again, and any difference is a miss.

The cache is one file (the last load), written owner-only (0600) with a checksum, and read only
when it is a regular file of ours that nobody else may write; anything else about it (another
owner, wrong mode, bad checksum, a truncated or corrupted payload, an old format) is ignored and
the file is rebuilt. It is a pickle, so these checks are what keep it a cache of our own loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillgrove.groups.library import Library
    from skillgrove.skills.loader import LoadOptions

CACHE_FORMAT = b"skillgrove-library-cache 1\n"
RACY_SECONDS = 2.0
"""Files modified this recently (or in the future) are keyed by their content as well."""
RACY_MAX_BYTES = 64 * 1024 * 1024
"""Above this many bytes of racy files a load is not cached (the next one will be)."""
MAX_KEY_ENTRIES = 1_000_000
"""A library with more entries than this under its roots is loaded without the cache."""
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"})
"""Folders the library walk does not enter; inside a skill folder every folder counts."""
_SIDECAR = ".skill_id"
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


@dataclass(frozen=True)
class _Key:
    """What a load depended on: ``digest`` of every entry's metadata, and the racy files."""

    digest: str
    racy: tuple[tuple[str, str], ...]
    """(path, sha256 of its bytes) of the files modified within :data:`RACY_SECONDS`."""
    entries: tuple[tuple[Any, ...], ...]

    def without_sidecars(self) -> tuple[tuple[Any, ...], ...]:
        return tuple(e for e in self.entries if os.path.basename(e[0]) != _SIDECAR)


@dataclass(frozen=True)
class _Entry:
    digest: str
    racy: tuple[tuple[str, str], ...]
    ids_from_sidecars: bool
    """Every skill's id was read from its ``.skill_id``: a load that writes missing ids would
    write none, so it may use this entry too."""
    library: Library


def load_library_cached(paths: Sequence[Path], options: LoadOptions | None = None, *,
                        cache_file: Path | None) -> Library:
    """:func:`~skillgrove.groups.library.load_library`, served from ``cache_file`` when no file
    it depends on changed (see the module docstring). ``cache_file=None``: no cache."""
    from skillgrove.skills.loader import DEFAULT_OPTIONS

    options = options or DEFAULT_OPTIONS
    header = _header(paths, options) if cache_file is not None else None
    before = _key(paths, header) if header is not None else None
    if cache_file is None or header is None or before is None:
        return _load(paths, options)
    entry = _read(cache_file)
    if entry is not None and entry.digest == before.digest and _racy_unchanged(entry.racy) \
            and (entry.ids_from_sidecars or not options.write_ids) \
            and _same_availability(entry.library, options):
        return entry.library
    library = _load(paths, options)
    key = before
    if options.write_ids:
        # The load may have written `.skill_id` files: key the entry by the files as they are
        # now, provided nothing but those ids changed meanwhile.
        after = _key(paths, header)
        if after is None or after.without_sidecars() != before.without_sidecars():
            return library
        key = after
    ids = _ids_from_sidecars(library)
    if not _racy_unchanged(key.racy):
        return library
    _write(cache_file, _Entry(key.digest, key.racy, ids, library))
    return library


def _load(paths: Sequence[Path], options: LoadOptions) -> Library:
    from skillgrove.groups.library import load_library

    return load_library(paths, options)


# -- the key ----------------------------------------------------------------------------------


_CODE_DIGEST: str | None = None


def _code_digest() -> str:
    """The loader's source: a new rule or check must never be answered by an old load."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        digest = hashlib.sha256()
        package = Path(__file__).resolve().parent.parent
        for layer in ("skills", "groups"):
            for source in sorted([*(package / layer).glob("*.py"),
                                  *(package / layer).glob("*.json")]):
                digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
        _CODE_DIGEST = digest.hexdigest()
    return _CODE_DIGEST


def _header(paths: Sequence[Path], options: LoadOptions) -> bytes | None:
    """Everything but the files that a load depends on; None when the load is not cacheable
    (a safety policy with rules of its own)."""
    from skillgrove.skills.safety import DEFAULT_RULES

    safety = options.safety
    if safety.rules is not DEFAULT_RULES:
        return None
    parts: list[str] = [CACHE_FORMAT.decode(), sys.version, _code_digest(), os.getcwd(),
                        repr(sorted(safety.allow)), str(safety.max_file_bytes),
                        options.platform]
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            mode = -1
        parts += [str(path), os.path.abspath(path), os.path.realpath(path), str(mode)]
    return "\0".join(parts).encode()


def _key(paths: Sequence[Path], header: bytes) -> _Key | None:
    """The key of the library under ``paths`` as it is now; None when it is too large."""
    from skillgrove.groups.library import split_paths

    started = time.time_ns()
    racy_after = started - int(RACY_SECONDS * 1e9)
    roots, files = split_paths(list(paths))
    entries: list[tuple[Any, ...]] = []
    for named in files:
        entries.append(_stat_entry(str(named), named))
    for root in roots:
        for entry in _walk(root):
            entries.append(entry)
            if len(entries) > MAX_KEY_ENTRIES:
                return None
    digest = hashlib.sha256(header)
    racy: list[tuple[str, str]] = []
    racy_bytes = 0
    for entry in entries:
        digest.update(repr(entry).encode() + b"\n")
        path, mode, size, mtime, ctime = entry[:5]
        if stat.S_ISREG(mode) and max(mtime, ctime) >= racy_after:
            racy_bytes += size
            if racy_bytes > RACY_MAX_BYTES:
                return None
            racy.append((path, _file_digest(path)))
    return _Key(digest.hexdigest(), tuple(racy), tuple(entries))


def _stat_entry(name: str, path: Path | str) -> tuple[Any, ...]:
    try:
        info = os.lstat(path)
    except OSError:
        return (name, -1, -1, -1, -1, -1, -1)
    if stat.S_ISDIR(info.st_mode):  # its listing is keyed by its entries
        return (name, info.st_mode, 0, 0, 0, 0, 0)
    return (name, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
            info.st_ino, info.st_dev)


def _walk(root: Path) -> Iterator[tuple[Any, ...]]:
    """Every entry under ``root`` (itself included), links not followed, in a stable order.
    Outside skill folders the folders the library walk skips are skipped; inside a skill folder
    (one that holds a SKILL.md) nothing is, since the scan reads everything there."""
    yield _stat_entry(str(root), root)
    stack: list[tuple[str, bool]] = [(str(root), False)]
    while stack:
        current, in_skill = stack.pop()
        try:
            with os.scandir(current) as listing:
                found = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            yield (current, -2, exc.errno or 0, 0, 0, 0, 0)
            continue
        in_skill = in_skill or any(e.name == "SKILL.md" for e in found)
        below: list[str] = []
        for item in found:
            entry = _stat_entry(item.path, item.path)
            yield entry
            if stat.S_ISDIR(entry[1]) and (in_skill or item.name not in _SKIP_DIRS):
                below.append(item.path)
        stack.extend((folder, in_skill) for folder in reversed(below))


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def _racy_unchanged(racy: Sequence[tuple[str, str]]) -> bool:
    return all(_file_digest(path) == digest for path, digest in racy)


def _same_availability(library: Library, options: LoadOptions) -> bool:
    from skillgrove.skills.loader import check_requirements

    return all(check_requirements(skill.requires, skill.enabled, options) == skill.availability
               for skill in library.catalog.skills)


def _ids_from_sidecars(library: Library) -> bool:
    for skill in library.catalog.skills:
        try:
            with open(skill.folder / _SIDECAR, "rb") as handle:
                if handle.read(1024).decode("utf-8", errors="replace").strip() != skill.id:
                    return False
        except OSError:
            return False
    return True


# -- the file ---------------------------------------------------------------------------------


def _read(cache_file: Path) -> _Entry | None:
    """The entry in ``cache_file``, or None for a missing, foreign or damaged file."""
    payload = read_private_file(cache_file, CACHE_FORMAT)
    if payload is None:
        return None
    try:
        entry = pickle.loads(payload)  # our own file, checked by read_private_file
    except Exception:  # a damaged cache is rebuilt, whatever the damage
        return None
    return entry if isinstance(entry, _Entry) else None


def _write(cache_file: Path, entry: _Entry) -> None:
    try:
        payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # something in the library that does not pickle: load it every time
        return
    write_private_file(cache_file, CACHE_FORMAT, payload)


def read_private_file(path: Path, magic: bytes) -> bytes | None:
    """The payload of a file written by :func:`write_private_file` with the same ``magic``;
    None when it is missing, not a regular file, not ours, readable or writable by others, of
    another format, or when its checksum does not match (truncated, corrupted)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077 \
                or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data.startswith(magic):
        return None
    checksum, _, payload = data[len(magic):].partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != checksum:
        return None
    return payload


def write_private_file(path: Path, magic: bytes, payload: bytes) -> bool:
    """Replace ``path`` atomically with ``magic``, a checksum and ``payload``, owner-only
    (0600; a missing folder is made 0700). False when it cannot be written: a cache is
    skipped then, never an error."""
    data = magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    folder = path.parent
    try:
        if not folder.exists():
            folder.mkdir(mode=PRIVATE_FOLDER, parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", dir=folder)  # mode 0600
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, PRIVATE_FILE)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        return False
    return True
