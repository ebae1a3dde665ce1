"""Indexing and searching the 1,321 real SKILL.md files, English and Chinese requests."""

from __future__ import annotations

import pytest

from skillgrove.graph import EmbeddedStore, Retriever, index_library
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.groups import load_library
from tests.conftest import CORPUS

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpora is not here")]


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory,
                 encoder: CachedEncoder) -> EmbeddedStore:
    store = EmbeddedStore(tmp_path_factory.mktemp("corpus") / "graph.sqlite")
    result = index_library(load_library([CORPUS]), store, encoder)
    assert result.skills == 1313  # every loaded skill, the 14 shadowed duplicates too
    return store


@pytest.mark.parametrize(("request_text", "expected"), [
    ("post an article to my WeChat official account", "baoyu-post-to-wechat"),
    ("发布文章到微信公众号", "baoyu-post-to-wechat"),
    ("把这篇文章做成知识漫画", "baoyu-comic"),
    ("fill in a PDF form", None),
])
def test_search_the_real_corpus(corpus_store: EmbeddedStore, encoder: CachedEncoder,
                                request_text: str, expected: str | None) -> None:
    toolbox = Retriever(corpus_store, encoder).search(request_text, k=5)
    names = [s.name for s in toolbox.skills]
    assert toolbox.group is None  # the corpus has no groups
    assert len(names) == 5
    if expected:
        assert expected in names, names
    else:
        assert any("pdf" in n for n in names), names


def test_a_second_store_on_the_same_file_needs_no_rebuild(corpus_store: EmbeddedStore,
                                                          encoder: CachedEncoder) -> None:
    assert corpus_store.path is not None
    reopened = EmbeddedStore(corpus_store.path)
    toolbox = Retriever(reopened, encoder).search("发布文章到微信公众号", k=5)
    assert "baoyu-post-to-wechat" in [s.name for s in toolbox.skills]
    reopened.close()


def test_chinese_tokens_hit_chinese_text(corpus_store: EmbeddedStore) -> None:
    from skillgrove.graph.model import NodeKind

    hits = corpus_store.text_search(NodeKind.SKILL, "微信公众号", 5)
    names = [corpus_store.node(i).name for i, _ in hits]  # type: ignore[union-attr]
    assert "baoyu-post-to-wechat" in names




CHINESE_FOR_ENGLISH = [
    # Chinese requests for skills described only in English, written before they were tried;
    # the four the gloss does not bring into the top 3 are listed in the README.
    ("帮我开发一个MCP服务器", "mcp-builder"),
    ("在Xero里创建一张发票", "Xero Automation"),
    # Asked in English ("extract the tables and text from this PDF file"), the corpus ranks
    # three text-extraction skills first and `pdf` fourth; the gloss now reads the same.
    ("从PDF文件里提取表格和文字", ("pdf", "reliable-pdf-extraction", "pdf-text-extraction",
                            "local-pdf-extraction")),
    ("分析这次会议的记录，总结大家的发言习惯", "meeting-insights-analyzer"),
    ("编辑这个Word文档并保留修订痕迹", "docx"),
    ("帮我创建一个新的技能", "skill-creator"),
]


def test_chinese_requests_find_english_skills_through_the_gloss(
        corpus_store: EmbeddedStore, encoder: CachedEncoder) -> None:
    from skillgrove.graph.stages import DEFAULT_SETTINGS

    glossed = Retriever(corpus_store, encoder)
    plain = Retriever(corpus_store, encoder, DEFAULT_SETTINGS.but(skills={"gloss": False}))
    found = {request: [s.name for s in glossed.search(request, k=5).skills[:3]]
             for request, _ in CHINESE_FOR_ENGLISH}
    def accepted(name: str | tuple[str, ...]) -> tuple[str, ...]:
        return (name,) if isinstance(name, str) else name

    assert all(set(accepted(name)) & set(found[request])
               for request, name in CHINESE_FOR_ENGLISH), found
    without = sum(1 for request, name in CHINESE_FOR_ENGLISH
                  if set(accepted(name)) & {s.name for s in plain.search(request, k=5).skills[:3]})
    # Latin words (MCP, Xero, PDF, Word) find four as written; the gloss finds the rest.
    assert without <= len(CHINESE_FOR_ENGLISH) - 2, "the gloss should find what words cannot"
    top = glossed.search("分析这次会议的记录，总结大家的发言习惯", k=5).skills[0]
    assert "meeting" in (top.explanation.gloss or "")  # the explanation shows the translation


# Off the corpus's topics: the best skill comes near the embedding bar (cosine 0.20-0.25) while
# sharing no word with the request, or shares a word and nothing else ("team").
NOTHING_FITS = [
    "how tall is mount everest",
    "what is the capital of australia",
    "order pizza for the team",
    "tell me a joke about penguins",
    "remind me to water the plants",
]
# On topic, with low scores of their own (0.18-0.29): each still gets a skill.
SOMETHING_FITS = [
    "analyze this csv and chart the monthly sales",
    "translate this document into spanish",
    "make a pitch deck from these notes",
]


def test_a_request_off_every_skill_selects_nothing(corpus_store: EmbeddedStore,
                                                   encoder: CachedEncoder) -> None:
    retriever = Retriever(corpus_store, encoder)
    chosen = {request: retriever.search(request, k=5).selected for request in NOTHING_FITS}
    assert not any(chosen.values()), chosen
    kept = {request: retriever.search(request, k=5).selected for request in SOMETHING_FITS}
    assert all(kept.values()), kept


@pytest.mark.parametrize(("request_text", "part", "expected", "not_expected"), [
    # "revenue" matches a fiscal data set by its words; the plot part ranks a plotting
    # library first, and that answers it.
    ("analyze this csv and plot monthly revenue trends", 2, "matplotlib", "usfiscaldata"),
])
def test_each_part_of_a_list_gets_the_skill_it_ranks_first(
        corpus_store: EmbeddedStore, encoder: CachedEncoder, request_text: str, part: int,
        expected: str, not_expected: str) -> None:
    toolbox = Retriever(corpus_store, encoder).search(request_text, k=10)
    by_id = {s.id: s for s in toolbox.skills}
    chosen = {by_id[sid].name: by_id[sid].explanation.task for sid in toolbox.selected}
    assert chosen.get(expected) == part and not_expected not in chosen, chosen
