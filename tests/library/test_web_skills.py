"""Web page digest: HTML to text, links, keywords, templates, text statistics."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.library.conftest import call_skill, run_skill


def test_html_to_text_keeps_the_article_and_drops_boilerplate(samples: Path) -> None:
    result = run_skill("html-to-text", path=str(samples / "article.html"))
    assert result["title"].startswith("Five lessons from moving our warehouse")
    assert result["author"] == "Omar Haddad"
    assert result["language"] == "en"
    assert result["description"].startswith("What we learned when our fulfilment team")
    assert [h["level"] for h in result["headings"]] == [1, 2, 2, 2, 2, 2]
    text = result["text"]
    assert "before 2 pm would leave our warehouse" in text  # &nbsp; decoded
    for noise in ("analytics.push", "font-family", "Free delivery", "Follow us", "Privacy"):
        assert noise not in text
    assert "\n\n2. Staff for the afternoon peak\n\n" in text
    assert 250 < result["word_count"] < 320


def test_html_to_text_can_keep_boilerplate(samples: Path) -> None:
    result = run_skill("html-to-text", path=str(samples / "article.html"), keep_boilerplate=True)
    assert "Free delivery on orders over $60" in result["text"]


def test_extract_links_resolves_and_classifies(samples: Path) -> None:
    result = run_skill("extract-links", path=str(samples / "article.html"),
                       base_url="https://www.larkspur.example/journal/same-day")
    urls = [link["url"] for link in result["links"]]
    assert "https://www.larkspur.example/journal/packaging-guide" in urls
    assert result["domains"] == ["carriers.example", "social.example"]
    assert (result["internal_count"], result["external_count"]) == (5, 2)
    assert result["emails"] == ["journal@larkspur.example"]
    assert not any(u.startswith("mailto:") for u in urls)


def test_extract_keywords_english_and_chinese(samples: Path) -> None:
    article = run_skill("html-to-text", path=str(samples / "article.html"))["text"]
    english = run_skill("extract-keywords", text=article, limit=8)
    assert "same-day dispatch" in english["terms"] and "warehouse" in english["terms"]
    assert not {"the", "and", "our"} & set(english["terms"])
    log = (samples / "work_log_zh.txt").read_text(encoding="utf-8")
    chinese = run_skill("extract-keywords", text=log, limit=10)
    assert {"客户门户", "数据平台", "销售报表"} <= set(chinese["terms"])
    assert "户门" not in chinese["terms"], "no pairs spanning two words"


def test_render_template_fills_values_lists_and_writes_a_file(tmp_path: Path) -> None:
    result = run_skill("render-template",
                       template="# $title\n\nBy ${page.author} - $$5 off\n\n$items\n",
                       values={"title": "Digest", "page": {"author": "Omar"},
                               "items": ["one", "two"]},
                       output_dir=str(tmp_path), filename="digest.md")
    assert result["text"] == "# Digest\n\nBy Omar - $5 off\n\n- one\n- two\n"
    assert Path(result["path"]).read_text(encoding="utf-8") == result["text"]
    assert result["placeholders"] == ["title", "page.author", "items"]


def test_render_template_strict_names_the_missing_placeholder() -> None:
    with pytest.raises(ValueError, match=r"^values: no value for \$summary; given: title$"):
        call_skill("render-template", template="$title $summary", values={"title": "x"})
    loose = run_skill("render-template", template="$title $summary", values={"title": "x"},
                      strict=False)
    assert loose["text"] == "x $summary"


def test_text_statistics_english_and_chinese(samples: Path) -> None:
    english = run_skill("text-statistics", text="One two three. Four five!\n\nSix seven eight?")
    assert (english["words"], english["sentences"], english["paragraphs"]) == (8, 3, 2)
    assert english["script"] == "latin"
    assert english["average_sentence_words"] == 2.7
    complaint = (samples / "complaint_zh.txt").read_text(encoding="utf-8")
    chinese = run_skill("text-statistics", text=complaint.split("\n\n", 1)[1])
    assert chinese["script"] == "cjk"
    assert chinese["cjk_characters"] > 150
    assert chinese["reading_minutes"] == pytest.approx(chinese["cjk_characters"] / 300
                                                       + (chinese["words"]
                                                          - chinese["cjk_characters"]) / 230,
                                                       abs=0.05)
