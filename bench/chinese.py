"""Chinese requests for English-described skills, on the corpus of real SKILL.md files.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/chinese.py                     # index, then search
    HF_HUB_OFFLINE=1 .venv/bin/python bench/chinese.py --index /tmp/zh/idx  # reuse an index
    HF_HUB_OFFLINE=1 .venv/bin/python bench/chinese.py --no-gloss           # the reference

``bench/chinese_requests.jsonl`` holds the requests, each with the skill folders that answer it
(several when the corpus has copies or equals). Set ``own``: written while working on the gloss,
so it has been looked at; set ``blind``: written by a helper session that never saw the gloss or
the retrieval code (its misses were read later, when the glossary's own senses were written);
set ``blind2``: written the same way after those senses were, and not tuned on. Each request
counts as found when one of
its folders is among the first three skills; the gloss each request got is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpora" / "skills"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--index", type=Path, help="an index of the corpus (built if missing)")
    parser.add_argument("--no-gloss", action="store_true", help="search the requests as written")
    args = parser.parse_args()
    from skillgrove.graph.glossary import english_gloss
    from skillgrove.graph.stages import DEFAULT_SETTINGS
    from skillgrove.runtime.engine import Skillgrove

    index = args.index or Path(tempfile.mkdtemp(prefix="skillgrove-zh-"))
    engine = Skillgrove([args.corpus], index=index,
                        retrieval=DEFAULT_SETTINGS.but(skills={"gloss": not args.no_gloss}))
    folder = {skill.id: Path(str(skill.folder)).name for skill in engine.library.skills.values()}
    rows = [json.loads(line) for line in (HERE / "chinese_requests.jsonl").open(encoding="utf-8")]
    found: dict[str, list[int]] = {}
    for row in rows:
        toolbox = engine.search(row["request"])
        ranked = [folder.get(s.id, s.id) for s in toolbox.skills]
        rank = next((i + 1 for i, name in enumerate(ranked) if name in row["accept"]), None)
        hit = rank is not None and rank <= 3
        found.setdefault(row["set"], []).append(int(hit))
        print(f"{'found' if hit else 'MISS '} {row['set']:5} rank {rank or '-':>2}  "
              f"{row['request']}\n      top 3: {', '.join(ranked[:3])}"
              + ("" if args.no_gloss else f"\n      gloss: {english_gloss(row['request'])}"))
    engine.close()
    for name, hits in found.items():
        print(f"{name}: {sum(hits)} of {len(hits)} find the skill in the top 3"
              + (" (no gloss)" if args.no_gloss else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
