"""Learning from history: mined draft groups, co-use, quality statistics, and the bench harness."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrove.graph.learning import (
    HistoryError,
    HistoryRow,
    co_use_weights,
    draft_to_yaml,
    mine_groups,
    quality_from_runs,
    read_history,
)
from skillgrove.groups import load_group_text
from skillgrove.runtime.cli import main
from tests.conftest import FIXTURES

BENCH = FIXTURES / "bench"


def rows() -> list[HistoryRow]:
    return [
        HistoryRow("1", "summarize the pdf and mail it", ("pdf", "sum", "mail"),
                   (("pdf", "sum"), ("sum", "mail"))),
        HistoryRow("2", "mail a pdf summary", ("pdf", "sum", "mail"),
                   (("pdf", "sum"), ("sum", "mail"))),
        HistoryRow("3", "pdf summary to the board", ("pdf", "sum", "sum", "mail"),
                   (("pdf", "sum"), ("sum", "mail"), ("pdf", "mail"))),
        HistoryRow("4", "chart the csv", ("csv", "chart")),
        HistoryRow("5", "plot these numbers", ("chart", "csv")),
        HistoryRow("6", "one-off translation", ("translate",)),
        HistoryRow("7", "failed attempt", ("csv", "chart"), (), succeeded=False),
    ]


def test_mining_finds_recurring_sets_with_order_and_edges() -> None:
    drafts = mine_groups(rows(), min_support=2)
    assert [(d.members, d.support) for d in drafts] == [
        (("pdf", "sum", "mail"), 3), (("chart", "csv"), 2)]  # a tie in call order: by id
    pdf = drafts[0]
    assert pdf.edges == (("pdf", "sum"), ("sum", "mail"))  # ("pdf","mail") is in 1 of 3 rows
    assert pdf.examples == ("summarize the pdf and mail it", "mail a pdf summary",
                            "pdf summary to the board")
    assert drafts[1].edges == ()  # unordered set: no edges invented
    assert drafts[1].id == "chart-csv"
    assert "Learned from 3 runs that used pdf, sum and mail together" in pdf.description


def test_drafts_are_ordinary_group_files() -> None:
    draft = mine_groups(rows())[0]
    text = draft_to_yaml(draft, names={"pdf": "pdf-to-text", "sum": "summarize-text",
                                       "mail": "send-email"})
    assert text.startswith("# Draft group mined from 3 runs")
    data = yaml.safe_load(text)
    assert data["steps"] == [
        {"id": "pdf_to_text", "skill": "pdf-to-text"},
        {"id": "summarize_text", "skill": "summarize-text", "needs": ["pdf_to_text"]},
        {"id": "send_email", "skill": "send-email", "needs": ["summarize_text"]}]
    load = load_group_text(text, Path("draft.yaml"))
    assert load.ok, [d.format() for d in load.diagnostics]


def test_co_use_counts_pairs_per_run() -> None:
    weights = co_use_weights(rows())
    assert weights[("mail", "pdf")] == 3.0
    assert weights[("chart", "csv")] == 3.0  # the failed run still shows co-use
    assert ("translate", "translate") not in weights


def test_quality_statistics_from_run_records() -> None:
    runs = [
        {"group": "g", "status": "failure", "steps": [
            {"kind": "skill", "target": "a", "status": "failure"},
            {"kind": "skill", "target": "b", "status": "cancelled"}]},
        {"group": "g", "status": "failure", "fallback": True, "steps": [
            {"kind": "skill", "target": "a", "status": "failure"}]},
        {"group": "g", "status": "success", "steps": [
            {"kind": "skill", "target": "a", "status": "success"},
            {"kind": "skill", "target": "c", "status": "skipped"}]},
    ]
    stats = quality_from_runs(runs)
    assert stats["group:g"].to_dict() == {"selected": 3, "succeeded": 1, "failed": 2,
                                          "fallbacks": 1}
    assert stats["a"].to_dict() == {"selected": 3, "succeeded": 1, "failed": 2, "fallbacks": 0}
    assert stats["b"].to_dict() == {"selected": 1, "succeeded": 0, "failed": 1, "fallbacks": 0}
    assert "c" not in stats


@pytest.mark.parametrize(("file", "line", "content", "message"), [
    ("history.jsonl", 3, "{not json", "history.jsonl:3:2: not valid JSON"),
    ("history.jsonl", 2, '{"id": "x", "request": "r"}', "history.jsonl:2: missing key 'skills'"),
    ("queries.jsonl", 1, '{"id": "q", "request": 5, "gold_skills": []}',
     "queries.jsonl:1: 'request' must be str, not int"),
    ("skills.jsonl", 4, "[1, 2]", "skills.jsonl:4: each line must be a JSON object"),
])
def test_malformed_benchmark_line_names_file_and_line(tmp_path: Path, file: str, line: int,
                                                      content: str, message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "bench"
    shutil.copytree(BENCH, folder)
    lines = (folder / file).read_text().splitlines()
    lines[line - 1] = content
    (folder / file).write_text("\n".join(lines) + "\n")
    code = main(["bench", str(folder), "--mode", "flat", "--json"], StringIO())
    assert code == 1
    err = capsys.readouterr().err
    assert f"{folder / file}:" in err and message in err
    assert "Traceback" not in err


def test_read_history_reports_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"id": 1, "request": "a", "skills": ["x"]}\n\n{"id": 2}\n')
    with pytest.raises(HistoryError, match=r"h.jsonl:3: missing key 'request'"):
        read_history(bad)


@pytest.mark.parametrize("mode", ["groups", "flat"])
def test_bench_harness_end_to_end(mode: str) -> None:
    out = StringIO()
    assert main(["bench", str(BENCH), "--mode", mode, "--json"], out) == 0
    result = json.loads(out.getvalue())
    assert (result["dataset"], result["mode"], result["store"], result["queries"]) == (
        "bench", mode, "embedded", 3)
    metrics = result["metrics"]
    for key in ("recall@3", "recall@5", "recall@10", "completeness@3", "completeness@5",
                "completeness@10", "ndcg@5", "set_f1", "exact", "group_rate",
                "latency_ms_p50", "latency_ms_p95"):
        assert key in metrics, key
    if mode == "groups":
        # pdf-sum-mail and csv-chart recur; a history this short (under 300 rows,
        # ``learning.SHORT_HISTORY``) also drafts the two sets that ran once.
        assert result["details"]["groups"] == 4
        assert metrics["group_rate"] > 0
        assert metrics["completeness@5"] >= 66.6
        assert "edge_f1" in metrics
    else:
        assert metrics["group_rate"] == 0.0


def test_groups_suggest_writes_reviewable_drafts(tmp_path: Path) -> None:
    out = StringIO()
    code = main(["groups", "suggest", "--history", str(BENCH / "history.jsonl"), "--out",
                 str(tmp_path / "drafts")], out)
    assert code == 0
    files = sorted(p.name for p in (tmp_path / "drafts").iterdir())
    # A history this short drafts the sets that ran once too; with --min-support 2, only the
    # two that recur.
    assert files == ["s1-s2-s3.yaml", "s4-s5.yaml", "s7-s6.yaml", "s7.yaml"]
    assert "wrote" in out.getvalue() and "review them" in out.getvalue()
    assert main(["groups", "suggest", "--history", str(BENCH / "history.jsonl"), "--out",
                 str(tmp_path / "recurring"), "--min-support", "2"], StringIO()) == 0
    assert sorted(p.name for p in (tmp_path / "recurring").iterdir()) == [
        "s1-s2-s3.yaml", "s4-s5.yaml"]


def test_calibration_holds_out_rows_the_calibration_library_never_saw(tmp_path: Path,
                                                                     encoder) -> None:  # type: ignore[no-untyped-def]
    """The held-out rows must be unseen: not an example, and not inside any group's text (an
    earlier version hid only the row's own example node, and every setting scored 97%)."""
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.graph.model import NodeKind
    from skillgrove.runtime.bench import _build, read_dataset, split_history

    dataset = read_dataset(BENCH)
    history = [HistoryRow(str(i), f"{verb} the quarterly report number {i}.",
                          ("s1", "s2", "s3") if i % 2 else ("s4", "s5"))
               for i, verb in enumerate(["summarize", "chart"] * 30)]
    fit_rows, held_out = split_history(history)
    assert len(held_out) == 6 and len(fit_rows) == 54
    assert {r.id for r in fit_rows}.isdisjoint(r.id for r in held_out)
    assert split_history(history) == (fit_rows, held_out)  # seeded: the same split every run
    store = _build(dataset, tmp_path / "calibration", "groups", fit_rows, encoder,
                   lambda folder: EmbeddedStore(folder / "graph.sqlite"))[0]
    texts = [n.text for n in store.nodes(NodeKind.GROUP)] + [
        n.text for n in store.nodes(NodeKind.EXAMPLE)]
    assert len(store.nodes(NodeKind.GROUP)) == 2
    for row in held_out:
        assert not any(row.request in text for text in texts), row.request
    store.close()


