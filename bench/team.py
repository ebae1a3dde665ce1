"""A team on one Neo4j: N server processes (HTTP and MCP) on loopback, one graph, one run log.
Prints figures; exits 1 if a request failed, a run was not found on another replica, or a
re-index was not served by every replica within --visible-within seconds.

    .venv/bin/python bench/team.py [--replicas 1,2,4] [--clients 16] [--seconds 20]
                                   [--transports http,mcp] [--uri bolt://127.0.0.1:7687]

Without ``--uri`` it starts a Neo4j of its own (``.ci/neo4j/server.sh`` on a free port, in a
temporary folder) and stops it at the end; with ``--uri`` it uses that server, whose graph it
replaces with the bundled library's (its runs stay, beside the ones this adds).

The bundled library is copied into a temporary folder that every replica serves (as replicas
share one library volume in ``docker-compose.yml``), indexed once into Neo4j, then for each
replica count and transport:

* **load**: ``--clients`` concurrent clients for ``--seconds``, client *i* talking to replica
  *i mod N*, each sending searches drawn from the requests of ``bench/serve_load.py``;
  throughput and p95 are reported beside those of one replica, measured in the same run;
* **runs**: a skill is run on the first replica and its record read from every other one
  (``/v1/runs/{id}``, or MCP's ``get_run``);
* **re-index**: a new group file is written into the shared folder and every replica is asked
  for its request every 50 ms until it answers with the new group; reported are the time from
  the write to the last replica's first such answer, and from the first re-index committing
  (the store's library fingerprint changing, watched every 20 ms) to the same — the
  second must stay within ``--visible-within``. Each replica's watcher sees the file; the
  first re-index to commit writes the graph (syncs are serialized by the store's lock node), the
  others find the store already indexed from these files and load them without writing.

Clients, servers and Neo4j share this machine's CPUs: more replicas than cores measure
contention as much as scale-out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_load import (
    REQUESTS,
    Budget,
    Tally,
    drive,
    free_port,
    http_session,
    mcp_session,
    start,
    stop,
    wait_until,
)

from skillgrove.runtime.engine import Skillgrove
from skillgrove.runtime.paths import bundled_library

REPO = Path(__file__).resolve().parent.parent
SERVER_SH = REPO / ".ci" / "neo4j" / "server.sh"
PROBE_REQUEST = "tally the glyphs of my zebra quokka manuscript"
PROBE_GROUP = """
    id: {gid}
    name: Glyph tally
    description: Tally the glyphs of a zebra quokka manuscript and say how long it reads.
    examples: ["{request}"]
    inputs:
      text: {{type: string, required: true}}
    steps:
      - id: count
        skill: text-statistics
        with: {{text: "${{{{ inputs.text }}}}"}}
    """


@dataclass
class Replica:
    url: str
    """The HTTP API's base URL, or the MCP endpoint."""
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Round:
    transport: str
    replicas: int
    clients: int
    load: Tally
    runs_found: str
    visible_after: float | None
    """From the new file to every replica answering with it."""
    visible_after_commit: float | None
    """From the first re-index of it committing to every replica answering with it."""


# -- Neo4j ------------------------------------------------------------------------------------


