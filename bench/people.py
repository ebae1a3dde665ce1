"""The bundled library asked as people ask: requests written the way a person types them, each
with the answers that person would accept (``bench/people.jsonl``), searched through the engine
a new user has. Prints each request with its answer, marked right or wrong, then the figure: the
requests answered as their writer expects. Asserts nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/people.py                  # index, then search
    HF_HUB_OFFLINE=1 .venv/bin/python bench/people.py --index /tmp/lib  # reuse an index

An accepted answer is a group's id (the group, nothing added or left out) or a list of skill
names (the selection, as a set; an empty list: "nothing fits"). The requests were written for
the library's skills and groups, not for its examples' words, by two sittings of the team; the
first thirty before the planner's last changes, the other thirty after, to see what it missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUESTS = HERE / "people.jsonl"


def answer_of(toolbox: Any, names: dict[str, str]) -> tuple[str | None, frozenset[str]]:
    """(the group's id when a whole group answers, else None; the selected skills' names)."""
    group = toolbox.group
    chosen = frozenset(names.get(sid, sid) for sid in toolbox.selected)
    whole = group is not None and len(toolbox.selected) == len(group.members)
    return (group.id.removeprefix("group:") if whole else None), chosen


def accepted(answer: tuple[str | None, frozenset[str]], accept: list[Any]) -> bool:
    group, chosen = answer
    for option in accept:
        if isinstance(option, str) and group == option:
            return True
        if isinstance(option, list) and group is None and chosen == frozenset(option):
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="an index of the bundled library (built if "
                        "missing)")
    parser.add_argument("--requests", type=Path, default=REQUESTS)
    args = parser.parse_args()
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.paths import bundled_library

    cases = [json.loads(line) for line in args.requests.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    index = args.index or Path(tempfile.mkdtemp(prefix="skillgrove-people-"))
    right = 0
    with Skillgrove([bundled_library()], index=index) as engine:
        engine.index()
        names = {skill.id: name for name, skill in engine.library.skills.items()}
        for case in cases:
            toolbox = engine.search(case["request"])
            answer = answer_of(toolbox, names)
            ok = accepted(answer, case["accept"])
            right += ok
            said = f"group {answer[0]}" if answer[0] else (", ".join(sorted(answer[1]))
                                                           or "nothing")
            print(f"{'ok ' if ok else 'NO '} {case['request']}\n      -> {said}")
    print(f"\nanswered as the writer expects: {right} of {len(cases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
