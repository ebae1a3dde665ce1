"""Runner and injection figures (issue 5). Prints, asserts nothing.

    .venv/bin/python bench/runner.py

1. Runner overhead per step: a linear chain of in-process no-op steps; the median per step of
   (run wall time / steps) over repeated runs, and the same for a 1-step group as a reference.
2. Scheduling: 250, 500 and 1,000 no-op steps, independent and in a chain; the time must grow
   linearly (1,000 steps = 4 x 250).
3. Parallel efficiency: 8 independent steps that each sleep 200 ms, concurrency 8; wall time
   against the ideal 200 ms.
4. Injected tokens for sample requests on the bundled library against the tokens of all its
   skill bodies (what stuffing every skill into the prompt would cost).
5. The sandbox (bubblewrap): the wall time of one step of a real skill process (a Python
   entrypoint, and a shell command), in the sandbox and without it, interleaved in the same run,
   p50 and p95; then 8 independent steps that each sleep 200 ms, concurrency 8, in the sandbox
   and without it in alternate rounds, against the ideal 200 ms; and the CPU one start of the
   Python interpreter takes, which bounds what 8 parallel Python steps can reach on this
   machine's cores.

``--sandbox`` runs section 5 alone.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillgrove.groups import load_group_text, load_library
from skillgrove.runtime.executors import InProcessExecutor
from skillgrove.runtime.runner import Runner, RunOptions
from skillgrove.skills.model import Entrypoint, Skill


def _skill(name: str) -> Skill:
    return Skill(id=name, name=name, description=name, folder=Path("/"), root=Path("/"),
                 content_hash="", body_line=1, entrypoint=Entrypoint("python", "x.py:run"))


def overhead(steps: int, repeats: int = 30) -> float:
    body = "".join(f"  - id: s{i}\n    skill: noop\n" + (f"    needs: [s{i - 1}]\n" if i else "")
                   for i in range(steps))
    load = load_group_text(f"id: chain\ndescription: d\nexamples: [e]\nsteps:\n{body}",
                           Path("chain.yaml"))
    assert load.group is not None
    runner = Runner({"chain": load.group}, {"noop": _skill("noop")},
                    InProcessExecutor({"noop": lambda: {}}))
    per_step = []
    for _ in range(repeats):
        started = time.perf_counter()
        record = runner.run("chain")
        per_step.append((time.perf_counter() - started) / steps)
        assert record.status == "success"
    return statistics.median(per_step) * 1000


def scheduling(steps: int, shape: str) -> float:
    """Seconds to run ``steps`` in-process no-op steps, all independent ("fan") or in a chain;
    the runner's own cost, which must grow linearly with the steps."""
    body = "".join(f"  - id: s{i}\n    skill: noop\n"
                   + (f"    needs: [s{i - 1}]\n" if i and shape == "chain" else "")
                   for i in range(steps))
    load = load_group_text(f"id: g\ndescription: d\nexamples: [e]\nsteps:\n{body}",
                           Path("g.yaml"))
    assert load.group is not None
    runner = Runner({"g": load.group}, {"noop": _skill("noop")},
                    InProcessExecutor({"noop": lambda: {}}), options=RunOptions(max_concurrency=4))
    walls = []
    for _ in range(3):
        started = time.perf_counter()
        assert runner.run("g").status == "success"
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def parallel(n: int = 8, seconds: float = 0.2) -> float:
    body = "".join(f"  - id: s{i}\n    skill: nap\n" for i in range(n))
    load = load_group_text(f"id: fan\ndescription: d\nexamples: [e]\nsteps:\n{body}",
                           Path("fan.yaml"))
    assert load.group is not None

    def nap() -> dict[str, object]:
        time.sleep(seconds)
        return {}

    runner = Runner({"fan": load.group}, {"nap": _skill("nap")}, InProcessExecutor({"nap": nap}),
                    options=RunOptions(max_concurrency=n))
    walls = []
    for _ in range(5):
        started = time.perf_counter()
        runner.run("fan")
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def _process_skills(root: Path) -> dict[str, Skill]:
    """Real skills on disk: a Python no-op, a shell no-op, and a Python nap of ``seconds``."""
    from skillgrove.skills import load_skill

    texts = {
        "py-noop": ("entrypoint: {python: main.py:run}", "main.py", "def run():\n    return {}\n"),
        "sh-noop": ("entrypoint: {command: [sh, run.sh]}", "run.sh", "cat >/dev/null; echo '{}'\n"),
        "py-nap": ("entrypoint: {python: main.py:run}\ninputs: {properties: {seconds: "
                   "{type: number}}}", "main.py",
                   "import time\ndef run(seconds):\n    time.sleep(seconds)\n    return {}\n"),
        "sh-nap": ("entrypoint: {command: [sh, run.sh]}\ninputs: {properties: {seconds: "
                   "{type: number}}}", "run.sh", "cat >/dev/null; sleep 0.2; echo '{}'\n"),
    }
    skills = {}
    for name, (front, file, code) in texts.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}\n{front}\n"
                                         "---\nbench\n")
        (folder / file).write_text(code)
        loaded = load_skill(folder / "SKILL.md", root)
        assert loaded.skill is not None, [d.format() for d in loaded.diagnostics]
        skills[name] = loaded.skill
    return skills


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _children_cpu() -> float:
    """CPU seconds of the children this process has waited for (a sandboxed skill's processes
    are reaped inside its PID namespace and never counted here, so this measures only plain
    processes)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def interpreter_cpu(python: str, runs: int = 20) -> float:
    """CPU seconds one start of ``python`` with the step shim's imports takes: what every Python
    step pays, in the sandbox or not, before the skill's own code runs."""
    import subprocess

    used = _children_cpu()
    for _ in range(runs):
        subprocess.run([python, "-c", "import json, sys\n"
                        "from importlib.machinery import ModuleSpec, SourceFileLoader"],
                       check=True)
    return (_children_cpu() - used) / runs


