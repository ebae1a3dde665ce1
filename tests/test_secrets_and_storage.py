"""Secrets stay where they belong: an SMTP password is sent only over TLS unless the
configuration says otherwise, run records (which hold the caller's inputs and context) are
readable by their owner only, and a Neo4j password never appears in a message."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from skillgrove import Skillgrove
from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.errors import StoreError
from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore, redact_uri
from skillgrove.graph.runlog import RunRecord, SqliteRunLog
from skillgrove.runtime.paths import bundled_library

PASSWORD = "hunter2-do-not-print"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: the modes below must not depend on the user's."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


# -- SMTP: no password without TLS ------------------------------------------------------------

class _Recorder:
    """What the test SMTP server received: every byte, each AUTH attempt, each message."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.logins: list[tuple[str, str]] = []
        self.messages: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope.content)
        return "250 OK"

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str,
                     auth_data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult

        login, password = auth_data.login.decode(), auth_data.password.decode()
        self.logins.append((login, password))
        return AuthResult(success=password == PASSWORD)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def plaintext_smtp() -> Iterator[tuple[int, _Recorder]]:
    """An SMTP server on 127.0.0.1 that offers AUTH PLAIN/LOGIN and no STARTTLS."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import SMTP

    recorder = _Recorder()

    class RecordingSMTP(SMTP):
        def data_received(self, data: bytes) -> None:
            recorder.received.extend(data)
            super().data_received(data)

    class RecordingController(Controller):
        def factory(self) -> SMTP:
            return RecordingSMTP(self.handler, **self.SMTP_kwargs)

    port = _free_port()
    controller = RecordingController(recorder, hostname="127.0.0.1", port=port,
                                     authenticator=recorder.authenticate,
                                     auth_require_tls=False)
    controller.start()
    try:
        yield port, recorder
    finally:
        controller.stop()


def _send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: int, **env: str) -> Any:
    monkeypatch.setenv("SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("SMTP_PORT", str(port))
    monkeypatch.setenv("SMTP_USER", "mailer")
    monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
    monkeypatch.delenv("SMTP_ALLOW_PLAINTEXT_AUTH", raising=False)
    # The test's SMTP server is on 127.0.0.1, which the sandbox's outward-only network never
    # reaches (tests/test_sandbox.py); these tests are about what the mail skill sends.
    monkeypatch.setenv("SKILLGROVE_SANDBOX", "off")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with Skillgrove([bundled_library()], index=tmp_path / "idx") as engine:
        return engine.run_skill("send-email", {"to": "team@example.com", "subject": "Q3",
                                               "body": "numbers"})


def test_no_password_is_sent_to_a_server_without_tls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        plaintext_smtp: tuple[int, _Recorder]) -> None:
    port, server = plaintext_smtp
    record = _send(tmp_path, monkeypatch, port)

    assert record.status == "failure"
    assert (f"SMTP 127.0.0.1:{port} offers no STARTTLS: refusing to send the password of mailer "
            "unencrypted. Use port 465 or a server with STARTTLS, or set "
            "SMTP_ALLOW_PLAINTEXT_AUTH=1") in (record.error or "")
    assert server.logins == [] and server.messages == []
    assert b"AUTH" not in bytes(server.received).upper()
    assert PASSWORD.encode() not in bytes(server.received)
    assert PASSWORD not in (tmp_path / "idx" / "runs.sqlite").read_bytes().decode("latin-1")


def test_plaintext_login_when_the_configuration_allows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        plaintext_smtp: tuple[int, _Recorder]) -> None:
    port, server = plaintext_smtp
    record = _send(tmp_path, monkeypatch, port, SMTP_ALLOW_PLAINTEXT_AUTH="1")

    assert record.status == "success", record.error
    assert record.outputs["delivered"] == "smtp"
    assert server.logins == [("mailer", PASSWORD)]
    assert len(server.messages) == 1 and b"Subject: Q3" in server.messages[0]


def test_without_a_user_mail_goes_out_unauthenticated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        plaintext_smtp: tuple[int, _Recorder]) -> None:
    port, server = plaintext_smtp
    monkeypatch.delenv("SMTP_USER", raising=False)
    record = _send(tmp_path, monkeypatch, port, SMTP_USER="")

    assert record.status == "success", record.error
    assert server.logins == [] and len(server.messages) == 1


def test_outbox_mail_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                open_umask: None) -> None:
    monkeypatch.delenv("SMTP_HOST", raising=False)
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    with Skillgrove([bundled_library()], index=tmp_path / "idx") as engine:
        record = engine.run_skill("send-email", {"to": "a@example.com", "subject": "s",
                                                 "body": "b"})
    assert record.status == "success", record.error
    written = Path(record.outputs["path"])
    assert (mode(written.parent), mode(written)) == (0o700, 0o600)


# -- run records and the index folder ---------------------------------------------------------

def test_run_records_are_readable_by_their_owner_only(tmp_path: Path,
                                                      open_umask: None) -> None:
    index = tmp_path / "new" / "idx"
    with Skillgrove([bundled_library()], index=index) as engine:
        record = engine.run_skill("text-statistics", {"text": "One. Two."})
    assert record.status == "success", record.error
    assert mode(index) == 0o700
    assert mode(index / "runs") == 0o700
    files = sorted(index.glob("runs.sqlite*"))
    assert files and {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}


def test_sqlites_companion_files_take_the_run_logs_mode(tmp_path: Path,
                                                        open_umask: None) -> None:
    path = tmp_path / "runs.sqlite"
    log = SqliteRunLog(path)
    log.record(RunRecord("r1", "g", "success", {"token": "t0ps3cret"}, {"values": {}}, {}, (),
                         0.0, 0.1))
    # A second connection in WAL mode keeps a -wal and a -shm file while it is open.
    other = sqlite3.connect(path)
    other.execute("PRAGMA journal_mode=WAL")
    other.execute("INSERT INTO run VALUES ('r2', 'g', 'success', 1.0, '{}')")
    other.commit()
    companions = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    assert all(p.exists() for p in companions)
    assert [mode(p) for p in (path, *companions)] == [0o600, 0o600, 0o600]
    other.close()
    log.close()


def test_an_existing_run_log_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SqliteRunLog(path).close()
    path.chmod(0o644)
    SqliteRunLog(path).close()
    assert mode(path) == 0o600


def test_the_index_folder_is_created_private_and_a_given_one_left_alone(
        tmp_path: Path, open_umask: None) -> None:
    EmbeddedStore(tmp_path / "made" / "graph.sqlite").close()
    assert mode(tmp_path / "made") == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    EmbeddedStore(shared / "graph.sqlite").close()
    assert mode(shared) == 0o755


# -- Neo4j: credentials never echoed ----------------------------------------------------------

@pytest.mark.parametrize(("text", "shown"), [
    ("bolt://neo4j:s3cret@db:7687", "bolt://neo4j:***@db:7687"),
    ("neo4j+s://admin:p%40ss@db.example.com", "neo4j+s://admin:***@db.example.com"),
    ("cannot reach bolt://u:pa@ss@h:1/x and http://v:w@h2", "cannot reach bolt://u:***@h:1/x "
     "and http://v:***@h2"),
    ("bolt://neo4j@db:7687", "bolt://neo4j@db:7687"),
    ("bolt://127.0.0.1:7687", "bolt://127.0.0.1:7687"),
])
def test_redact_uri(text: str, shown: str) -> None:
    assert redact_uri(text) == shown


def test_a_password_in_the_uri_is_refused_without_showing_it() -> None:
    config = Neo4jConfig(uri=f"bolt://neo4j:{PASSWORD}@127.0.0.1:7687")
    assert PASSWORD not in repr(config)
    with pytest.raises(StoreError) as error:
        Neo4jStore.from_config(config)
    message = str(error.value)
    assert message.startswith("the Neo4j URI 'bolt://neo4j:***@127.0.0.1:7687' holds "
                              "credentials, which the driver does not take from a URI: give "
                              "the URI without them and set SKILLGROVE_NEO4J_USER and "
                              "SKILLGROVE_NEO4J_PASSWORD")
    assert PASSWORD not in message
    assert error.value.__cause__ is None and error.value.__context__ is None


def test_a_configured_password_is_masked_wherever_the_driver_repeats_it() -> None:
    # A scheme the driver refuses: its message repeats the URI, which holds the password
    # as a path segment (not userinfo, so only the masking of known secrets catches it).
    config = Neo4jConfig(uri=f"bolt+nope://db/{PASSWORD}", password=PASSWORD)
    with pytest.raises(StoreError) as error:
        Neo4jStore.from_config(config)
    assert "URI scheme 'bolt+nope' is not supported" in str(error.value)
    assert PASSWORD not in str(error.value)
    assert PASSWORD not in repr(config)


def test_the_cli_never_prints_the_password(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    from skillgrove.runtime.cli import main

    port = _free_port()  # nothing listens there
    for uri in (f"bolt://neo4j:{PASSWORD}@127.0.0.1:{port}", f"bolt://127.0.0.1:{port}"):
        monkeypatch.setenv("SKILLGROVE_NEO4J_URI", uri)
        monkeypatch.setenv("SKILLGROVE_NEO4J_PASSWORD", PASSWORD)
        out = StringIO()
        code = main(["search", "find a pdf skill", "--store", "neo4j", "--index",
                     str(tmp_path / "idx")], out)
        err = capsys.readouterr().err
        assert code == 1
        assert err.startswith("skillgrove: ") and err.count("\n") == 1, err
        assert PASSWORD not in err + out.getvalue()
