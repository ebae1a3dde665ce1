"""Fuzz the three parsers hard: SKILL.md, group files and ``${{ }}`` expressions. Prints, asserts
nothing.

    .venv/bin/python bench/fuzz.py [--examples 10000] [--seed 0] [--only expression]

The inputs and targets are the ones of ``tests/test_fuzz.py`` (syntax-shaped YAML, frontmatter,
schemas, step graphs and expressions, sometimes damaged), run on many more inputs. For each target
it prints the inputs tried, the exceptions that escaped (anything but a ``SkillgroveError`` from an
expression; anything at all from a loader, which must answer with diagnostics), grouped by type
and message with one input that raised it, and the time taken.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hypothesis import HealthCheck, given, seed, settings

from tests.test_fuzz import TARGETS


def fuzz(name: str, examples: int, random_seed: int) -> tuple[int, Counter[str], dict[str, str],
                                                              float]:
    strategy, make_target = TARGETS[name]
    target = make_target()
    tried = 0
    escaped: Counter[str] = Counter()
    sample: dict[str, str] = {}

    @seed(random_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(text: str) -> None:
        nonlocal tried
        tried += 1
        try:
            target(text)
        except Exception as exc:  # counting what escapes is the point
            where = traceback.extract_tb(exc.__traceback__)[-1]
            key = (f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
                   f" ({Path(where.filename).name}:{where.lineno})")
            escaped[key] += 1
            sample.setdefault(key, text[:300])

    started = time.perf_counter()
    run()
    return tried, escaped, sample, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=sorted(TARGETS), default=None)
    args = parser.parse_args()
    print(f"{args.examples:,} inputs per target, seed {args.seed}")
    for name in [args.only] if args.only else list(TARGETS):
        tried, escaped, sample, seconds = fuzz(name, args.examples, args.seed)
        total = sum(escaped.values())
        print(f"\n{name}: {tried:,} inputs in {seconds:.1f} s ({tried / seconds:,.0f}/s); "
              f"{total} escaped exceptions, {len(escaped)} distinct")
        for key, count in escaped.most_common():
            print(f"  {count:6,}  {key}\n          e.g. {sample[key]!r}")


if __name__ == "__main__":
    main()