def sandbox_cost(repeats: int = 40, rounds: int = 7) -> None:
    """Section 5. Every figure compares the sandbox with no sandbox measured in the same run,
    interleaved, so that both meet the same load."""
    import tempfile

    from skillgrove.runtime import sandbox
    from skillgrove.runtime.executors import Cancel, SubprocessExecutor

    why = sandbox.problem()
    if why is not None:
        print(f"\nsandbox: not measured: {why}")
        return
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        skills = _process_skills(Path(folder))
        executors = {"sandbox": SubprocessExecutor(sandbox=True),
                     "no sandbox": SubprocessExecutor(sandbox=False)}
        print(f"\nsandbox start cost, one step of a real skill process ({repeats} runs each, "
              "interleaved):")
        for name in ("py-noop", "sh-noop"):
            times: dict[str, list[float]] = {how: [] for how in executors}
            for _ in range(repeats):
                for how, executor in executors.items():
                    started = time.perf_counter()
                    result = executor.execute(skills[name], {}, timeout=60, cancel=Cancel())
                    times[how].append(time.perf_counter() - started)
                    assert result.ok, result.error
            p = {how: (_percentile(t, 0.5) * 1000, _percentile(t, 0.95) * 1000)
                 for how, t in times.items()}
            print(f"  {name:<8} sandbox p50 {p['sandbox'][0]:.1f} ms, p95 {p['sandbox'][1]:.1f} ms"
                  f"; no sandbox p50 {p['no sandbox'][0]:.1f} ms, p95 {p['no sandbox'][1]:.1f} ms"
                  f"; the sandbox adds {p['sandbox'][0] - p['no sandbox'][0]:+.1f} ms at p50")
        for skill, kind in (("sh-nap", "shell"), ("py-nap", "Python")):
            body = "".join(f"  - id: s{i}\n    skill: {skill}\n    with: {{seconds: 0.2}}\n"
                           for i in range(8))
            load = load_group_text(f"id: fan\ndescription: d\nexamples: [e]\nsteps:\n{body}",
                                   Path("fan.yaml"))
            assert load.group is not None
            runners = {how: Runner({"fan": load.group}, skills, executor,
                                   options=RunOptions(max_concurrency=8))
                       for how, executor in executors.items()}
            walls: dict[str, list[float]] = {how: [] for how in executors}
            for _ in range(rounds):  # alternate rounds: both meet the same load
                for how, runner in runners.items():
                    started = time.perf_counter()
                    assert runner.run("fan").status == "success"
                    walls[how].append(time.perf_counter() - started)
            wall = {how: statistics.median(w) for how, w in walls.items()}
            print(f"  8 parallel 200 ms {kind} steps (median of {rounds}): sandbox "
                  f"{wall['sandbox'] * 1000:.0f} ms ({0.2 / wall['sandbox']:.0%} of the ideal "
                  f"200 ms); no sandbox {wall['no sandbox'] * 1000:.0f} ms "
                  f"({0.2 / wall['no sandbox']:.0%}); sandbox / no sandbox "
                  f"{wall['sandbox'] / wall['no sandbox']:.2f}")
        start = interpreter_cpu(executors["sandbox"].python)
        print(f"  one start of the step's Python interpreter: {start * 1000:.1f} ms of CPU; 8 of "
              f"them on {cores} idle cores alone keep 8 parallel 200 ms Python steps at "
              f"{0.2 / (0.2 + 8 * start / cores):.0%} of the ideal at best")
        print(f"  (load average while measuring: {os.getloadavg()[0]:.1f} on {cores} cores)")