def own_neo4j(folder: Path) -> tuple[str, dict[str, str]]:
    """Starts a Neo4j of our own on a free port; returns its URI and the environment that
    names it to ``server.sh stop``."""
    env = {**os.environ, "SKILLGROVE_NEO4J_PORT": str(free_port()),
           "SKILLGROVE_NEO4J_RUN_DIR": str(folder)}
    done = subprocess.run(["bash", str(SERVER_SH), "start"], env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"Neo4j did not start:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1], env


# -- replicas ---------------------------------------------------------------------------------


def start_replicas(transport: str, count: int, library: Path, root: Path) -> list[Replica]:
    replicas = []
    for number in range(count):
        folder = root / f"{transport}-{number}"
        folder.mkdir(parents=True)
        port = free_port()
        log = folder / "server.log"
        if transport == "http":
            args = ["serve", "http", str(library), "--port", str(port)]
            url = f"http://127.0.0.1:{port}"
        else:
            args = ["serve", "mcp", str(library), "--transport", "http", "--port", str(port)]
            url = f"http://127.0.0.1:{port}/mcp"
        process = start([*args, "--index", str(folder / "index"), "--store", "neo4j"], log)
        replicas.append(Replica(url, process, log))
    for replica in replicas:
        ask = search_of(transport, replica.url)
        wait_until(lambda ask=ask: answers(ask), replica.process, replica.log,
                   f"{transport} replica {replica.url}", timeout=300)
    return replicas


def answers(ask: Callable[[str], Awaitable[str | None]]) -> bool:
    """True once a search succeeds (``wait_until`` asks again while it raises)."""
    asyncio.run(ask(REQUESTS[0]))
    return True


def search_of(transport: str, url: str) -> Callable[[str], Awaitable[str | None]]:
    """One search on one replica: the id of the group it answers with (None: no group)."""
    if transport == "http":
        async def over_http(request: str) -> str | None:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                response = await client.post("/v1/search", json={"request": request})
                response.raise_for_status()
                group = response.json().get("group")
                return group.get("id") if isinstance(group, dict) else None
        return over_http

    from mcp import Client

    async def over_mcp(request: str) -> str | None:
        async with Client(url) as client:
            result = await client.call_tool("search_toolbox", {"request": request})
            if result.is_error:
                raise RuntimeError(str(result.content)[:200])
            data = result.structured_content or {}
            group = data.get("group")
            return group.get("id") if isinstance(group, dict) else None
    return over_mcp


def spread(transport: str, replicas: list[Replica],
           ) -> Callable[[int, Budget, Tally], Awaitable[None]]:
    """Client ``n`` talks to replica ``n mod N``."""
    make = http_session if transport == "http" else mcp_session
    sessions = [make(replica.url) for replica in replicas]

    async def session(n: int, budget: Budget, tally: Tally) -> None:
        await sessions[n % len(sessions)](n, budget, tally)
    return session


RUN_INPUTS = {"text": "One team. One graph. Two sentences?"}


def runs_across(transport: str, replicas: list[Replica]) -> str:
    """A skill run on the first replica, read back from each of the others (``found/others``)."""
    if len(replicas) < 2:
        return "-"
    if transport == "http":
        response = httpx.post(replicas[0].url + "/v1/skills/text-statistics/runs",
                              json={"inputs": RUN_INPUTS}, timeout=60)
        response.raise_for_status()
        run_id = response.json()["id"]
        found = sum(1 for replica in replicas[1:]
                    if httpx.get(f"{replica.url}/v1/runs/{run_id}", timeout=30).status_code
                    == 200)
    else:
        found = asyncio.run(_runs_across_mcp(replicas))
    return f"{found}/{len(replicas) - 1}"


async def _runs_across_mcp(replicas: list[Replica]) -> int:
    from mcp import Client

    async with Client(replicas[0].url) as client:
        result = await client.call_tool("run_skill", {"name": "text-statistics",
                                                      "inputs": RUN_INPUTS})
        if result.is_error or not isinstance(result.structured_content, dict):
            raise RuntimeError(f"run_skill failed: {str(result.content)[:200]}")
        run_id = result.structured_content["run_id"]
    found = 0
    for replica in replicas[1:]:
        async with Client(replica.url) as client:
            read = await client.call_tool("get_run", {"id": run_id})
            data = read.structured_content
            found += not read.is_error and isinstance(data, dict) and data.get("id") == run_id
    return found


def reindex_seen_by_all(transport: str, replicas: list[Replica], library: Path, gid: str,
                        limit: float, uri: str) -> tuple[float | None, float | None]:
    """Seconds from writing a new group file to the last replica answering with it, and from
    the first re-index of it committing (the store's library fingerprint changing, watched
    every 20 ms by a thread of its own) to the same (None: not within ``limit``). A replica's
    answer is noticed at the end of a round of searches, so both figures err long. The file is
    removed again afterwards."""
    import threading

    from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore

    store = Neo4jStore.from_config(Neo4jConfig(uri=uri))
    indexed = store.get_meta("library_fingerprint")
    committed: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if store.get_meta("library_fingerprint") != indexed:
                committed.append(time.perf_counter())
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    path = library / "groups" / f"{gid}.yaml"
    asks = [search_of(transport, replica.url) for replica in replicas]
    path.write_text(textwrap.dedent(PROBE_GROUP.format(gid=gid, request=PROBE_REQUEST))
                    .lstrip(), encoding="utf-8")
    written = time.perf_counter()
    pending = set(range(len(replicas)))
    while pending and time.perf_counter() - written < limit:
        for number in sorted(pending):
            try:
                if asyncio.run(asks[number](PROBE_REQUEST)) == gid:
                    pending.discard(number)
            except Exception:
                pass  # a replica re-indexing may refuse for a moment; ask again
        if pending:
            time.sleep(0.05)
    last = time.perf_counter()
    done.set()
    watcher.join()
    store.close()
    path.unlink()
    time.sleep(2.0)  # the removal is re-indexed before the replicas stop
    if pending or not committed:
        return None, None
    return last - written, last - committed[0]


# -- the run log's cost -----------------------------------------------------------------------


def record_cost(uri: str, samples: int = 200) -> list[tuple[str, float, float]]:
    """p50 and p95 (ms) of recording one five-step run, SQLite file and Neo4j."""
    from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
    from skillgrove.graph.runlog import RunRecord, SqliteRunLog, StepRecord

    def run(number: int) -> RunRecord:
        steps = tuple(StepRecord(f"s{i}", f"skill-{i}", "skill", "success",
                                 {"text": "x" * 2000}, {"out": list(range(50))},
                                 attempts=1, started_at=time.time(), seconds=0.1)
                      for i in range(5))
        return RunRecord(f"cost-{number}-{time.time_ns()}", "report-analysis", "success",
                         {"pdf_path": "/x.pdf"}, {"team_email": "t@x.io"},
                         {"summary": "y" * 1000}, steps, time.time(), 1.0, sandboxed=True)

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Neo4jStore.from_config(Neo4jConfig(uri=uri))
        logs = [("SQLite file", SqliteRunLog(Path(tmp) / "runs.sqlite")),
                ("Neo4j", store.run_log())]
        for name, log in logs:
            for number in range(10):
                log.record(run(number))  # warm
            times = []
            for number in range(samples):
                record = run(number)
                began = time.perf_counter()
                log.record(record)
                times.append((time.perf_counter() - began) * 1000)
            times.sort()
            out.append((name, times[len(times) // 2], times[int(len(times) * 0.95)]))
            log.close()
        store.close()
    return out


# -- main -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2,4", help="replica counts (default 1,2,4)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0, help="load per round")
    parser.add_argument("--transports", default="http,mcp")
    parser.add_argument("--uri", help="use this Neo4j (its graph is replaced) instead of one "
                                      "started here")
    parser.add_argument("--visible-within", type=float, default=2.0,
                        help="seconds a re-index may take to reach every replica (default 2)")
    parser.add_argument("--max-requests", type=int, default=200_000)
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.replicas.split(",")})
    transports = [t for t in args.transports.split(",") if t]
    if 1 not in counts:
        counts.insert(0, 1)  # the reference: one process, measured in the same run
    if not set(transports) <= {"http", "mcp"} or min(counts) < 1 or args.clients < 1:
        parser.error("--transports is http and/or mcp; --replicas and --clients positive")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the servers inherit these
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="skillgrove-team-") as tmp:
        root = Path(tmp)
        neo4j_env: dict[str, str] | None = None
        if args.uri:
            uri = args.uri
        else:
            started = time.perf_counter()
            uri, neo4j_env = own_neo4j(root / "neo4j")
            print(f"started Neo4j at {uri} in {time.perf_counter() - started:.0f} s")
        os.environ["SKILLGROVE_NEO4J_URI"] = uri
        try:
            library = root / "library"
            shutil.copytree(bundled_library(), library)
            started = time.perf_counter()
            with Skillgrove([library], store="neo4j", index=root / "seed") as seed:
                seed.index()
            print(f"indexed {library} into Neo4j in {time.perf_counter() - started:.1f} s; "
                  f"{os.cpu_count()} CPUs; {args.clients} clients; {args.seconds:.0f} s of "
                  "load per round")
            for transport in transports:
                for count in counts:
                    replicas = start_replicas(transport, count, library,
                                              root / f"round-{transport}-{count}")
                    try:
                        for replica in replicas:  # warm: every request once on each
                            asyncio.run(drive(1, Budget(len(REQUESTS), 120),
                                              spread(transport, [replica])))
                        load = asyncio.run(drive(args.clients,
                                                 Budget(args.max_requests, args.seconds),
                                                 spread(transport, replicas)))
                        found = runs_across(transport, replicas)
                        seen, propagated = reindex_seen_by_all(
                            transport, replicas, library, f"glyph-tally-{transport}-{count}",
                            limit=max(10.0, args.visible_within * 5), uri=uri)
                    finally:
                        for replica in replicas:
                            stop(replica.process)
                    rounds.append(Round(transport, count, args.clients, load, found, seen,
                                        propagated))
                    print(f"  {transport} x{count}: done", flush=True)
            costs = record_cost(uri)
        finally:
            if neo4j_env is not None:
                subprocess.run(["bash", str(SERVER_SH), "stop"], env=neo4j_env,
                               capture_output=True, timeout=120)

    print()
    report(rounds, args.visible_within)
    print("\nrecording one five-step run (200 samples):")
    for name, p50, p95 in costs:
        print(f"  {name:12} p50 {p50:6.2f} ms  p95 {p95:6.2f} ms")
    failed = any(r.load.errors or (r.visible_after_commit is None)
                 or (r.visible_after_commit > args.visible_within)
                 or (r.runs_found != "-" and r.runs_found.split("/")[0]
                     != r.runs_found.split("/")[1]) for r in rounds)
    return 1 if failed else 0


def report(rounds: list[Round], within: float) -> None:
    print(f"{'transport':9} {'replicas':>8} {'clients':>7} {'requests':>8} {'req/s':>7} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'errors':>6}  {'req/s ×1':>8} {'p95 ×1':>7}  "
          f"{'runs read elsewhere':>19}  {'new file -> all':>15}  {'commit -> all':>13}")
    for r in rounds:
        one = next(x for x in rounds if x.transport == r.transport and x.replicas == 1)
        rps, p50, p95 = r.load.figures()
        one_rps, _, one_p95 = one.load.figures()
        seen = "over limit" if r.visible_after is None else f"{r.visible_after:.2f} s"
        spread = ("over limit" if r.visible_after_commit is None
                  else f"{r.visible_after_commit:.2f} s")
        print(f"{r.transport:9} {r.replicas:>8} {r.clients:>7} {r.load.requests:>8} "
              f"{rps:>7.1f} {p50:>7.1f} {p95:>7.1f} {r.load.errors:>6}  "
              f"{rps / one_rps:>8.2f} {p95 / one_p95:>7.2f}  {r.runs_found:>19}  "
              f"{seen:>15}  {spread:>13}")
        if r.load.first_error:
            print(f"    first error: {r.load.first_error}")
    print(f"\n×1: over one replica of the same transport, measured in this run. 'new file -> "
          f"all': from writing a group file to every replica answering with the group; "
          f"'commit -> all': from the first re-index of it committing in Neo4j to the same, "
          f"which must be within {within:.1f} s (a re-index on one seen by all).")


if __name__ == "__main__":
    sys.exit(main())
