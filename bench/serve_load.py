"""Load on the two servers: the HTTP API and MCP over streamable HTTP. Prints, asserts nothing
but that no request failed (the exit code is 1 if any did).

    .venv/bin/python bench/serve_load.py [--clients 16] [--seconds 30] [--max-requests 50000]
                                         [--detail compact|full]

Indexes the bundled library into a temporary folder, starts ``skillgrove serve http`` and
``skillgrove serve mcp --transport http`` on 127.0.0.1 (each on its own copy of the index), and
for each in turn runs ``--clients`` concurrent clients for ``--seconds`` (or until
``--max-requests`` in all), each sending searches drawn from ~20 realistic requests (groups and
fall-backs): over HTTP one httpx client per client, over MCP one SDK session per client. The
reference, measured in the same run: the same searches through the engine in this process, one
caller at a time, and as many caller threads as clients. The servers are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from skillgrove.runtime.engine import Skillgrove
from skillgrove.runtime.paths import bundled_library

DETAIL: Literal["compact", "full"] = "compact"
"""The toolbox every path answers with (``--detail``)."""

REQUESTS = [
    # a group should answer these
    "summarize the quarterly report PDF and email the key numbers to my team",
    "extract revenue, margin and churn from Q3-report.pdf",
    "clean up customers.csv, remove duplicates and tell me which rows are invalid",
    "book this invoice into the ledger unless it is a duplicate",
    "write the minutes of this meeting transcript and send the action items to everyone",
    "reply to this support ticket, and escalate it if it is urgent",
    "build the weekly KPI report from the daily numbers and flag anything off target",
    "give me a digest of this web page with its key links",
    "share this contract with the auditor but redact the personal data first",
    "根据我的工作日志写一份周报",
    "处理这条客户投诉并起草回复",
    # single skills (or nothing) should answer these
    "translate this paragraph into German",
    "what is the checksum of this file?",
    "convert this markdown document into a PDF",
    "how many words and sentences does this text have?",
    "zip these three files together",
    "compute the average and median of a CSV column",
    "fill this template with the customer's name",
    "what's the weather in Paris tomorrow?",
    "book a flight to Lisbon for next Tuesday",
]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    groups: int = 0
    first_error: str | None = None
    seconds: float = 0.0
    server_cpu: float | None = None
    """CPU seconds the server process spent (for the in-process reference: the engine's)."""
    client_cpu: float | None = None
    answer_bytes: int = 0
    """Bytes of the answers (HTTP: the body; MCP: the JSON-RPC result; in process: its JSON)."""

    def add(self, seconds: float, ok: bool, shape: str | None, error: str | None = None,
            size: int = 0) -> None:
        self.latencies.append(seconds)
        self.answer_bytes += size
        if not ok:
            self.errors += 1
            self.first_error = self.first_error or error
        elif shape == "group":
            self.groups += 1

    @property
    def requests(self) -> int:
        return len(self.latencies)

    def figures(self) -> tuple[float, float, float]:
        """Throughput (req/s), p50 and p95 (ms)."""
        if not self.latencies:
            return 0.0, 0.0, 0.0
        ms = sorted(x * 1000 for x in self.latencies)
        p95 = statistics.quantiles(ms, n=100)[94] if len(ms) >= 2 else ms[0]
        return self.requests / self.seconds, statistics.median(ms), p95


class Budget:
    """The hard cap on requests, shared by every client of one run."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.left = limit
        self.deadline = time.monotonic() + seconds
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0 or time.monotonic() >= self.deadline:
                return False
            self.left -= 1
            return True


# -- servers --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "skillgrove.runtime.cli", *args],
                                stdout=sink, stderr=subprocess.STDOUT, cwd=log.parent)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until(check: Callable[[], bool], process: subprocess.Popen[bytes], log: Path,
               what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}:\n"
                             f"{log.read_text(errors='replace')[-2000:]}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} not ready after {timeout} s")


# -- the loads ------------------------------------------------------------------------------------


async def drive(clients: int, budget: Budget,
                session: Callable[[int, Budget, Tally], Awaitable[None]]) -> Tally:
    tally = Tally()
    started = time.perf_counter()
    await asyncio.gather(*(session(n, budget, tally) for n in range(clients)))
    tally.seconds = time.perf_counter() - started
    return tally


def http_session(url: str) -> Callable[[int, Budget, Tally], Awaitable[None]]:
    async def session(n: int, budget: Budget, tally: Tally) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            i = n
            while budget.take():
                request = REQUESTS[i % len(REQUESTS)]
                i += 1
                began = time.perf_counter()
                try:
                    response = await client.post("/v1/search", json={"request": request},
                                                 params={"detail": DETAIL})
                    ok = response.status_code == 200
                    shape = response.json().get("shape") if ok else None
                    tally.add(time.perf_counter() - began, ok, shape,
                              None if ok else f"{response.status_code} {response.text[:200]}",
                              len(response.content))
                except Exception as exc:
                    tally.add(time.perf_counter() - began, False, None, repr(exc))

    return session


def mcp_session(url: str) -> Callable[[int, Budget, Tally], Awaitable[None]]:
    from mcp import Client

    async def session(n: int, budget: Budget, tally: Tally) -> None:
        async with Client(url) as client:
            i = n
            while budget.take():
                request = REQUESTS[i % len(REQUESTS)]
                i += 1
                began = time.perf_counter()
                try:
                    result = await client.call_tool("search_toolbox",
                                                    {"request": request, "detail": DETAIL})
                    ok = not result.is_error
                    data = result.structured_content if ok else None
                    shape = data.get("shape") if isinstance(data, dict) else None
                    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
                    tally.add(time.perf_counter() - began, ok, shape,
                              None if ok else str(result.content)[:200], size)
                except Exception as exc:
                    tally.add(time.perf_counter() - began, False, None, repr(exc))

    return session


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(process: subprocess.Popen[bytes], clients: int, budget: Budget,
             session: Callable[[int, Budget, Tally], Awaitable[None]]) -> Tally:
    server_before, client_before = cpu_seconds(process.pid), time.process_time()
    tally = asyncio.run(drive(clients, budget, session))
    server_after = cpu_seconds(process.pid)
    if server_before is not None and server_after is not None:
        tally.server_cpu = server_after - server_before
    tally.client_cpu = time.process_time() - client_before
    return tally


def in_process(engine: Skillgrove, threads: int, budget: Budget) -> Tally:
    tally = Tally()
    cpu_before = time.process_time()
    lock = threading.Lock()

    def caller(n: int) -> None:
        i = n
        while budget.take():
            began = time.perf_counter()
            size = 0
            try:
                view = engine.toolbox(REQUESTS[i % len(REQUESTS)], detail=DETAIL)
                shape, size = view["shape"], len(json.dumps(view, ensure_ascii=False))
                ok, error = True, None
            except Exception as exc:
                shape, ok, error = None, False, repr(exc)
            with lock:
                tally.add(time.perf_counter() - began, ok, shape, error, size)
            i += 1

    started = time.perf_counter()
    workers = [threading.Thread(target=caller, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    tally.seconds = time.perf_counter() - started
    tally.server_cpu = time.process_time() - cpu_before
    return tally


# -- report ---------------------------------------------------------------------------------------


def report(rows: list[tuple[str, int, Tally]], reference: Tally) -> None:
    ref_rps, ref_p50, _ = reference.figures()
    print(f"{'':34} {'clients':>7} {'requests':>8} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7}"
          f" {'errors':>6} {'group':>6}  {'req/s ×ref':>10} {'p50 ×ref':>8}"
          f"  {'CPU ms/req: server':>18} {'client':>6} {'bytes/answer':>12}")
    for name, clients, tally in rows:
        rps, p50, p95 = tally.figures()
        share = f"{tally.groups / tally.requests:.0%}" if tally.requests else "-"
        print(f"{name:34} {clients:>7} {tally.requests:>8} {rps:>7.1f} {p50:>7.1f} {p95:>7.1f}"
              f" {tally.errors:>6} {share:>6}  {rps / ref_rps:>10.2f} {p50 / ref_p50:>8.2f}"
              f"  {_per_request(tally.server_cpu, tally):>18} "
              f"{_per_request(tally.client_cpu, tally):>6} "
              f"{tally.answer_bytes // max(tally.requests, 1):>12}")
        if tally.first_error:
            print(f"    first error: {tally.first_error}")


def versus(mcp: Tally, http: Tally) -> str:
    """MCP over HTTP in this run, the figures the target is set in (MCP within 2x of HTTP)."""
    (mcp_rps, mcp_p50, mcp_p95), (http_rps, http_p50, http_p95) = mcp.figures(), http.figures()
    if not (mcp_rps and http_p50 and http_p95):
        return "MCP / HTTP: -"
    return (f"MCP / HTTP in this run: p50 ×{mcp_p50 / http_p50:.2f}, "
            f"p95 ×{mcp_p95 / http_p95:.2f}, req/s ×{mcp_rps / http_rps:.2f}")


def _per_request(cpu: float | None, tally: Tally) -> str:
    return f"{cpu * 1000 / tally.requests:.2f}" if cpu is not None and tally.requests else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0, help="per transport")
    parser.add_argument("--max-requests", type=int, default=50_000,
                        help="hard cap on the requests of one transport (default 50000)")
    parser.add_argument("--reference-seconds", type=float, default=5.0,
                        help="per in-process reference (default 5)")
    parser.add_argument("--detail", choices=["compact", "full"], default="compact",
                        help="the toolbox every path answers with (default compact, what "
                             "agents get; full: every score and explanation)")
    args = parser.parse_args()
    global DETAIL
    DETAIL = args.detail
    if args.clients < 1 or args.seconds <= 0 or args.max_requests < 1:
        parser.error("--clients, --seconds and --max-requests must be positive")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the servers inherit these: nothing downloads
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    library = bundled_library()
    with tempfile.TemporaryDirectory(prefix="skillgrove-load-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        engine = Skillgrove([library], index=root / "index")
        engine.index()
        print(f"indexed {library} in {time.perf_counter() - started:.1f} s; "
              f"{os.cpu_count()} CPUs; {len(REQUESTS)} distinct requests; detail={DETAIL}")
        for name in ("http", "mcp"):
            shutil.copytree(root / "index", root / name / "index")
        http_port, mcp_port = free_port(), free_port()
        http_url = f"http://127.0.0.1:{http_port}"
        mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
        servers = [
            ("HTTP API", start(["serve", "http", str(library), "--index",
                                str(root / "http" / "index"), "--port", str(http_port)],
                               root / "http" / "server.log"), root / "http" / "server.log"),
            ("MCP server", start(["serve", "mcp", str(library), "--transport", "http",
                                  "--index", str(root / "mcp" / "index"), "--port",
                                  str(mcp_port)], root / "mcp" / "server.log"),
             root / "mcp" / "server.log"),
        ]
        try:
            wait_until(lambda: httpx.get(http_url + "/readyz", timeout=2).status_code == 200,
                       servers[0][1], servers[0][2], "the HTTP API")
            wait_until(lambda: _port_open(mcp_port), servers[1][1], servers[1][2],
                       "the MCP server")

            # Warm up: every request once on each path (models load, caches fill).
            warm = Budget(len(REQUESTS), 120)
            asyncio.run(drive(1, warm, http_session(http_url)))
            warm = Budget(len(REQUESTS), 120)
            asyncio.run(drive(1, warm, mcp_session(mcp_url)))
            in_process(engine, 1, Budget(len(REQUESTS), 120))

            reference = in_process(engine, 1, Budget(args.max_requests,
                                                     args.reference_seconds))
            reference_many = in_process(engine, args.clients,
                                        Budget(args.max_requests, args.reference_seconds))
            http = measured(servers[0][1], args.clients,
                            Budget(args.max_requests, args.seconds), http_session(http_url))
            mcp = measured(servers[1][1], args.clients,
                           Budget(args.max_requests, args.seconds), mcp_session(mcp_url))
        finally:
            for _, process, _ in servers:
                stop(process)
            engine.close()

        print()
        report([("reference: in-process, 1 caller", 1, reference),
                ("reference: in-process, N threads", args.clients, reference_many),
                ("HTTP API (httpx)", args.clients, http),
                ("MCP streamable HTTP (SDK Client)", args.clients, mcp)], reference)
        print(versus(mcp, http))
        print("\n×ref: the figure over the single in-process caller's. 'group': the share of "
              "answers that chose a group.\nCPU ms/req: CPU time per request of the server "
              "process (in-process: of the engine) and of\nthis process's clients. Clients, "
              "servers and the reference share this machine's CPUs; the\nengine embeds each "
              "distinct request once (the embedding cache), so the rest is transport.\n"
              "bytes/answer: the mean size of one answer on that path.")
        return 1 if http.errors or mcp.errors or reference.errors else 0


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    sys.exit(main())