def test_the_fast_route_is_cut_where_it_loses_nothing() -> None:
    from skillgrove.runtime.bench import lossless_cut

    # (lexical confidence, F1 on the fast route, F1 on the full path)
    sure = [(0.99, 1.0, 1.0)] * 30
    unsure = [(0.6, 0.0, 1.0)] * 10
    assert lossless_cut(sure + unsure) == (0.99, 0.75)  # stops before the rows it would lose
    # a loss early on may be paid back by later gains: the mean over the rows taken decides
    mixed = [(0.99, 0.0, 1.0)] + [(0.9, 1.0, 0.5)] * 25
    assert lossless_cut(mixed) == (0.9, 1.0)
    assert lossless_cut(sure[:10]) == (None, 0.0)  # too few rows to trust
    assert lossless_cut([(0.99, 0.5, 1.0)] * 30) == (None, 0.0)  # always worse: never
    assert lossless_cut([(0.4, 1.0, 1.0)] * 30) == (None, 0.0)  # the words alone are unsure


def test_runs_calling_the_same_skills_in_different_orders_mine_a_valid_dag(
        tmp_path: Path) -> None:
    """Half the runs say a -> b -> c, the other half c -> b and b -> a: the draft keeps the
    edges seen most often that close no cycle, and the written group validates."""
    from skillgrove.graph.learning import draft_to_yaml, mine_groups
    from skillgrove.groups.library import load_library
    from tests.helpers import write_skill

    rows = [HistoryRow("1", "one way", ("a", "b", "c"), (("a", "b"), ("b", "c"))),
            HistoryRow("2", "one way again", ("a", "b", "c"), (("a", "b"), ("b", "c"))),
            HistoryRow("3", "the other way", ("c", "b", "a"), (("c", "b"), ("b", "a"))),
            HistoryRow("4", "the other way again", ("c", "b", "a"), (("c", "b"), ("b", "a"))),
            HistoryRow("5", "mostly one way", ("a", "b", "c"), (("a", "b"), ("c", "b")))]
    (draft,) = mine_groups(rows)
    assert draft.edges == (("a", "b"), ("b", "c")) or draft.edges == (("a", "b"), ("c", "b"))
    assert len(draft.edges) == 2
    for name in "abc":
        write_skill(tmp_path / "skills", name, f"---\nname: {name}\ndescription: {name}\n---\n")
    (tmp_path / "groups").mkdir()
    (tmp_path / "groups" / f"{draft.id}.yaml").write_text(draft_to_yaml(draft))
    library = load_library([tmp_path])
    assert not library.errors, [d.format() for d in library.errors]
    assert draft.id in library.groups


