"""The operating-system sandbox every skill process runs in (bubblewrap, Linux).

A skill's command or Python entrypoint is started as ``bwrap <mounts> -- ARGV``. What the skill
gets:

- new user, PID, IPC, UTS, cgroup, mount and network namespaces. The network namespace has
  nothing but its own loopback, unless the skill declares a network effect (``network``,
  ``sends-email``, ``sends-messages``: effects, so a run that has one needs the caller's
  confirmation); then slirp4netns (Debian's ``slirp4netns``, what rootless Podman uses) gives
  it an outward-only network: connections leave through the host as the user's own, but the
  host's loopback (``127.0.0.0/8``: the engine's HTTP API and MCP server, any other local
  service) stays out of reach (``--disable-host-loopback``), and its own ``127.0.0.1`` is its
  own;
- a root of its own: the system (``/usr`` and its links, the parts of ``/etc`` that programs
  read to start: the loader cache, locales, certificates, time zone) and the Python installation
  that runs it, read-only; its own skill folder read-only; a fresh ``/proc`` of its PID
  namespace and a minimal ``/dev``;
- writable: a private ``/tmp`` (gone with the sandbox), its ``HOME`` inside it, and its step
  folder (the run folder above it is readable: earlier steps' files); the outbox only for a
  skill that declares ``sends-email``; a file or folder that its inputs name (``format: path``)
  read-only, writable for a skill that declares ``writes-files`` or ``deletes-files``;
- no capabilities, no further user namespaces, a session of its own (no terminal to push
  keystrokes into), and death with its parent (below).

Nothing else of the machine is mounted: not the engine's index or run log, not its caches, not
another skill's folder, not the user's home. The environment is exactly what
:func:`skillgrove.runtime.executors.skill_environment` gives: bwrap is started with it and
passes it on, so the values are never on a command line (which every local user can read in
``/proc/<pid>/cmdline``).

bwrap is started by the engine directly (no launcher in between): the engine kills it at the
deadline, on cancel or interrupt, the namespace's first process dies with it
(``--die-with-parent``), and the kernel then kills every process of the PID namespace, those
in sessions of their own included. If the engine itself dies, the same happens.

Where the sandbox cannot start (not Linux, no ``bwrap``, user namespaces off), :func:`problem`
says why in one line and how to fix it; ``SKILLGROVE_SANDBOX=off`` (``--no-sandbox``) runs
skills without it, for a library one trusts.

>>> bool(sandbox_wanted({"SKILLGROVE_SANDBOX": "off"}))
False
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillgrove.skills.model import Skill

SANDBOX_ENV = "SKILLGROVE_SANDBOX"
"""``off`` (or ``0``, ``no``, ``false``) runs skills without the sandbox."""
OPT_OUT = "run with --no-sandbox (or SKILLGROVE_SANDBOX=off) for a library you trust"
SANDBOX_HOME = "/tmp/home"
"""The skill's ``HOME``: a folder of its private ``/tmp``, thrown away with the sandbox."""
SANDBOX_TMP = "/tmp"

# Top-level system folders: each is bound read-only (or recreated as the link it is).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read from /etc to start and to format text; nothing that holds a secret
# (not shadow, not ssh, not the package manager's credentials).
_ETC = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
        "/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/locale.conf",
        "/etc/ssl/certs", "/etc/ca-certificates", "/etc/pki/tls/certs", "/etc/fonts",
        "/etc/mime.types", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
        "/etc/host.conf", "/etc/hosts", "/etc/protocols", "/etc/services", "/etc/magic",
        "/etc/matplotlibrc", "/etc/xdg")
