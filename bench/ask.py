"""How long `skillgrove ask` takes on the bundled library, cold and warm, and what the time goes to.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py                 # bundled library, 10k library
    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py --big 0         # skip the 10k library
    git archive HEAD | tar -x -C /tmp/base                         # a reference checkout...
    HF_HUB_OFFLINE=1 .venv/bin/python bench/ask.py --baseline /tmp/base   # ... timed in the same run

Every figure is measured in this run, in fresh processes:

- **cold**: the first `ask` after indexing, with no library cache, no tokenizer copy and an empty
  embedding cache (so the query is encoded by the model; the model's ONNX export is reused);
- **warm**: the same command again (median of ``--repeat`` calls);
- **breakdown**: a process doing what `ask` does, one step at a time: imports, library load,
  freshness check, model load, encode (a second text, model loaded), retrieval, injection
  (tokenizer included); once cold and once warm;
- **library load**: ``load_library`` without the cache, and ``load_library_cached`` on a miss
  (which writes the cache) and on a hit, for the bundled library and for a synthetic library of
  ``--big`` skills: folders of the corpora in ``/work/shared/corpora/skills`` copied under new
  names (``<name>-c<copy>``, the ``name:`` line changed to match) until there are that many.
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path("/work/shared/corpora/skills")
REQUEST = "convert my markdown notes into a PDF"

PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
from skillgrove.runtime import cli, commands, engine as engine_module, inject  # what ask imports
from skillgrove.graph import embedded, retrieval
t1 = time.perf_counter()
engine = engine_module.Skillgrove([{library!r}], index={index!r})
library = engine.library
t2 = time.perf_counter()
engine.ensure_fresh(force=True)
t3 = time.perf_counter()
engine.encoder.encode([{request!r}])
t4 = time.perf_counter()
engine.encoder.encode([{request!r} + " " + str(time.time())])  # a text no cache holds
t5 = time.perf_counter()
toolbox = engine.search({request!r})
t6 = time.perf_counter()
block = engine._injection(toolbox, None, None, "markdown")
t7 = time.perf_counter()
engine.close()
print(json.dumps({{"imports": t1 - t0, "library load": t2 - t1, "freshness check": t3 - t2,
                   "model load + encode": t4 - t3, "encode": t5 - t4, "retrieval": t6 - t5,
                   "injection": t7 - t6, "total": t7 - t0}}))
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


def python() -> str:
    return sys.executable


def run_json(script: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([python(), "-c", script], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ask_command(library: str, index: Path) -> list[str]:
    return [python(), "-m", "skillgrove.runtime.cli", "ask", REQUEST, "--plan-only",
            "--library", library, "--index", str(index)]


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


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
    cache.mkdir(mode=0o700)
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
        unit = "" if name in ("skills", "groups", "cache bytes") else " s"
        shown = f"{value:,.0f}" if not unit else f"{value:.3f}"
        print(f"    {name:<22} {shown}{unit}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", default=str(REPO / "library"))
    parser.add_argument("--big", type=int, default=10_000, help="skills in the large library "
                        "(0: skip it)")
    parser.add_argument("--big-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "skillgrove-bench-library")
    parser.add_argument("--repeat", type=int, default=3, help="warm calls (median)")
    parser.add_argument("--baseline", help="package root of a reference checkout to time too "
                        "(the folder holding skillgrove/, e.g. <checkout>/.ci/package)")
    args = parser.parse_args()
    baseline = args.baseline
    if baseline and (Path(baseline) / ".ci" / "package").is_dir():
        baseline = str(Path(baseline) / ".ci" / "package")

    with tempfile.TemporaryDirectory(prefix="skillgrove-bench-ask-") as scratch:
        folder = Path(scratch)
        cache = scratch_cache(folder)
        env = environment(cache, str(REPO / ".ci" / "package"))
        index = folder / "index"
        subprocess.run([python(), "-m", "skillgrove.runtime.cli", "index", args.library,
                        "--index", str(index), "--quiet"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        print(f"skillgrove ask {json.dumps(REQUEST)} --plan-only  (library {args.library})")
        rows = [("this checkout", env)]
        if baseline:
            rows.insert(0, (f"baseline {baseline}", environment(cache, baseline)))
        for label, row_env in rows:
            make_cold(index, cache)
            cold = timed(ask_command(args.library, index), row_env)
            warm = statistics.median(timed(ask_command(args.library, index), row_env)
                                     for _ in range(args.repeat))
            print(f"  {label}: cold {cold:.2f} s, warm {warm:.2f} s (median of {args.repeat})")
        for label, row_env in rows:
            make_cold(index, cache)
            script = PHASES.format(library=args.library, index=str(index), request=REQUEST)
            show(f"breakdown, cold ({label})", run_json(script, row_env))
            show(f"breakdown, warm ({label})", run_json(script, row_env))

        print("library load (one process each)")
        show(f"bundled library {args.library}",
             run_json(LOAD.format(library=args.library, cache=str(folder / "lib.cache")), env))
        if args.big:
            big = synthesize(args.big, args.big_dir)
            show(f"synthetic library {big} ({args.big:,} skills)",
                 run_json(LOAD.format(library=str(big), cache=str(folder / "big.cache")), env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