def test_duplicate_skill_names_with_co_use_history_search_without_error(
        tmp_path: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    """Two roots hold a skill of the same name; history co-uses the shadowed one's id, which is
    indexed too (under its own id)."""
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.graph.indexer import index_library
    from skillgrove.graph.retrieval import Retriever
    from skillgrove.groups.library import load_library
    from skillgrove.skills.loader import LoadOptions
    from tests.helpers import write_skill

    for root in ("first", "second"):
        for name in ("format-date", "parse-date"):
            path = write_skill(tmp_path / root / "skills", name,
                               f"---\nname: {name}\ndescription: {name.replace('-', ' ')} "
                               f"({root} copy)\n---\n")
            (path.parent / ".skill_id").write_text(f"{root}-{name}\n")
    library = load_library([tmp_path / "first", tmp_path / "second"], LoadOptions())
    assert {s.id for s in library.skills.values()} == {"first-format-date", "first-parse-date"}
    store = EmbeddedStore(None)
    index_library(library, store, encoder,
                  co_use={("second-format-date", "first-parse-date"): 3.0,
                          ("first-format-date", "first-parse-date"): 2.0})
    ids = {n.id for n in store.nodes()}
    assert {"second-format-date", "second-parse-date"} <= ids
    assert all(e.src in ids and e.dst in ids for e in store.edges())
    toolbox = Retriever(store, encoder).search("format a date")
    assert toolbox.skills and toolbox.skills[0].id == "first-format-date"
    ranked = [s.id for s in toolbox.skills]
    suggested = [s.id for s in toolbox.suggestions]
    # The co-used companion is offered, and a suggestion never repeats the selection.
    assert "first-parse-date" in ranked + suggested
    assert not set(suggested) & set(toolbox.selected)


def test_a_draft_binds_the_inputs_its_skills_declare(tmp_path: Path) -> None:
    """A required input is bound to the same-named output of a step it needs, else to a
    group input of that name; the draft passes validation."""
    from skillgrove.graph.learning import draft_to_yaml, mine_groups
    from skillgrove.groups.library import load_library
    from tests.helpers import write_skill

    contracts = {
        "fetch": ({"type": "object", "properties": {"url": {"type": "string"}},
                   "required": ["url"]},
                  {"type": "object", "properties": {"html": {"type": "string"}}}),
        "clean": ({"type": "object", "properties": {"html": {"type": "string"},
                                                    "keep_links": {"type": "boolean"}},
                   "required": ["html", "keep_links"]}, None),
    }
    rows = [HistoryRow(str(n), "fetch and clean a page", ("fetch", "clean"),
                       (("fetch", "clean"),)) for n in range(3)]
    (draft,) = mine_groups(rows)
    text = draft_to_yaml(draft, contracts=contracts)
    assert "html: ${{ steps.fetch.outputs.html }}" in text
    assert "url: ${{ inputs.url }}" in text and "keep_links: ${{ inputs.keep_links }}" in text
    for name, (inputs, outputs) in contracts.items():
        lines = [f"name: {name}", f"description: {name} a page",
                 f"inputs: {json.dumps(inputs)}"]
        if outputs:
            lines.append(f"outputs: {json.dumps(outputs)}")
        write_skill(tmp_path / "skills", name, "---\n" + "\n".join(lines) + "\n---\n")
    (tmp_path / "groups").mkdir()
    (tmp_path / "groups" / f"{draft.id}.yaml").write_text(text)
    library = load_library([tmp_path])
    assert not library.errors, [d.format() for d in library.errors]
    group = library.groups[draft.id]
    assert {spec.name: spec.type for spec in group.inputs} == {"url": "string",
                                                                "keep_links": "boolean"}


ZIP = {"type": "object", "properties": {"files": {"type": "array", "format": "path",
                                                   "items": {"type": "string"}}},
       "required": ["files"]}
ZIP_OUT = {"type": "object", "properties": {"path": {"type": "string"},
                                           "names": {"type": "array",
                                                     "items": {"type": "string"}}}}
MAIL = {"type": "object", "properties": {
    "to": {"type": ["string", "array"]}, "subject": {"type": "string"},
    "body": {"type": "string"},
    "attachments": {"type": "array", "format": "path", "items": {"type": "string"},
                    "default": []},
    "outbox_dir": {"type": "string", "format": "path", "default": ""}},
    "required": ["to", "subject", "body"]}
SUMMARIZE = {"type": "object", "properties": {"text": {"type": "string"}},
             "required": ["text"]}
READ_OUT = {"type": "object", "properties": {"content": {"type": "string"}}}


# (members, contracts, lines the draft holds, lines it must not hold)
FILE_BINDINGS = [
    # the archive is the attachment; subject and body are asked for, not the archive's path
    (("zip", "mail"), {"zip": (ZIP, ZIP_OUT), "mail": (MAIL, None)},
     ["- ${{ steps.zip.outputs.path }}", "subject: ${{ inputs.subject }}",
      "body: ${{ inputs.body }}", "to: ${{ inputs.to }}"],
     ["subject: ${{ steps.zip", "body: ${{ steps.zip", "to: ${{ steps.zip",
      "outbox_dir"]),
    # the one text an earlier step makes still feeds the text a later one needs
    (("read", "summarize"), {"read": (None, READ_OUT), "summarize": (SUMMARIZE, None)},
     ["text: ${{ steps.read.outputs.content }}"], []),
]


@pytest.mark.parametrize(("members", "contracts", "present", "absent"), FILE_BINDINGS)
def test_a_file_a_step_makes_goes_where_the_next_takes_files(
        members: tuple[str, str], contracts: dict[str, Any], present: list[str],
        absent: list[str]) -> None:
    from skillgrove.graph.learning import DraftGroup, draft_to_yaml

    draft = DraftGroup("composed", members, (members,), ("do it",), 0, "do it")
    text = draft_to_yaml(draft, contracts=contracts)
    for line in present:
        assert line in text, text
    for line in absent:
        assert line not in text, text


def test_hide_sets_removes_a_seeded_share_of_recurring_sets() -> None:
    from skillgrove.runtime.bench import Dataset, Query, hide_skill_sets

    sets = ("ab", "cd", "ef", "gh", "ij")
    history = (*(HistoryRow(f"{s}{n}", f"task {s}", tuple(s)) for s in sets for n in range(2)),
               HistoryRow("once", "rare", ("x", "y")))
    queries = tuple(Query(s, f"do {s}", tuple(s), ()) for s in ("ab", "cd", "ef", "gh", "ij"))
    dataset = Dataset("d", (), history, queries)
    hidden_data, hidden = hide_skill_sets(dataset, 0.4)
    assert len(hidden) == 2 and frozenset("xy") not in hidden
    assert not any(frozenset(row.skills) in hidden for row in hidden_data.history)
    assert {frozenset(q.gold) for q in hidden_data.queries} == hidden
    assert hide_skill_sets(dataset, 0.4)[1] == hidden  # seeded


@pytest.mark.parametrize(("rows", "support"), [(0, 1), (299, 1), (300, 2), (16_893, 2)])
def test_a_short_history_drafts_sets_seen_once(rows: int, support: int) -> None:
    from skillgrove.graph.learning import draft_support

    assert draft_support(rows) == support


def test_a_short_history_holds_out_enough_rows_to_calibrate() -> None:
    from skillgrove.runtime.bench import MIN_CALIBRATION_ROWS, split_history

    def held(count: int) -> int:
        rows = [HistoryRow(str(i), "x", ("a",)) for i in range(count)]
        return len(split_history(rows)[1])

    # a tenth; 30 where a tenth is fewer and 30 is at most three tenths; at most 500
    assert [held(n) for n in (50, 99, 100, 250, 300, 1046, 16_893)] == [
        5, 9, MIN_CALIBRATION_ROWS, MIN_CALIBRATION_ROWS, 30, 104, 500]


@pytest.mark.parametrize(("values", "reference", "expected"), [
    ([1.0, 1.0, 0.0], [0.0, 0.0, 0.0], True),     # wins two rows, loses none
    ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], False),    # wins one, loses one
    ([0.5] * 200, [0.5] * 199 + [0.0], False),   # one row of 200: less than a point of mean F1
    ([0.6] * 50, [0.5] * 50, True),
])
def test_a_fitted_choice_must_beat_the_default_by_more_than_noise(
        values: list[float], reference: list[float], expected: bool) -> None:
    from skillgrove.runtime.bench import _beats

    assert _beats(values, reference) is expected


def test_a_set_whose_runs_record_no_edges_takes_its_declared_prerequisites() -> None:
    # FORMAT.md lets a history give a set unordered; the skills still say what they need.
    unordered = [HistoryRow(str(n), "log in and book the flight", ("book", "login", "search"))
                 for n in range(2)]
    needs = {"book": ["login", "search"], "search": ["login"], "login": ["elsewhere"]}
    [draft] = mine_groups(unordered, prerequisites=needs)
    assert set(draft.edges) == {("login", "book"), ("search", "book"), ("login", "search")}
    assert draft.members.index("login") < draft.members.index("search") < \
        draft.members.index("book")
    # Rows that record edges keep theirs: what ran says more than what was declared.
    ordered = [HistoryRow(str(n), "book", ("login", "book", "search"), (("login", "book"),))
               for n in range(2)]
    [draft] = mine_groups(ordered, prerequisites=needs)
    assert draft.edges == (("login", "book"),)
