"""Tokens and BM25: CJK without whole-run tokens, plurals and case, rank-bm25's exact scores."""

from __future__ import annotations

import pytest
from rank_bm25 import BM25Okapi

from skillgrove.graph.bm25 import BM25
from skillgrove.graph.text import tokenize
from skillgrove.skills import discover_skills
from tests.conftest import CORPUS


def test_english_case_and_plurals() -> None:
    assert tokenize("Emails") == tokenize("email") == ["email"]
    assert tokenize("Summaries of the REPORTS") == ["summary", "report"]
    assert tokenize("invoices boxes classes") == ["invoice", "box", "class"]


def test_cjk_runs_become_bigrams() -> None:
    tokens = tokenize("生成周报")
    assert "生成周报" not in tokens
    assert tokens == ["生成", "成周", "周报"]
    assert set(tokenize("周报生成")) & set(tokens) == {"周报", "生成"}
    assert tokenize("用Python处理CSV") == ["python", "处理", "csv"]  # 用 alone is a function word
    assert tokenize("查 天气") == ["查", "天气"]


def test_japanese_and_korean_are_split_too() -> None:
    assert "レポート" not in tokenize("レポートを作成")
    assert "보고서" not in tokenize("보고서 작성")


def _corpus_docs() -> list[list[str]]:
    if CORPUS.is_dir():
        catalog = discover_skills([CORPUS / "anthropics__skills", CORPUS / "openai__skills"])
        return [tokenize(s.name + " " + s.description) for s in catalog.skills]
    return [tokenize(t) for t in ["send an email", "summarize a pdf report", "email the team"]]


@pytest.mark.parametrize("query", ["create a pdf report", "send email to slack channel",
                                   "the the the", "spreadsheet formulas excel", "nothing-matches"])
def test_scores_equal_rank_bm25(query: str) -> None:
    docs = _corpus_docs()
    ours = BM25(docs).scores(tokenize(query))
    reference = BM25Okapi(docs).get_scores(tokenize(query))
    assert ours == pytest.approx(reference, rel=1e-9, abs=1e-12)


def test_top_and_max_score() -> None:
    docs = [tokenize(t) for t in ["send an email", "summarize a pdf report", "email the team",
                                  "draw a chart", "translate text"]]
    index = BM25(docs)
    top = index.top(tokenize("email"), 3)
    assert [i for i, _ in top] == [0, 2]
    assert all(0 < score <= index.max_score(tokenize("email")) for _, score in top)


@pytest.mark.parametrize("name", ["get-current-time", "GET_CURRENT_TIME", "getCurrentTime",
                                  "Get Current Time", "get.current/time"])
def test_a_name_reads_as_its_words_however_it_is_joined(name: str) -> None:
    # A data set of API operations names them as its source does (``getCurrentTime``); a
    # request says "the current time". Read as one token, the name matched nothing.
    from skillgrove.graph.documents import words

    assert tokenize(words(name)) == ["get", "current", "time"]
    assert words("getHTTPStatus_code") == "get HTTP Status code"
