"""A history too short to hold rows out (30 to 99 rows) still fits whether a group needs one of
its steps among the request's best skills (``groups.support_depth``), by answering each row
from a library learned from the others (``calibrate_support_folds``)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.stages import DEFAULT_SETTINGS
from skillgrove.runtime import bench

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


def few(name: str, skills: int, rows: int) -> bench.Dataset:
    """The data set cut to its ``skills`` skills most used in history and ``rows`` of the
    history rows that use only them (seeded): a small library with a short run log."""
    folder = BENCHMARKS / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    dataset = bench.read_dataset(folder)
    used = Counter(s for r in dataset.history for s in set(r.skills))
    keep = {s for s, _ in used.most_common(skills)}
    history = [r for r in dataset.history if set(r.skills) <= keep]
    random.Random(0).shuffle(history)
    return replace(dataset, skills=tuple(s for s in dataset.skills if str(s["id"]) in keep),
                   history=tuple(history[:rows]), queries=())


def fit(dataset: bench.Dataset, tmp_path: Path, encoder: object) -> dict[str, object]:
    return bench.fit_on_dataset(dataset, tmp_path, encoder,  # type: ignore[arg-type]
                                lambda folder: EmbeddedStore(folder / "graph.sqlite"))[1]


@pytest.mark.slow
def test_requests_worded_unlike_their_skills_turn_the_support_rule_off(
        tmp_path: Path, encoder: object) -> None:
    """ToolLens's requests repeat earlier ones in words their skills do not share: the rule
    turns the right group away (85.8 set F1 on its queries with it, 92.8 without)."""
    details = fit(few("toollens", 40, 50), tmp_path, encoder)
    assert details["support_folds"] == bench.FOLDS and details["support_depth"] is None
    scores = details["support_set_f1"]
    assert isinstance(scores, dict) and scores["None"] >= scores["5"] + 1.0


def novel(name: str, rows: int, others: int) -> bench.Dataset:
    """``rows`` history rows drawn at random (seeded), most of them tasks no other row asks
    for, with their skills and ``others`` more: a library whose next requests are new."""
    folder = BENCHMARKS / name
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing")
    dataset = bench.read_dataset(folder)
    history = list(dataset.history)
    random.Random(0).shuffle(history)
    history = history[:rows]
    used = {s for r in history for s in r.skills}
    rest = [str(s["id"]) for s in dataset.skills if str(s["id"]) not in used]
    random.Random(1).shuffle(rest)
    keep = used | set(rest[:others])
    return replace(dataset, skills=tuple(s for s in dataset.skills if str(s["id"]) in keep),
                   history=tuple(history), queries=())


@pytest.mark.slow
def test_requests_for_new_tasks_keep_the_support_rule(tmp_path: Path, encoder: object) -> None:
    dataset = novel("toollinkos", 50, 80)
    assert len({frozenset(r.skills) for r in dataset.history}) > 40
    details = fit(dataset, tmp_path, encoder)
    assert details["support_depth"] == DEFAULT_SETTINGS.groups.support_depth  # type: ignore[union-attr]


def test_too_short_a_history_fits_nothing_by_folds() -> None:
    def build(*_: object) -> EmbeddedStore:
        raise AssertionError("no library is built for fewer than 30 rows")

    rows = [bench.HistoryRow(str(i), "a request", ("s1",)) for i in range(29)]
    assert bench.calibrate_support_folds(build, rows, object(), DEFAULT_SETTINGS) == (  # type: ignore[arg-type]
        DEFAULT_SETTINGS, {})