# Only with a network effect: name resolution (resolv.conf is the sandbox's own, see
# :func:`resolv_conf`).
_ETC_NETWORK = ("/etc/gai.conf",)
SLIRP_DNS = "10.0.2.3"
"""slirp4netns's DNS forwarder, the sandbox's only name server (the host's may be on its own
loopback, which the sandbox cannot reach)."""
SLIRP_OPTIONS = ("--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                 "--enable-seccomp")
"""slirp4netns, for a skill with a network effect: the tap device configured in the skill's
namespace (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3); the gateway never leads to the host's
loopback; slirp4netns itself in a mount namespace of its own, its capabilities and system
calls cut down (it parses the skill's packets)."""

_OFF = frozenset({"off", "0", "no", "false", "none"})

NETWORK_EFFECTS = frozenset({"network", "sends-email", "sends-messages"})
"""Effects that reach other machines: a skill declaring one gets an outward-only network
(slirp4netns, never the host's loopback). Each needs the caller's confirmation before a run
(``SKILLGROVE_ALLOW_EFFECTS`` aside)."""

# Never writable through a path input: the system, and what the machine keeps running state in.
SYSTEM_FOLDERS = tuple(Path(p) for p in (
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev",
    "/proc", "/sys", "/var", "/opt", "/srv", "/run", "/snap"))


def sandbox_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``SKILLGROVE_SANDBOX`` turns the sandbox off."""
    value = (os.environ if environ is None else environ).get(SANDBOX_ENV, "")
    return value.strip().lower() not in _OFF


@functools.cache
def problem(bwrap: str | None = None) -> str | None:
    """Why skills cannot run in the sandbox here, in one line with the fix; None when they can.
    Tried once per process (a real sandbox is started)."""
    if not sys.platform.startswith("linux"):
        return (f"the skill sandbox needs Linux (bubblewrap), and this is {sys.platform}: "
                f"{OPT_OUT}")
    found = bwrap or shutil.which("bwrap")
    if found is None:
        return ("the skill sandbox needs bubblewrap, which is not installed: install it "
                f"(apt-get install bubblewrap, dnf install bubblewrap) or {OPT_OUT}")
    argv = [found, *_base_options(network=False), "--", "/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the skill sandbox cannot start bubblewrap ({exc}): {OPT_OUT}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        return (f"the skill sandbox cannot start here ({why}): allow unprivileged user "
                f"namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
                f"kernel.apparmor_restrict_unprivileged_userns=0) or {OPT_OUT}")
    return None


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    assert found is not None, "problem() said the sandbox works"
    return found


def slirp_path() -> str | None:
    return shutil.which("slirp4netns")


def network_problem() -> str | None:
    """Why a skill with a network effect cannot run in the sandbox here, in one line with the
    fix; None when it can. Such a skill never falls back to the host's network."""
    if slirp_path() is None:
        return ("a skill with a network effect runs in the sandbox with an outward-only network "
                "made by slirp4netns, which is not installed: install it (apt-get install "
                f"slirp4netns, dnf install slirp4netns) or {OPT_OUT}")
    return None


@functools.cache
def resolv_conf() -> str:
    """A ``resolv.conf`` naming slirp4netns's DNS forwarder, made once per process (0700 folder,
    removed at exit); mounted read-only as the sandbox's ``/etc/resolv.conf``."""
    import atexit
    import tempfile

    folder = tempfile.mkdtemp(prefix="skillgrove-resolv-")
    path = os.path.join(folder, "resolv.conf")
    with open(path, "w", encoding="ascii") as handle:
        handle.write(f"nameserver {SLIRP_DNS}\n")
    atexit.register(shutil.rmtree, folder, True)
    return path


Bind = tuple[Path, Path]
"""``(source, destination)``: a folder or file of the machine and where the skill sees it."""


@dataclass(frozen=True)
class Mounts:
    """What one execution sees besides the system and its own folder."""

    read_only: tuple[Bind, ...] = ()
    writable: tuple[Bind, ...] = ()
    network: bool = False
    refused: tuple[tuple[str, str], ...] = field(default=())
    """Paths named in the inputs that were not mounted, with why."""
    masked: tuple[Path, ...] = ()
    """Folders covered with an empty tmpfs wherever a bind above them would show them (the
    engine's folders, the library): what is mounted deeper (the run folder, the skill's own
    folder, a file the inputs name) is mounted after, on top."""


@functools.cache
def _knows(option: str) -> bool:
    """Whether the installed bwrap has ``option`` (``--disable-userns`` came in 0.8)."""
    found = shutil.which("bwrap")
    if found is None:
        return False
    try:
        done = subprocess.run([found, "--help"], capture_output=True, timeout=10,
                              env={"PATH": os.defpath})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option.encode() in done.stdout + done.stderr


def _base_options(*, network: bool) -> list[str]:
    # Always a network namespace of its own (--unshare-all): with a network effect, slirp4netns
    # joins it from outside (see runtime.executors), never --share-net.
    options = ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
               "--cap-drop", "ALL", "--hostname", "sandbox"]
    if _knows("--disable-userns"):
        options.append("--disable-userns")
    for path in _SYSTEM:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    options += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", SANDBOX_TMP,
                "--dir", SANDBOX_HOME]
    for path in _ETC + (_ETC_NETWORK if network else ()):
        options += ["--ro-bind-try", path, path]
    if network:
        options += ["--ro-bind", resolv_conf(), "/etc/resolv.conf"]
    return options


