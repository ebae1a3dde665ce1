"""The process between the engine and a skill's command: it holds the step's process tree.

The engine starts ``python -I -S launcher.py CONTROL_FD [--no-namespace] -- ARGV...`` with the
skill's filtered environment, so the skill's parent holds nothing the skill did not declare
(``/proc/<ppid>/environ`` is this process's). The launcher then:

- becomes a *child subreaper*: a descendant whose parent dies (a daemon started with ``setsid``
  or a double fork) is re-parented to the launcher instead of to init, so it is still found;
- where the kernel allows (root, or an unprivileged user namespace), starts the skill in a new
  PID namespace with its own ``/proc``: the skill sees no process but its own tree (not the
  engine, not its ancestors, not the other steps), cannot signal any other, and the kernel kills
  the whole namespace when its first process exits;
- drops from the capability bounding set the capabilities that read other processes' memory or
  environment (``CAP_SYS_PTRACE``, ``CAP_SYS_ADMIN``, ``CAP_PERFMON``, ...), which a skill run by
  root would otherwise keep;
- waits for the skill; once it exits, or the control pipe closes (the engine's deadline, a
  cancel, or the engine's death), kills every descendant still alive and exits.

Exit status: the skill's own (128 + N for a skill killed by signal N); 137 when stopped through
the control pipe; 127, with a ``{"__skill_error__": ...}`` line on stderr, when the command could
not be started.

It imports only the standard library and runs with ``-S`` (no site packages): it starts fast and
needs nothing of skillgrove's.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported: it takes time
if TYPE_CHECKING:
    from collections.abc import Callable

# The C module, without the enum classes of `signal`: the launcher starts some 20 ms sooner.
signal = __import__("_signal")

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000

# Each of these lets a process read another one's memory or environment, or undo the
# namespace: ptrace (19); sys_admin (21: mounts, and it passes the environ check);
# perfmon (38: passes the environ check); sys_module (16) and sys_rawio (17); bpf (39).
DROPPED_CAPABILITIES = (16, 17, 19, 21, 38, 39)

STOPPED = 137
CANNOT_START = 127


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl  # noqa: B018 - only Linux has it
    except (OSError, AttributeError):
        return None
    return libc


LIBC = _libc()


def _prctl(option: int, arg: int) -> bool:
    return LIBC is not None and LIBC.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0


def _drop_capabilities() -> None:
    """Drop the dangerous capabilities for every later exec (only root may; others have none)."""
    for cap in DROPPED_CAPABILITIES:
        _prctl(PR_CAPBSET_DROP, cap)


def _enter_pid_namespace() -> bool:
    """Make this process's next child the first process of a new PID namespace."""
    if LIBC is None or not hasattr(LIBC, "unshare"):
        return False
    if LIBC.unshare(CLONE_NEWPID) == 0:
        return True
    uid, gid = os.geteuid(), os.getegid()
    if LIBC.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
        return False
    # Inside the new user namespace the skill keeps its own uid and gid (mapped to themselves).
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError:
        return True  # the PID namespace is there; the skill runs as the unmapped user
    return True


def _mount_own_proc() -> None:
    """In the namespace's first process: a private mount table with a /proc of this namespace."""
    assert LIBC is not None
    if LIBC.unshare(CLONE_NEWNS) != 0:
        return
    # Private first: a mount that propagated back would cover the host's own /proc.
    if LIBC.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return
    LIBC.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None)


def _exec(argv: list[str], control: int) -> None:
    """Become the skill's command; never returns."""
    try:
        os.close(control)
        for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores them; a command expects neither
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        message = f"cannot start {argv[0]}: {os.strerror(exc.errno or errno.ENOENT)}"
        _quietly(os.write, 2, f'\n{{"__skill_error__": {_json_string(message)}, '
                 '"retryable": false}\n'.encode())
    os._exit(CANNOT_START)


def _quietly(call: Callable[..., object], *args: object) -> None:
    """``call(*args)``, an OSError ignored (contextlib.suppress, without importing contextlib)."""
    try:
        call(*args)
    except OSError:
        return


def _json_string(text: str) -> str:
    """``text`` as a JSON string (what json.dumps gives, without importing json)."""
    escaped = "".join(ch if ch >= " " and ch not in '"\\' else f"\\u{ord(ch):04x}" for ch in text)
    return f'"{escaped}"'


def _let_go_of_pipes() -> None:
    """The skill's tree alone holds the pipes: the engine sees their end when the tree is gone."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _init(argv: list[str], control: int) -> None:
    """PID 1 of the namespace: start the skill, reap orphans, exit with the skill's status.

    When it exits the kernel kills whatever is left in the namespace."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the launcher gone, the namespace goes
    _mount_own_proc()
    _drop_capabilities()
    skill = os.fork()
    if skill == 0:
        _exec(argv, control)
    os.close(control)
    _let_go_of_pipes()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == skill:
            os._exit(_status(status))


def descendants(root: int) -> list[int]:
    """Every process whose chain of parents leads to ``root`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree() -> None:
    """Kill every descendant of this process, and reap them all.

    Every live descendant has a chain of live parents up to a child of this process (an orphan
    is re-parented to this process itself), so once no child is left there is nothing to kill.
    """
    me = os.getpid()
    for _ in range(1000):
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
        for pid in descendants(me):
            _quietly(os.kill, pid, signal.SIGKILL)
        time.sleep(0.005)


def main(args: list[str]) -> int:
    control = int(args[0])
    namespace = "--no-namespace" not in args[1:args.index("--")]
    argv = args[args.index("--") + 1:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    isolated = namespace and _enter_pid_namespace()
    if not isolated:
        _drop_capabilities()
    # No threads here: a process that unshared its PID namespace may not start any. A SIGCHLD
    # handler writes to a pipe instead, and one select waits for the child or the control pipe.
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    child = os.fork()
    if child == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if isolated:
            _init(argv, control)
        _exec(argv, control)
    _let_go_of_pipes()
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            break
        try:
            ready, _, _ = select.select([control, wake_read], [], [], 1.0)
        except InterruptedError:
            continue
        if control in ready:  # a byte or the end: the engine wants the tree gone, or is gone
            pid, status = os.waitpid(child, os.WNOHANG)
            kill_tree()
            return _status(status) if pid == child else STOPPED
        _quietly(os.read, wake_read, 4096)
    kill_tree()
    return _status(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
