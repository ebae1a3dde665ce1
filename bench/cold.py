"""A cold library (no groups, no runs) as a new user has it: the corpus of real SKILL.md files,
searched with typical requests and with requests off every skill's topic. Prints, per request,
what is selected and what is "usually used with" it (with where each came from), then two
figures: the typical requests with at least one suggestion, and the off-topic ones answered
"nothing fits". Asserts nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/cold.py                    # index, then search
    HF_HUB_OFFLINE=1 .venv/bin/python bench/cold.py --index /tmp/cold  # reuse an index

The typical requests were written in one sitting before the suggestion stage was tuned on
them, as a person asks; the off-topic ones ask about things no skill of the corpus does.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "corpora" / "skills"

TYPICAL = (
    "turn my meeting notes into a slide deck for the board",
    "review my pull request and point out bugs",
    "analyze this csv and plot monthly revenue trends",
    "run a differential expression analysis on my single-cell RNA-seq data",
    "write a literature review on CRISPR off-target effects with citations",
    "draft a marketing email campaign for our product launch",
    "set up a github actions CI pipeline that deploys to kubernetes",
    "fill in this pdf form and merge it with another pdf",
    "build a react web app with login and a dashboard",
    "summarize the clinical notes of this patient",
    "transcribe this podcast and write show notes",
    "create a jira ticket for this bug and notify the team on slack",
    "write unit tests first and then implement the feature",
    "make a comic strip about our company history",
    "search pubchem for compounds similar to aspirin and predict their properties",
)
OFF_TOPIC = (
    "how tall is mount everest",
    "what is the capital of australia",
    "order pizza for the team",
    "tell me a joke about penguins",
    "remind me to water the plants",
    "are cats better than dogs",
    "who won the football match last night",
    "what's the meaning of life",
    "book me a flight to Lisbon next friday",
    "book a table for two tonight",
    "what time does the bakery close",
    "how many calories are in a banana",
    "sing me a lullaby",
    "what should I name my goldfish",
    "is it going to snow at christmas in vienna",
    "who painted the mona lisa",
    "recommend a good novel for the beach",
    "how do I tie a bowline knot",
    "what's the best way to learn the guitar",
    "call my mom",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--index", type=Path, help="an index of the corpus (built if missing)")
    args = parser.parse_args()
    from skillgrove.runtime.engine import Skillgrove

    index = args.index or Path(tempfile.mkdtemp(prefix="skillgrove-cold-"))
    with Skillgrove([args.corpus], index=index) as engine:
        engine.index()
        suggested = 0
        for request in TYPICAL:
            toolbox = engine.search(request)
            names = {s.id: s.name for s in toolbox.skills}
            print(f"{request}\n  selected: {', '.join(names.get(i, i) for i in toolbox.selected)}")
            for suggestion in toolbox.suggestions:
                print(f"  usually used with {suggestion.name}: {suggestion.reason}")
            suggested += bool(toolbox.suggestions)
        answered = []
        for request in OFF_TOPIC:
            toolbox = engine.search(request)
            if toolbox.selected:
                names = {s.id: s.name for s in toolbox.skills}
                answered.append(f"{request} -> {', '.join(names[i] for i in toolbox.selected)}")
        print("\noff-topic requests given a skill:" + "".join(f"\n  {a}" for a in answered))
        print(f"\ntypical requests with a suggestion: {suggested} of {len(TYPICAL)}")
        print(f"off-topic requests answered 'nothing fits': {len(OFF_TOPIC) - len(answered)} "
              f"of {len(OFF_TOPIC)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