def _depth(path: Path) -> int:
    return len(path.parts)


def command(bwrap: str, argv: Sequence[str], *, folder: Path, mounts: Mounts,
            interpreters: Iterable[Path] = ()) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in ``folder`` (the skill's, read-only) with
    ``mounts``. bwrap must be started with exactly the skill's environment: the skill gets
    bwrap's own (values never go on a command line). Mounts are made parents first, so a
    writable step folder inside a read-only run folder stays writable, and a masked folder
    under a bind is hidden before what is mounted inside it shows again."""
    options = _base_options(network=mounts.network)
    binds: list[tuple[Path, str, Path]] = [(p, "--ro-bind", p) for p in interpreters]
    binds.append((folder, "--ro-bind", folder))
    binds += [(dest, "--ro-bind", source) for source, dest in mounts.read_only]
    binds += [(dest, "--bind", source) for source, dest in mounts.writable]
    dests = [dest for dest, _, _ in binds]
    for hidden in mounts.masked:
        if os.path.isdir(hidden) and any(inside(hidden, dest) and hidden != dest
                                         for dest in dests):
            binds.append((hidden, "--tmpfs", hidden))
    order = {"--tmpfs": 0, "--ro-bind": 1, "--bind": 2}
    seen: set[tuple[Path, str, Path]] = set()
    for dest, how, source in sorted(binds, key=lambda b: (_depth(b[0]), order[b[1]])):
        if (dest, how, source) in seen or str(dest) in (*_SYSTEM, "/", SANDBOX_TMP):
            continue
        seen.add((dest, how, source))
        options += [how, str(dest)] if how == "--tmpfs" else [how, str(source), str(dest)]
    options += ["--remount-ro", "/", "--chdir", str(folder)]
    return [bwrap, *options, "--", *argv]


def interpreter_roots(python: str) -> tuple[Path, ...]:
    """The folders a Python entrypoint needs: the installation of ``python`` (its venv and the
    base installation it points at), outside the system folders that are mounted anyway."""
    roots: set[Path] = set()
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix]
    real = Path(os.path.realpath(python))
    candidates.append(str(real.parent.parent))
    venv = Path(python).parent.parent
    if (venv / "pyvenv.cfg").is_file():
        candidates.append(str(venv))
    for candidate in candidates:
        path = Path(os.path.realpath(candidate))
        if path == Path("/") or any(path == Path(s) or Path(s) in path.parents
                                    for s in _SYSTEM):
            continue
        roots.add(path)
    return tuple(sorted(roots))


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Protected:
    """What a path named in a skill's inputs may not open up. ``hidden``: the engine's own
    folders (index, run log, caches), never mounted; ``read_only``: the library roots, mounted
    at most read-only (a skill never writes another skill's folder); the user's home itself and
    its hidden entries (``~/.ssh``, ``~/.config``, ...) are never mounted, and a path above the
    home (``/``, ``/home``) is refused. A path above the engine's folders or the library is
    mounted with those covered by an empty tmpfs (:attr:`masked`). The step's own run folder is
    always mounted (the caller of :func:`input_mounts` checks it first)."""

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    home: Path | None = None

    @property
    def masked(self) -> tuple[Path, ...]:
        """What is covered wherever a bind above it would show it (see :class:`Mounts`)."""
        return self.hidden + self.read_only

    def why_not(self, path: Path, *, write: bool) -> str | None:
        if write:
            for folder in SYSTEM_FOLDERS:
                if inside(path, folder):
                    return f"it is inside {folder}, which no skill may write"
        for folder in self.hidden + (self.read_only if write else ()):
            if inside(path, folder):
                return f"it is inside {folder}, which skills may not " + (
                    "write" if folder in self.read_only else "read")
        if not write and any(inside(path, root) for root in self.read_only):
            return None  # a file of the library (its samples): readable wherever it lives
        home = self.home
        if home is not None:
            if inside(home, path):
                return "it holds the user's home folder"
            if home in path.parents:
                first = path.relative_to(home).parts[0]
                if first.startswith("."):
                    return f"it is inside {home / first}, a hidden entry of the user's home"
        return None


def input_mounts(paths: Iterable[str], *, writes_files: bool, run_dir: Path | None,
                 protected: Protected) -> tuple[list[Bind], list[Bind], list[tuple[str, str]]]:
    """The binds for the paths a step's inputs name (``format: path``), as
    ``(read_only, writable, refused)``:

    - an existing file: read-only; for a skill that declares ``writes-files`` or
      ``deletes-files``, its folder writable (so that the file can be replaced);
    - an existing folder: writable (it is where the step was asked to work);
    - a path that does not exist yet: the nearest folder above it that exists, writable (where
      the step was asked to put something new).

    A writable bind must not be inside the system, the library or the engine's folders (then
    a file is still mounted read-only where reading is allowed); nothing is mounted inside the
    user's home's hidden entries or the engine's folders, nor above any of them. A link is
    mounted at its own name from where it points, and judged by both."""
    read: list[Bind] = []
    write: list[Bind] = []
    refused: list[tuple[str, str]] = []
    for text in paths:
        if not text or "://" in text or not os.path.isabs(text):
            continue
        dest = Path(os.path.normpath(text))
        while not os.path.lexists(dest) and dest != dest.parent:
            dest = dest.parent  # what is to be made goes into the nearest folder that exists
        if writes_files and os.path.isfile(dest) and not os.path.islink(dest):
            # A file it may write: its folder, so that it can be replaced (written to a
            # temporary name, then renamed), which a file mounted on its own cannot be.
            folder = dest.parent
            where = Path(os.path.realpath(folder))
            if protected.why_not(where, write=True) is None \
                    and protected.why_not(folder, write=True) is None:
                if not (run_dir is not None and inside(where, run_dir)):
                    write.append((where, folder))
                continue
        source = Path(os.path.realpath(dest))
        if run_dir is not None and inside(source, run_dir) and inside(dest, run_dir):
            continue  # the run folder is mounted already
        wanted_write = source.is_dir() or writes_files
        verdicts = []
        for write_it in ([True, False] if wanted_write and source.is_file() else [wanted_write]):
            why = protected.why_not(source, write=write_it) or (
                protected.why_not(dest, write=write_it) if dest != source else None)
            verdicts.append((write_it, why))
            if why is None:
                break
        write_it, why = verdicts[-1]
        if why is not None:
            refused.append((text, why))
            continue
        (write if write_it else read).append((source, dest))
    return read, write, refused


# -- what `skillgrove check` says the sandbox allows ----------------------------------------------

# Code that reaches other machines, by effect: advice only (a blocklist never proves absence);
# the sandbox is what holds. A skill whose code matches but that declares no effect giving it
# the network gets none when it runs.
_INFERRED = (
    ("sends-email", re.compile(r"\bsmtplib\b|\bSMTP(?:_SSL)?\(|\bsendmail\b")),
    ("network", re.compile(r"\bsocket\b|\burllib\b|\brequests\b|\bhttpx\b|\bhttp\.client\b|"
                           r"\baiohttp\b|\bcurl\b|\bwget\b|\bfetch\(|\bXMLHttpRequest\b")),
)


def inferred_effects(skill: Skill) -> dict[str, str]:
    """Effects the skill's own files suggest (``sends-email`` for ``smtplib``, ``network`` for
    sockets and HTTP clients), each with the first file and line that suggests it."""
    found: dict[str, str] = {}
    for path in sorted(skill.folder.rglob("*")):
        if len(found) == len(_INFERRED):
            break
        if not path.is_file() or path.is_symlink() or path.name == "SKILL.md" \
                or "__pycache__" in path.parts or path.stat().st_size > 1024 * 1024:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for effect, pattern in _INFERRED:
            if effect in found:
                continue
            match = pattern.search(text)
            if match is not None:
                line = text.count("\n", 0, match.start()) + 1
                found[effect] = f"{path.relative_to(skill.folder)}:{line}: {match.group()}"
    return found


def allowances(skill: Skill, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the sandbox will let ``skill`` reach when it runs: the network, the environment
    variables it is given (names only), what it may read and write, and effects its code
    suggests but it does not declare (advice)."""
    from skillgrove.skills.secrets import owner_listed, secret_reason

    source = os.environ if environ is None else environ
    declared = list(skill.requires.env) + list(skill.entrypoint.env if skill.entrypoint else ())
    listed = owner_listed(source)
    env = sorted({n for n in declared if secret_reason(n, effects=skill.effects,
                                                        owner_listed=listed) is None})
    network = sorted(NETWORK_EFFECTS & set(skill.effects))
    writes_files = bool({"writes-files", "deletes-files"} & set(skill.effects))
    paths = sorted(name for name, schema in skill.input_properties().items()
                   if isinstance(schema, Mapping) and (schema.get("format") == "path" or (
                       isinstance(schema.get("items"), Mapping)
                       and schema["items"].get("format") == "path")))
    writes = ["its step folder", "a private /tmp (and HOME in it)"]
    if "sends-email" in skill.effects:
        writes.append("the outbox")
    inferred = inferred_effects(skill)
    undeclared = {effect: where for effect, where in inferred.items()
                  if not (effect == "network" and network) and effect not in skill.effects}
    return {
        "network": bool(network), "network_by": network, "env": env,
        "reads": ["the system (read-only)", "its own folder (read-only)",
                  "the run folder (earlier steps' files)"],
        "writes": writes, "path_inputs": paths,
        "path_inputs_rule": ("files read-only" + (", their folders writable" if writes_files
                                                  else "") + "; folders and new paths writable"),
        "undeclared_effects": undeclared,
    }


def describe(skill: Skill, allowed: Mapping[str, Any]) -> str:
    """One line of ``skillgrove check``: what the sandbox lets ``skill`` reach."""
    net = ("network: outward only, never the host's loopback (" + ", ".join(
        allowed["network_by"]) + ")" if allowed["network"] else "network: none")
    env = "env: " + (", ".join(allowed["env"]) if allowed["env"] else "none declared")
    files = "writes: " + ", ".join(allowed["writes"])
    if allowed["path_inputs"]:
        files += "; path inputs " + ", ".join(allowed["path_inputs"]) + " (" \
            + allowed["path_inputs_rule"] + ")"
    line = f"sandbox: {skill.name}: {net}; {env}; {files}"
    for effect, where in allowed["undeclared_effects"].items():
        line += (f"\n  advice: {skill.name} looks like it {_EFFECT_WORDS[effect]} ({where}) but "
                 f"does not declare '{effect}': in the sandbox it cannot")
    return line


_EFFECT_WORDS = {"sends-email": "sends mail", "network": "uses the network"}
