"""How long `skillgrove ask` takes on the bundled library, cold and warm, and what the time goes to.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py                 # bundled library, 10k library
    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py --big 0         # skip the 10k library
    git archive HEAD | tar -x -C /tmp/base                         # a reference checkout...
    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py --big 0 --baseline /tmp/base  # ... in the same run

Every figure is measured in this run, in fresh processes, beside the load average and two
references timed the same way (``python -c pass`` and ``python -c "import numpy"``): the machine
is shared, so the ratios say more than the seconds.

- **cold**: the first `ask` after indexing, with no library cache, no tokenizer copy and an empty
  embedding cache (so the query is encoded by the model; the model's ONNX export is reused);
- **warm**: the same command again (median of ``--repeat`` calls), and whether its answer (stdout)
  is the cold one's. Each checkout timed (``--baseline``, then this one) has an index and a cache
  folder of its own, and the warm calls take turns with each other and with the references, so a
  burst of load falls on all of them alike; each warm call is also given as a ratio to the
  ``import numpy`` of its own turn;
- **breakdown**: a process doing what `ask` does, one step at a time, each step with the imports
  it defers to its first use: imports (what the command line imports before it runs a command),
  engine, library load, store open, freshness check, query vector (from the embedding cache, or
  the model loaded and run: the ``model loaded`` line says which), search, run (the plan of the
  chosen group, as ``--plan-only``), tokenizer load, injection, close (saving the query vector);
  once cold and once warm. Then, apart, what a warm ask no longer pays: the model load and one
  encode of a text no cache holds;
- **library load**: ``load_library`` without the cache, and ``load_library_cached`` on a miss
  (which writes the cache) and on a hit, for the bundled library and for a synthetic library of
  ``--big`` skills: folders of the corpora in ``/work/shared/corpora/skills`` copied under new
  names (``<name>-c<copy>``, the ``name:`` line changed to match) until there are that many.

Two requests by default: one no group fits (single skills are injected) and one the
``report-analysis`` group serves, with the sample context that makes it ready (it is planned).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path("/work/shared/corpora/skills")
REQUESTS = (("convert my markdown notes into a PDF", None),
            ("summarize the quarterly report PDF and email the key numbers to my team",
             "samples/context_report.json"))
"""(request, context file relative to the library, or None)."""

PHASES = r"""
import json, sys, time
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
from skillgrove.runtime import cli  # what the command line imports before it runs a command
mark("imports")
from skillgrove.runtime.engine import Skillgrove
from pathlib import Path
from skillgrove.runtime.commands import load_context
engine = Skillgrove([{library!r}], index={index!r})
context = load_context(Path({context!r}) if {context!r} else None)
mark("engine")
library = engine.library
mark("library load")
engine.store
mark("store open")
engine.ensure_fresh(force=True)
mark("freshness check")
engine.encoder.encode([{request!r}])
mark("query vector")
model = getattr(engine.encoder, "encoder", None)
loaded = getattr(model, "loaded", None)
if loaded is None and hasattr(model, "_session"):  # a checkout from before `loaded`
    loaded = model._session is not None
toolbox = engine.search({request!r}, context)
mark("search")
group = toolbox.group
if group is not None and group.ready:
    found = engine.group(group.id)
    declared = {{spec.name for spec in found.inputs}}
    engine.plan(found.id, {{k: v for k, v in context.values.items() if k in declared}},
                {{"values": dict(context.values)}})
mark("run (plan only)")
from skillgrove.runtime import inject
inject._encoding()
mark("tokenizer load")
block = engine._injection(toolbox, None, None, "markdown")
mark("injection")
engine.close()
mark("close")
figures = {{name: marks[i][1] - marks[i - 1][1] for i, (name, _) in enumerate(marks) if i}}
figures["total"] = marks[-1][1] - marks[0][1]
figures["model loaded"] = -1.0 if loaded is None else float(loaded)
# What a warm ask no longer pays: the model loaded (if it was not) and one new text encoded.
from skillgrove.graph.embeddings import default_encoder
from skillgrove.runtime.engine import cache_dir
t = time.perf_counter()
fresh = default_encoder(None, cache_dir())
fresh.encode([{request!r} + " " + str(time.time())])
figures["apart: model load + encode"] = time.perf_counter() - t
t = time.perf_counter()
fresh.encode(["a text no cache holds " + str(time.time())])
figures["apart: encode"] = time.perf_counter() - t
print(json.dumps(figures))
"""
LOAD = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from skillgrove.groups.cache import load_library_cached
from skillgrove.groups.library import load_library
t1 = time.perf_counter()
paths = [Path({library!r})]
cache = Path({cache!r})
cache.unlink(missing_ok=True)
t2 = time.perf_counter()
fresh = load_library(paths)
t3 = time.perf_counter()
miss = load_library_cached(paths, cache_file=cache)
t4 = time.perf_counter()
hit = load_library_cached(paths, cache_file=cache)
t5 = time.perf_counter()
assert hit == fresh and miss == fresh, "the cached library differs from a fresh load"
print(json.dumps({{"skills": len(fresh.catalog.loads), "groups": len(fresh.group_loads),
                   "imports": t1 - t0, "uncached": t3 - t2, "miss (load + write)": t4 - t3,
                   "hit": t5 - t4, "cache bytes": cache.stat().st_size if cache.exists() else 0}}))
"""


