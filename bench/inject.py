"""Where the tokens of the context block go (issue 13). Prints figures, asserts nothing.

    .venv/bin/python bench/inject.py [--budget 1500 [800 300 ...]]

For sample requests on the bundled library — the README's demo and one natural request for each
group that can run on ``library/samples`` — the chosen group is run (mail goes to a temporary
outbox, files to a temporary folder) and the Markdown block is built without a budget and
within each ``--budget``. Each block is split into its sections and each section counted with
the tokens the injection itself budgets with (``count_tokens``, cl100k_base):

- group outputs: the items of the Results section that are outputs of the group;
- instructions: the ``## Instructions`` section;
- the rest: the header, step outputs and run status, ``## Also available``, the notes.

The split reads the rendered text (headings and list items, skipping fenced code), so it works
on any version of the renderer; the rest is the total minus the two sections, so the columns add
up to the block's exact count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SAMPLES = Path(__file__).resolve().parent.parent / "library" / "samples"


def _requests(scratch: Path) -> list[tuple[str, dict[str, Any]]]:
    """(request, context values): the demo first, then one request per group that runs on the
    samples, then a request no group serves."""
    out = scratch / "out"
    out.mkdir(exist_ok=True)
    return [
        ("summarize the quarterly report PDF and email the key numbers to my team",
         {"pdf_path": str(SAMPLES / "quarterly_report.pdf"), "team_email": "team@example.com",
          "report_name": "Q3 2026"}),
        ("make the weekly KPI report from kpi_daily.csv and email it to the team",
         {"csv_path": str(SAMPLES / "kpi_daily.csv"), "team_email": "team@example.com",
          "output_dir": str(out / "kpi")}),
        ("summarize the saved article.html and list its links",
         {"html_path": str(SAMPLES / "article.html"), "output_dir": str(out / "web")}),
        ("send the minutes and action items from this meeting transcript to everyone who "
         "attended", {"transcript_path": str(SAMPLES / "meeting_transcript.txt"),
                      "output_dir": str(out / "meeting")}),
        ("add invoice.pdf to the accounts payable ledger",
         {"pdf_path": str(SAMPLES / "invoice.pdf"), "ledger_path": str(out / "ledger.csv")}),
        ("clean up customers.csv, remove duplicates and tell me which rows are invalid",
         {"csv_path": str(SAMPLES / "customers_messy.csv"), "output_dir": str(out / "csv")}),
        ("reply to the support ticket in ticket.json",
         {"ticket_path": str(SAMPLES / "ticket_urgent.json"),
          "on_call_email": "oncall@example.com", "escalation_dir": str(out / "esc")}),
        ("根据我这周的工作日志生成周报，发给主管",
         {"log_path": str(SAMPLES / "work_log_zh.txt"), "manager_email": "boss@example.com",
          "output_dir": str(out / "zh")}),
        ("处理这封客户投诉，给客户回一封道歉邮件",
         {"complaint_path": str(SAMPLES / "complaint_zh.txt"),
          "escalation_dir": str(out / "esc-zh")}),
        ("translate this paragraph into German", {}),
    ]


@dataclass
class Split:
    total: int
    group_outputs: int
    instructions: int

    @property
    def rest(self) -> int:
        return self.total - self.group_outputs - self.instructions

    @property
    def share(self) -> float:
        return self.group_outputs / self.total if self.total else 0.0


def _cut(text: str, width: int) -> str:
    """``text`` cut and padded to ``width`` columns (CJK characters take two)."""
    out, used = "", 0
    for char in text:
        wide = 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if used + wide > width:
            break
        out, used = out + char, used + wide
    return out + " " * (width - used)


def split(text: str) -> Split:
    """Tokens of the block by section (see the module docstring)."""
    from skillgrove.runtime.inject import count_tokens

    group: list[str] = []
    instructions: list[str] = []
    section = "header"
    item = "other"
    fence = ""
    for line in text.splitlines():
        if fence:
            if line.strip() == fence:
                fence = ""
        elif line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        elif line.startswith("## Results (run"):
            section, item = "results", "other"
        elif line == "## Instructions":
            section = "instructions"
        elif line.startswith("## Also available") or line.startswith("_Left out"):
            section = "rest"
        elif section == "results" and (line.startswith("- ") or line.startswith("### ")):
            item = "group" if "(group output" in line.split(":", 1)[0] else "other"
        if section == "results" and item == "group":
            group.append(line)
        elif section == "instructions":
            instructions.append(line)
    return Split(count_tokens(text), count_tokens("\n".join(group)),
                 count_tokens("\n".join(instructions)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, nargs="+", default=[1500])
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    scratch = Path(tempfile.mkdtemp(prefix="skillgrove-bench-inject-"))
    os.environ["SKILLGROVE_OUTBOX"] = str(scratch / "outbox")

    from skillgrove.graph.retrieval import RequestContext
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.inject import build_injection
    from skillgrove.runtime.paths import bundled_library

    engine = Skillgrove([bundled_library()], index=scratch / "index")
    skills = engine.library.catalog.by_id()
    print(f"{'request':<44} {'group':<22} {'budget':>6} {'total':>6} {'group':>6} "
          f"{'instr':>6} {'rest':>6} {'share':>6}  level")
    budgets: list[int | None] = [None, *args.budget]
    totals = {budget: [0, 0] for budget in budgets}
    try:
        for request, values in _requests(scratch):
            context = RequestContext(values)
            toolbox = engine.search(request, context)
            run = None
            if toolbox.group is not None and toolbox.group.ready:
                group = engine.group(toolbox.group.id)
                declared = {spec.name for spec in group.inputs}
                run = engine.run(group.id, {k: v for k, v in values.items() if k in declared},
                                 {"values": values}, request=request)
            name = toolbox.group.id.removeprefix("group:") if toolbox.group else "(none)"
            if run is not None and run.status != "success":
                name += " (failed)"
            for budget in budgets:
                label = f"{_cut(request, 44)} {name[:22]:<22} {budget or '-':>6}"
                try:
                    block = build_injection(toolbox, skills, run, budget=budget)
                except Exception as exc:  # a budget the block cannot meet
                    print(f"{label}  {type(exc).__name__}: {str(exc)[:70]}")
                    continue
                parts = split(block.text)
                totals[budget][0] += parts.total
                totals[budget][1] += parts.group_outputs
                over = " OVER BUDGET" if budget is not None and parts.total > budget else ""
                print(f"{label} {parts.total:>6} {parts.group_outputs:>6} {parts.instructions:>6} "
                      f"{parts.rest:>6} {parts.share:>6.0%}  {block.level}{over}")
    finally:
        engine.close()
    for budget, (total, group_tokens) in totals.items():
        share = group_tokens / total if total else 0.0
        print(f"all requests, budget {budget or 'none'}: {total} tokens, {group_tokens} of "
              f"them group outputs ({share:.0%})")


if __name__ == "__main__":
    main()
