"""The sandbox corpus (``tests/hostile/sandbox``, issue #26): skills that hide the same reach
for the user's key, the run log, a loopback server standing in for the engine's API, the
engine's token and another skill's folder, each spelled another way. Every case runs twice
through the engine: without the sandbox (the control: the payload works and leaks) and in it
(nothing leaks). A case the scan already rejects is held too, and says so."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from skillgrove import Skillgrove
from skillgrove.skills import discover_skills

CORPUS = Path(__file__).resolve().parent / "hostile" / "sandbox"
CASES = sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and p.name != "victim")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the sandbox is bubblewrap's, on Linux")


@dataclass
class Listener:
    """A server on 127.0.0.1 that keeps whatever it is sent."""

    sock: socket.socket
    received: list[bytes] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(3)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data)


@dataclass
class Corpus:
    lib: Path
    index: Path
    canary: str
    token: str
    victim: Path
    listener: Listener


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = tmp_path_factory.mktemp("sandbox-corpus")
    canary = "CANARY-" + secrets.token_hex(8)
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    target = home / ".ssh" / "id_rsa"
    target.write_text(f"-----BEGIN FAKE KEY-----\n{canary}\n")
    index = root / "index"
    lib = root / "lib"
    shutil.copytree(CORPUS, lib)
    server = socket.create_server(("127.0.0.1", 0))
    listener = Listener(server)
    thread = threading.Thread(target=listener.serve, daemon=True)
    thread.start()
    for path in lib.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for key, value in {"@TARGET@": str(target), "@INDEX@": str(index),
                               "@PORT@": str(server.getsockname()[1]),
                               "@VICTIM@": str(lib / "victim")}.items():
                text = text.replace(key, value)
            path.write_text(text)
    try:
        yield Corpus(lib, index, canary, "TOKEN-" + secrets.token_hex(8), lib / "victim",
                     listener)
    finally:
        listener.stop.set()
        thread.join(2)
        server.close()


VICTIM_FILES = {"SKILL.md", "main.py", "params.json"}


def leaks(corpus: Corpus, record_text: str, victim_after: str) -> list[str]:
    """Where the canary, the run log, the engine's token or a planted file turned up, whether
    anything reached the server standing in for the engine's API, whether the run log was
    written, and whether the victim still runs its own code."""
    found = []
    planted = corpus.victim / "planted.txt"
    seen = {"outputs": record_text, "server": b"".join(corpus.listener.received).decode(
        "latin-1"), "victim folder": planted.read_text("latin-1") if planted.exists() else ""}
    for where, text in seen.items():
        if corpus.canary in text:
            found.append(f"the key in {where}")
        if "SQLite format 3" in text:
            found.append(f"the run log in {where}")
        if corpus.token in text:
            found.append(f"the token in {where}")
    if corpus.listener.received:
        found.append("a connection to the engine's port on 127.0.0.1")
    extra = sorted({p.name for p in corpus.victim.iterdir()} - VICTIM_FILES)
    if extra:
        found.append(f"files in the victim's folder: {extra}")
    log = corpus.index / "runs.sqlite"
    if (log.exists() and b"PLANTED-RUNLOG" in log.read_bytes()) \
            or any(corpus.index.rglob("PLANTED-RUNLOG")):
        found.append("a write into the run log")
    if '"who": "victim"' not in victim_after:
        found.append(f"the victim ran other code: {victim_after[:200]}")
    return found


def run(corpus: Corpus, case: str, monkeypatch: pytest.MonkeyPatch, *,
        sandbox: bool) -> tuple[str, str]:
    """The case's run record, and the victim's outputs when it runs after it (JSON)."""
    monkeypatch.setenv("SKILLGROVE_TOKEN", corpus.token)
    monkeypatch.setenv("SKILLGROVE_SANDBOX", "on" if sandbox else "off")
    engine = Skillgrove([corpus.lib], index=corpus.index, allow_effects=["all"],
                        auto_refresh=False)
    engine.run_skill("victim", {})  # the run log exists, and holds a run
    record = engine.run_skill(case, {})
    assert record.sandboxed is sandbox
    after = engine.run_skill("victim", {})
    return (json.dumps(record.to_dict(), ensure_ascii=False),
            json.dumps(after.outputs, ensure_ascii=False))


def reset(corpus: Corpus) -> None:
    for path in corpus.victim.iterdir():
        if path.name not in VICTIM_FILES:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    shutil.rmtree(corpus.index, ignore_errors=True)  # a fresh run log for every run
    corpus.listener.received.clear()


def _frontmatter(case: str) -> dict[str, object]:
    text = (CORPUS / case / "SKILL.md").read_text()
    loaded = yaml.safe_load(text.split("---\n")[1])
    assert isinstance(loaded, dict)
    return loaded


# The classes of issue #26 that a skill's own code can try, each spelled several ways.
CLASSES = {
    "obfuscated code": {"b64-exec-next-line", "getattr-builtins", "import-module-pieces",
                        "marshal-code", "helper-module", "ctypes-system", "shell-base64-command",
                        "shell-rot13-command"},
    "inline code through a command": {"setsid-sh-c", "find-exec", "git-alias", "sed-execute",
                                      "tar-checkpoint", "rbash-c", "sh-skill-md",
                                      "curl-block-list"},
    "one skill changing another": {"bytecode-planter", "runlog-writer"},
    "confirmation forged, secrets asked for": {"confirm-forger", "smtp-without-effect",
                                               "token-in-env", "shell-env-dump"},
    "no disguise": {"plain-reader"},
}


def test_the_corpus_has_every_class() -> None:
    assert set(CASES) == set().union(*CLASSES.values()), "every case belongs to a class"
    assert all(len(cases) >= 2 for name, cases in CLASSES.items() if name != "no disguise")
    kinds = {next(iter(_frontmatter(c)["entrypoint"])) for c in CASES}  # type: ignore[call-overload]
    assert kinds == {"python", "command"}


@pytest.mark.parametrize("case", CASES)
def test_every_case_is_held(corpus: Corpus, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = discover_skills([corpus.lib])
    if case not in catalog.active:
        rejected = [load for load in catalog.rejected if load.path.parent.name == case]
        assert rejected and rejected[0].rejected_by, f"{case} neither loads nor is rejected"
        return  # held by the scan: it never runs
    reset(corpus)
    control = leaks(corpus, *run(corpus, case, monkeypatch, sandbox=False))
    assert control, f"the control of {case} leaked nothing: the case is broken"
    reset(corpus)
    boxed = leaks(corpus, *run(corpus, case, monkeypatch, sandbox=True))
    reset(corpus)
    assert boxed == [], f"{case} in the sandbox: {boxed}"


def test_most_cases_pass_the_scan_and_meet_the_sandbox(corpus: Corpus) -> None:
    # The scan is advice: most of these spellings get past it, which is why the sandbox is
    # the boundary. If the scan catches them all, the sandbox cases above test nothing.
    catalog = discover_skills([corpus.lib])
    loaded = [case for case in CASES if case in catalog.active]
    assert len(loaded) >= 6, loaded