def injection() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from skillgrove.graph import EmbeddedStore, Retriever, index_library
    from skillgrove.graph.embeddings import (
        CachedEncoder,
        EmbeddingCache,
        SentenceTransformerEncoder,
    )
    from skillgrove.runtime.commands import cache_path
    from skillgrove.runtime.inject import build_injection, count_tokens
    from skillgrove.runtime.paths import bundled_library

    library = load_library([bundled_library()])
    encoder = CachedEncoder(SentenceTransformerEncoder(), EmbeddingCache(cache_path()))
    store = EmbeddedStore(None)
    index_library(library, store, encoder)
    retriever = Retriever(store, encoder)
    all_bodies = sum(count_tokens(s.body()) for s in library.skills.values())
    print(f"\nbundled library: {len(library.skills)} skills, {len(library.groups)} groups; "
          f"all skill bodies together: {all_bodies} tokens (cl100k_base)")
    requests = [
        "summarize the quarterly report PDF and email the key numbers to my team",
        "reply to this customer support ticket",
        "make the weekly KPI report from the sales CSV",
        "turn the meeting transcript into action items and invite everyone",
        "add this invoice to the ledger",
        "clean up this messy CSV file",
        "生成本周的周报",
        "translate this paragraph into German",
    ]
    print(f"{'request':<75} {'tokens':>7} {'share':>6}  budget 1500")
    for request in requests:
        toolbox = retriever.search(request)
        full = build_injection(toolbox, library.catalog.by_id())
        capped = build_injection(toolbox, library.catalog.by_id(), budget=1500)
        print(f"{request[:75]:<75} {full.tokens:>7} {full.tokens / all_bodies:>6.1%}  "
              f"{capped.tokens} ({capped.level})")


if __name__ == "__main__":
    if "--sandbox" in sys.argv[1:]:
        sandbox_cost()
        sys.exit(0)
    reference = overhead(1)
    chain = overhead(50, repeats=10)
    print(f"runner overhead per step, in-process no-op steps: median {chain:.3f} ms "
          f"(50-step chain); {reference:.3f} ms for a 1-step group")
    for shape in ("fan", "chain"):
        walls = {n: scheduling(n, shape) for n in (250, 500, 1000)}
        print(f"scheduling, {shape} of in-process no-op steps: " + ", ".join(
            f"{n} steps {w:.2f} s" for n, w in walls.items())
            + f" (1000/250: {walls[1000] / walls[250]:.1f}x; linear is 4x)")
    wall = parallel()
    print(f"parallel efficiency: 8 independent 200 ms steps took {wall * 1000:.0f} ms "
          f"(ideal 200 ms; efficiency {0.2 / wall:.0%})")
    sandbox_cost()
    injection()
