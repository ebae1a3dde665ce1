"""The README's "For agents" section shows a compact answer as it really comes back: the JSON
block under "What a search answers" is what the engine answers for its request on the bundled
library, field by field. The ranking's tail (``suggestions``, ``others``) is tuned often, so for
those the block must only have the real answer's shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

from skillgrove import Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.runtime.inject import count_tokens
from skillgrove.runtime.paths import bundled_library

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
MARKER = "<!-- compact answer: tests/test_readme_compact.py checks it against the real one -->"


def shown() -> dict[str, object]:
    start = README.index(MARKER)
    match = re.compile(r"```json\n(.*?)```", re.S).search(README, start)
    assert match is not None
    found: dict[str, object] = json.loads(match.group(1))
    return found


def test_the_compact_answer_in_the_readme_is_the_real_one(tmp_path: Path,
                                                          encoder: CachedEncoder) -> None:
    readme = shown()
    engine = Skillgrove([bundled_library()], index=tmp_path / "index", encoder=encoder)
    real = engine.toolbox(str(readme["request"]))
    tail = ("suggestions", "others")
    assert {k: v for k, v in readme.items() if k not in tail} == \
        {k: v for k, v in real.items() if k not in tail}
    assert set(readme) == set(real)
    for suggestion in [*real["suggestions"], *readme["suggestions"]]:  # type: ignore[misc]
        assert set(suggestion) == {"name", "reason"}
    assert all(isinstance(name, str) for name in [*real["others"], *readme["others"]])  # type: ignore[misc]
    tokens = count_tokens(json.dumps(real, ensure_ascii=False))
    assert 600 <= tokens <= 1000, f"the README says about 800 tokens; it is {tokens}"
    full = engine.toolbox(str(readme["request"]), detail="full")
    full_tokens = count_tokens(json.dumps(full, ensure_ascii=False))
    assert 10_000 <= full_tokens <= 13_500, f"the README says about 11,800; it is {full_tokens}"