@dataclass(frozen=True)
class Row:
    """One checkout timed: its environment, index folder and cache folder."""

    label: str
    env: dict[str, str]
    index: Path
    cache: Path

    def command(self, library: str, request: str, context: str | None) -> list[str]:
        return ask_command(library, self.index, request, context)


def python() -> str:
    return sys.executable


def run_json(script: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([python(), "-c", script], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ask_command(library: str, index: Path, request: str, context: str | None) -> list[str]:
    return [python(), "-m", "skillgrove.runtime.cli", "ask", request, "--plan-only",
            "--library", library, "--index", str(index),
            *(["--context", context] if context else [])]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall-clock seconds of one process, and what it printed on stdout."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          check=True)
    return time.perf_counter() - start, done.stdout.decode("utf-8", errors="replace")


def references(env: dict[str, str], repeat: int) -> dict[str, float]:
    """The interpreter's own start, and numpy's import (a warm ask cannot go below it)."""
    return {name: statistics.median(timed([python(), "-c", code], env)[0]
                                    for _ in range(repeat))
            for name, code in (("python -c pass", "pass"),
                               ("python -c 'import numpy'", "import numpy"))}


def load_average() -> str:
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def make_cold(index: Path, cache: Path) -> None:
    (index / "library.cache").unlink(missing_ok=True)
    for name in ("cl100k_base.ranks", "embeddings.sqlite", "embeddings.sqlite-wal",
                 "embeddings.sqlite-shm"):
        (cache / name).unlink(missing_ok=True)


def environment(cache: Path, package: str) -> dict[str, str]:
    """The package under ``package`` (the folder holding ``skillgrove/``) comes first."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", SKILLGROVE_CACHE=str(cache), PYTHONPATH=package)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # imports are timed from bytecode, as installed
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "skillgrove-pyc"))
    return env


def scratch_cache(folder: Path) -> Path:
    """A cache folder of its own, sharing the ONNX export of the user's (it takes minutes)."""
    cache = folder / "cache"
    cache.mkdir(mode=0o700, parents=True)
    configured = os.environ.get("SKILLGROVE_CACHE")
    real = Path(configured) if configured else Path.home() / ".cache" / "skillgrove"
    if (real / "onnx").is_dir():
        (cache / "onnx").symlink_to(real / "onnx")
    return cache


def synthesize(count: int, target: Path) -> Path:
    """A library of ``count`` skills made from the corpora (kept between runs)."""
    marker = target / f".complete-{count}"
    if marker.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    sources = sorted(p.parent for p in CORPORA.rglob("SKILL.md")
                     if not any(q.name == "SKILL.md" for q in p.parent.parent.glob("SKILL.md")))
    made = 0
    copy = 0
    name_line = re.compile(r"^name:[ \t]*[\"']?([^\"'\n]+?)[\"']?[ \t]*$", re.MULTILINE)
    while made < count:
        copy += 1
        for source in sources:
            if made >= count:
                break
            slug = re.sub(r"[^a-z0-9]+", "-", source.name.lower()).strip("-")[:40] or "skill"
            folder = target / "skills" / f"{slug}-c{copy}-{made}"
            shutil.copytree(source, folder, symlinks=True)
            skill_file = folder / "SKILL.md"
            text = skill_file.read_text(encoding="utf-8", errors="replace")
            text = name_line.sub(f"name: {folder.name.lower()}", text, count=1)
            skill_file.write_text(text, encoding="utf-8")
            made += sum(1 for _ in folder.rglob("SKILL.md"))
    marker.touch()
    return target


def show(title: str, figures: dict[str, float]) -> None:
    print(f"  {title}:")
    for name, value in figures.items():
        if name == "model loaded":
            shown = {1.0: "yes", 0.0: "no"}.get(value, "unknown")
        elif name in ("skills", "groups", "cache bytes"):
            shown = f"{value:,.0f}"
        else:
            shown = f"{value:.3f} s"
        print(f"    {name:<28} {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", default=str(REPO / "library"))
    parser.add_argument("--big", type=int, default=10_000, help="skills in the large library "
                        "(0: skip it)")
    parser.add_argument("--big-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "skillgrove-bench-library")
    parser.add_argument("--repeat", type=int, default=5, help="warm calls (median)")
    parser.add_argument("--baseline", action="append", default=[],
                        help="a reference checkout to time too (repeatable): its folder, or the "
                             "package root in it (the folder holding skillgrove/)")
    args = parser.parse_args()
    baselines = [str(Path(b) / ".ci" / "package") if (Path(b) / ".ci" / "package").is_dir()
                 else b for b in args.baseline]

    with tempfile.TemporaryDirectory(prefix="skillgrove-bench-ask-") as scratch:
        folder = Path(scratch)
        cache = scratch_cache(folder / "main")
        env = environment(cache, str(REPO / ".ci" / "package"))
        index = folder / "main" / "index"
        indexed = subprocess.run([python(), "-m", "skillgrove.runtime.cli", "index",
                                  args.library, "--index", str(index), "--quiet"], env=env,
                                 check=False, stdout=subprocess.DEVNULL)
        if indexed.returncode not in (0, 5):  # 5: indexed, with rejected skills left out
            raise SystemExit(f"skillgrove index exited with {indexed.returncode}")
        print(f"skillgrove ask REQUEST --plan-only  (library {args.library}); {load_average()}")
        # Each checkout has an index and a cache folder of its own (copies of this one's), so
        # their warm calls can take turns: a burst of load then falls on every row alike.
        rows: list[Row] = []
        for number, package in enumerate(baselines, 1):
            own = folder / f"baseline-{number}"
            own.mkdir()
            shutil.copytree(index, own / "index")
            own_cache = scratch_cache(own)
            rows.append(Row(f"baseline {package}", environment(own_cache, package),
                            own / "index", own_cache))
        rows.append(Row("this checkout", env, index, cache))
        requests = [(request, str(Path(args.library) / context) if context else None)
                    for request, context in REQUESTS
                    if context is None or (Path(args.library) / context).is_file()]
        for request, context in requests:
            print(f"request {json.dumps(request)}" + (f" --context {context}" if context else ""))
            colds: dict[str, tuple[float, str]] = {}
            for row in rows:
                make_cold(row.index, row.cache)
                colds[row.label] = timed(row.command(args.library, request, context), row.env)
            warm: dict[str, list[float]] = {row.label: [] for row in rows}
            ratios: dict[str, list[float]] = {row.label: [] for row in rows}
            same = {row.label: True for row in rows}
            refs: dict[str, list[float]] = {}
            for _ in range(args.repeat):
                for name, value in references(env, 1).items():
                    refs.setdefault(name, []).append(value)
                numpy_ref = refs["python -c 'import numpy'"][-1]
                for row in rows:
                    seconds, out = timed(row.command(args.library, request, context), row.env)
                    warm[row.label].append(seconds)
                    ratios[row.label].append(seconds / numpy_ref)
                    same[row.label] = same[row.label] and out == colds[row.label][1]
            print(f"  references (median of {args.repeat}, taking turns with the warm calls): "
                  + ", ".join(f"{name} {statistics.median(values):.3f} s"
                              for name, values in refs.items()) + f"; {load_average()}")
            for row in rows:
                print(f"  {row.label}: cold {colds[row.label][0]:.2f} s, warm "
                      f"{statistics.median(warm[row.label]):.2f} s (median of {args.repeat}; "
                      f"min {min(warm[row.label]):.2f}, max {max(warm[row.label]):.2f}), "
                      f"{statistics.median(ratios[row.label]):.1f}x `import numpy` of the same "
                      f"turn; warm answer {'==' if same[row.label] else '!='} cold answer")
            for row in rows:
                make_cold(row.index, row.cache)
                script = PHASES.format(library=args.library, index=str(row.index),
                                       request=request, context=context)
                show(f"breakdown, cold ({row.label})", run_json(script, row.env))
                show(f"breakdown, warm ({row.label})", run_json(script, row.env))

        print(f"library load (one process each); {load_average()}")
        show(f"bundled library {args.library}",
             run_json(LOAD.format(library=args.library, cache=str(folder / "lib.cache")), env))
        if args.big:
            big = synthesize(args.big, args.big_dir)
            show(f"synthetic library {big} ({args.big:,} skills)",
                 run_json(LOAD.format(library=str(big), cache=str(folder / "big.cache")), env))
        print(load_average())
    return 0


if __name__ == "__main__":
    sys.exit(main())
