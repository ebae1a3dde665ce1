"""A small world for the sandbox's network tests (run by tests/test_sandbox_network.py inside a
user and network namespace the test makes, never on the machine's own network).

In that namespace 127.0.0.1 stands for the host's loopback (where the engine's HTTP API and
MCP server listen) and 10.99.0.1, an address of the namespace but not of its loopback range,
stands for the outside world. A server on each answers with its own name. The probe skill of
tests/test_sandbox.py then tries both, through the engine, without and with the sandbox and
with and without the ``network`` effect; this prints what each attempt got, as JSON.

    python -m tests.sandbox_network_world LIBRARY INDEX
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from pathlib import Path

OUTSIDE = "10.99.0.1"
LOOPBACK = "127.0.0.1"


def serve(host: str) -> int:
    server = socket.create_server((host, 0))

    def answer() -> None:
        while True:
            conn, _ = server.accept()
            with conn:
                conn.sendall(f"hello from {host}".encode())

    threading.Thread(target=answer, daemon=True).start()
    return int(server.getsockname()[1])


def main(library: Path, index: Path) -> dict[str, object]:
    from skillgrove import Skillgrove
    from skillgrove.runtime.errors import ConfirmationRequired

    ports = {LOOPBACK: serve(LOOPBACK), OUTSIDE: serve(OUTSIDE)}
    targets = [f"{LOOPBACK}:{ports[LOOPBACK]}", f"{OUTSIDE}:{ports[OUTSIDE]}",
               f"10.0.2.2:{ports[LOOPBACK]}"]  # slirp4netns's gateway: the host, were it open
    engine = Skillgrove([library], index=index, auto_refresh=False)
    seen: dict[str, object] = {}
    for sandbox in ("off", "on"):
        os.environ["SKILLGROVE_SANDBOX"] = sandbox
        for skill in ("probe", "fetcher"):
            try:
                engine.run_skill(skill, {"connect_to": targets}, confirm=False)
                unconfirmed = "ran"
            except ConfirmationRequired:
                unconfirmed = "needs confirmation"
            record = engine.run_skill(skill, {"connect_to": targets}, confirm=True)
            seen[f"{skill}, sandbox {sandbox}"] = {
                "unconfirmed": unconfirmed, "status": record.status, "error": record.error,
                "sandboxed": record.sandboxed,
                "reached": (record.outputs or {}).get("reached")}
    return {"targets": targets, "runs": seen}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), Path(sys.argv[2]))))
