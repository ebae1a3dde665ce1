"""Do the Neo4j store and the embedded store find the same skills? Prints, asserts nothing.

    SKILLGROVE_NEO4J_URI=bolt://127.0.0.1:7687 .venv/bin/python bench/neo4j_agreement.py

Indexes the 1,321-skill corpus (``../shared/corpora/skills``) with the command line —
``skillgrove index`` into a temporary embedded index and ``skillgrove index --store neo4j`` into
the server at ``SKILLGROVE_NEO4J_URI`` (its skills and groups are replaced) — then runs
``skillgrove search --json -k 5`` for every request of :data:`REQUESTS` on both stores.

A request *agrees* when both return the same top-5 skills (as a set; the order is reported too).
The figure is the share of requests that agree; issue #4 asks for at least 90 %.
``tests/neo4j/test_agreement.py`` asserts it on a subset.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillgrove.runtime.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "skills"

REQUESTS: tuple[str, ...] = (
    # English
    "fill in a PDF form and extract its tables",
    "create a Word document with tracked changes",
    "build a pivot table in an Excel spreadsheet",
    "make a slide deck presentation from my notes",
    "post an article to my WeChat official account",
    "analyze single-cell RNA-seq data",
    "search PubMed for papers on CRISPR",
    "write a failing test first, then the implementation",
    "debug a flaky bug systematically before fixing it",
    "build an MCP server for an external API",
    "test my web app in a browser with Playwright",
    "create an animated GIF for Slack",
    "send a message to a Slack channel",
    "fix the failing GitHub Actions CI checks on my pull request",
    "download a YouTube video",
    "generate algorithmic art with p5.js",
    "turn a web page URL into markdown",
    "create a new issue in Linear",
    "plot a scientific figure with matplotlib",
    "schedule an event in Google Calendar",
    # Chinese
    "发布文章到微信公众号",
    "把这篇文章做成知识漫画",
    "生成小红书图文卡片",
    "为文章生成封面图",
    "把网页转换成 Markdown",
    "压缩图片大小",
)
"""20 English and 6 Chinese requests, written for skills the corpus holds (documents, science,
development practice, app automation, the baoyu content skills)."""


@dataclass(frozen=True)
class Comparison:
    request: str
    embedded: tuple[str, ...]
    neo4j: tuple[str, ...]

    @property
    def agrees(self) -> bool:
        return set(self.embedded) == set(self.neo4j)

    @property
    def same_order(self) -> bool:
        return self.embedded == self.neo4j

    @property
    def overlap(self) -> int:
        return len(set(self.embedded) & set(self.neo4j))


@dataclass(frozen=True)
class Agreement:
    comparisons: tuple[Comparison, ...]
    index_seconds: dict[str, float]
    search_seconds: dict[str, float]

    @property
    def share(self) -> float:
        return sum(c.agrees for c in self.comparisons) / len(self.comparisons)


def _cli(args: Sequence[str], ok: tuple[int, ...] = (0,)) -> str:
    out = io.StringIO()
    code = main(list(args), out)
    if code not in ok:
        raise RuntimeError(f"skillgrove {' '.join(args)} exited with {code}")
    return out.getvalue()


def _top(args: Sequence[str]) -> tuple[str, ...]:
    # The full toolbox: the compact one lists only the selected skills, and ids only where
    # names clash; exit code 4 is a search where nothing fits (still a ranking to compare).
    toolbox = json.loads(_cli([*args, "--detail", "full"], ok=(0, 4)))
    return tuple(skill["id"] for skill in toolbox["skills"][:5])


def measure(requests: Sequence[str] = REQUESTS, corpus: Path = CORPUS,
            progress: Callable[[str], None] | None = None) -> Agreement:
    """Indexes ``corpus`` into both stores with the CLI and compares their top 5 per request.
    The Neo4j server is the one ``SKILLGROVE_NEO4J_URI`` names."""
    say = progress or (lambda _: None)
    index_seconds: dict[str, float] = {}
    search_seconds = {"embedded": 0.0, "neo4j": 0.0}
    comparisons = []
    with tempfile.TemporaryDirectory() as tmp:
        embedded = ["--index", str(Path(tmp) / "index")]
        neo4j = ["--store", "neo4j"]
        for name, store in (("embedded", embedded), ("neo4j", neo4j)):
            started = time.perf_counter()
            # 5: indexed, with the corpus's rejected skills left out (as they should be).
            say(_cli(["index", str(corpus), "-q", *store], ok=(0, 5)).strip().splitlines()[0])
            index_seconds[name] = time.perf_counter() - started
        for request in requests:
            tops = {}
            for name, store in (("embedded", embedded), ("neo4j", neo4j)):
                started = time.perf_counter()
                tops[name] = _top(["search", request, "--json", "-k", "5", *store])
                search_seconds[name] += time.perf_counter() - started
            comparisons.append(Comparison(request, tops["embedded"], tops["neo4j"]))
    return Agreement(tuple(comparisons), index_seconds, search_seconds)


def report(agreement: Agreement) -> str:
    lines = ["agree  order  overlap  request"]
    for c in agreement.comparisons:
        lines.append(f"{'yes' if c.agrees else 'NO':>5}  {'same' if c.same_order else 'diff':>5}  "
                     f"{c.overlap}/5      {c.request}")
        if not c.agrees:
            lines.append(f"{'':21}embedded only: {sorted(set(c.embedded) - set(c.neo4j))}")
            lines.append(f"{'':21}neo4j only:    {sorted(set(c.neo4j) - set(c.embedded))}")
    n = len(agreement.comparisons)
    agreeing = sum(c.agrees for c in agreement.comparisons)
    ordered = sum(c.same_order for c in agreement.comparisons)
    mean_overlap = sum(c.overlap for c in agreement.comparisons) / n
    lines += [
        "",
        f"requests: {n} ({sum(1 for c in agreement.comparisons if c.request.isascii())} English, "
        f"{sum(1 for c in agreement.comparisons if not c.request.isascii())} Chinese)",
        f"same top-5 skills: {agreeing}/{n} = {agreement.share:.0%}  (same order too: "
        f"{ordered}/{n}; mean overlap {mean_overlap:.2f}/5)",
        "index (CLI, embeddings cached): "
        + ", ".join(f"{k} {v:.1f} s" for k, v in agreement.index_seconds.items()),
        "search (CLI, per request, in-process, including opening the store): "
        + ", ".join(f"{k} {v / n * 1000:.0f} ms" for k, v in agreement.search_seconds.items()),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    print(report(measure(progress=print)))
