"""English glosses of Chinese text from CC-CEDICT lines (``graph/glossary.py``)."""

from __future__ import annotations

from skillgrove.graph.glossary import english_gloss, glossary, parse

# Lines in CC-CEDICT's format, written for this test.
LINES = [
    "# a comment line",
    "上傳 上传 [shang4 chuan2] /to upload/to transfer (a file) up/",
    "文件 文件 [wen2 jian4] /document/file/CL:份[fen4]/",
    "雲端 云端 [yun2 duan1] /high in the clouds/(computing) the cloud/",
    "長江 长江 [Chang2 jiang1] /Yangtze River/",
    "長 长 [Chang2] /surname Chang/",
    "長 长 [chang2] /long/length/",
    "騰訊 腾讯 [Teng2 xun4] /Tencent, Chinese internet company/",
    "微信 微信 [Wei1 xin4] /WeChat (messaging service of 騰訊|腾讯[Teng2 xun4])/",
    "先頭 先头 [xian1 tou2] /ahead/in advance/",
    "先 先 [xian1] /early/prior/",
    "頭腦風暴 头脑风暴 [tou2 nao3 feng1 bao4] /brainstorming/",
    "頭腦 头脑 [tou2 nao3] /brains/mind/",
    "腦 脑 [nao3] /brain/",
    "風暴 风暴 [feng1 bao4] /storm/",
    "份 份 [fen4] /classifier for gifts, newspaper, papers, reports etc/share/",
    "報告 报告 [bao4 gao4] /report/",
    "解 解 [jie3] /to divide/to break up/to solve/",
    "方程 方程 [fang1 cheng2] /mathematical equation/",
    "not a dictionary line",
]


def test_words_are_cut_longest_first_and_glossed() -> None:
    found = parse(iter(LINES))
    assert list(found.words("上传文件")) == ["上传", "文件"]
    assert found.gloss("把文件上传到云端") == ("document file upload transfer up high in the clouds the cloud")
    # A character the dictionary lacks is dropped; Latin text is kept as written.
    assert found.gloss("用PDF上传") == "PDF upload transfer up"


def test_common_readings_come_before_proper_nouns() -> None:
    found = parse(iter(LINES))
    assert found.gloss("长") == "long length"  # the surname entry comes first in the file
    assert found.gloss("长江") == "Yangtze River"


def test_references_inside_a_sense_are_dropped_not_the_sense() -> None:
    found = parse(iter(LINES))
    assert found.gloss("微信") == "WeChat"
    assert found.gloss("腾讯") == "Tencent"  # cut at the first comma: the name, not the gloss


def test_the_bundled_dictionary() -> None:
    bundled = glossary()
    assert bundled is not None and len(bundled) > 100_000
    gloss = english_gloss("把这个文件上传到云端")
    assert gloss is not None and "upload" in gloss and "file" in gloss
    assert english_gloss("upload this file") is None  # nothing to translate


def test_the_cut_takes_the_fewest_words() -> None:
    found = parse(iter(LINES))
    # The longest match from the left would take 先头 (ahead) and split the rest.
    assert list(found.words("先头脑风暴")) == ["先", "头脑风暴"]
    assert found.gloss("先头脑风暴") == "early prior brainstorming"


def test_measure_words_after_a_numeral_or_demonstrative_are_dropped() -> None:
    found = parse(iter(LINES))
    assert found.gloss("写一份报告") == "report"  # 写 is not in the test dictionary
    assert found.gloss("这份报告") == "report"
    # Not after a numeral, the word keeps its senses (the classifier one is never a gloss).
    assert found.gloss("份") == "share"


def test_fewer_senses_on_request() -> None:
    found = parse(iter(LINES))
    assert found.gloss("解方程") == "divide break up mathematical equation"
    assert found.gloss("解方程", kept=1) == "divide mathematical equation"


def test_our_own_senses_replace_the_dictionary_s_and_add_words_it_lacks() -> None:
    found = parse(iter(LINES))
    found.override({"文件": ("file",), "油管": ("YouTube",)})
    assert found.gloss("把文件上传到油管") == "file upload transfer up YouTube"
    assert list(found.words("油管上传")) == ["油管", "上传"]


def test_the_bundled_glossary_speaks_of_office_work_as_skills_do() -> None:
    # The dictionary's own senses: "form table", "weekly publication", "character script";
    # 油管 is not in it.
    assert english_gloss("把表格整理成周报", kept=1) == "table organize into weekly report"
    assert english_gloss("提取文字", kept=1) == "extract text"
    assert english_gloss("上传到油管", kept=1) == "upload YouTube"
