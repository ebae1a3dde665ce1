"""How long the safety scan takes on text built to make it slow (issue 14). Prints figures,
asserts nothing.

    .venv/bin/python bench/scan.py [--repeat 3]

Each case is one long line of a repeated unit — the shapes that made the line-oriented scan
quadratic (``env |`` in a script, ``curl `` in a SKILL.md) and the shapes each normalising step
and rule family works hardest on — scanned with every default rule, the best of ``--repeat``
runs. The reference, measured in the same run, is ordinary text of the same size: the bundled
library's SKILL.md files and scripts concatenated and repeated. The ratio says how far from
ordinary text an attacker can push the scan; a linear scan keeps it a small constant at every
size.

Before issue 14 the scan took 5.8 s on 8 KB of ``env |``, 82 s on 32 KB and 209 s on 250 KB of
``curl `` in a SKILL.md; 1 MiB of ``env |`` would have taken about a day.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillgrove.skills.safety import DEFAULT_RULES, scan_text

LIBRARY = Path(__file__).resolve().parent.parent / "library" / "skills"
KIB = 1024
MIB = 1024 * KIB

CASES: list[tuple[str, str, str, int]] = [
    # (what, unit, file name, size)
    ("env | (script)", "env |", "payload.sh", 8 * KIB),
    ("env | (script)", "env |", "payload.sh", 32 * KIB),
    ("env | (script)", "env |", "payload.sh", 1 * MIB),
    ("curl (SKILL.md)", "curl ", "SKILL.md", 250 * KIB),
    ("curl (script)", "curl ", "payload.sh", 1 * MIB),
    ("curl -d ~/.ssh/id_rsa | (script)", "curl -d ~/.ssh/id_rsa |", "payload.sh", 1 * MIB),
    ("quote pieces \"a\" + (script)", '"a" + ', "payload.py", 1 * MIB),
    ("shell variables A=x $A (script)", "A=x $A ", "payload.sh", 1 * MIB),
    ("continuations \\ newline (script)", "curl \\\n", "payload.sh", 1 * MIB),
    ("ignore previous (SKILL.md)", "ignore previous ", "SKILL.md", 250 * KIB),
    ("socket + pty.spawn (script)", "socket.socket( pty.spawn(", "payload.py", 1 * MIB),
    ("zero-width between letters (SKILL.md)", "a\u200b", "SKILL.md", 250 * KIB),
]


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _best(text: str, name: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        scan_text(text, Path(name), DEFAULT_RULES)
        best = min(best, time.process_time() - started)
    return best


def _ordinary() -> str:
    parts = [p.read_text(encoding="utf-8") for p in sorted(LIBRARY.rglob("*"))
             if p.is_file() and p.suffix in {".md", ".py"}]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ordinary = _ordinary()
    print(f"{'case':42} {'size':>9} {'seconds':>9} {'MB/s':>7} {'x ordinary':>11}")
    for what, unit, name, size in CASES:
        text = _fill(unit, size)
        reference = _best(_fill(ordinary, size), name, args.repeat)
        seconds = _best(text, name, args.repeat)
        label = f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KB"
        print(f"{what:42} {label:>9} {seconds:9.3f} {size / seconds / 1e6:7.1f} "
              f"{seconds / reference:11.1f}")


if __name__ == "__main__":
    main()
