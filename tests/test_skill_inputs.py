"""A skill run on its own: its inputs are checked against its declared schema before anything
runs, and the caller's keys reach it as data, never as expression text."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgrove import Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.runtime.errors import InvalidRequestError
from tests.helpers import write_skill

HOSTILE_KEYS = ["a || toJSON(inputs)", "x }} ${{ toJSON(inputs) ", "inputs", "with spaces"]


@pytest.fixture
def engine(tmp_path: Path, encoder: CachedEncoder) -> Skillgrove:
    root = tmp_path / "lib"
    echo = write_skill(root / "skills", "echo-keys", """
        ---
        name: echo-keys
        description: Say which keyword arguments it was called with, and their values.
        entrypoint: {python: "main.py:run"}
        ---
        Returns the keys it got.
        """)
    (echo.parent / "main.py").write_text(
        "def run(**kwargs):\n    return {'keys': sorted(kwargs), 'values': kwargs}\n")
    typed = write_skill(root / "skills", "repeat-text", """
        ---
        name: repeat-text
        description: Repeat a text a number of times.
        entrypoint: {python: "main.py:run"}
        inputs:
          properties:
            text: {type: string}
            times: {type: integer, minimum: 1}
          required: [text]
          additionalProperties: false
        ---
        Repeats it.
        """)
    (typed.parent / "main.py").write_text(
        "def run(text, times=1):\n    return {'text': text * times}\n")
    return Skillgrove([root], index=tmp_path / "index", encoder=encoder)


def test_input_keys_reach_the_skill_as_they_were_given(engine: Skillgrove) -> None:
    given = {key: f"value of {key}" for key in HOSTILE_KEYS}
    given["text"] = "${{ toJSON(inputs) }}"  # a value is data too
    record = engine.run_skill("echo-keys", given)
    assert record.status == "success", record.error
    assert record.outputs["keys"] == sorted(given)
    assert record.outputs["values"] == given
    assert engine.get_run(record.id).inputs == given


@pytest.mark.parametrize(("inputs", "field", "message"), [
    ({"text": 5}, "inputs.text", "inputs.text: 5 is not of type 'string' (skill 'repeat-text')"),
    ({"text": "a", "times": 0}, "inputs.times",
     "inputs.times: 0 is less than the minimum of 1 (skill 'repeat-text')"),
    ({"txt": "a"}, "inputs.txt",
     "inputs.txt: skill 'repeat-text' has no such input (did you mean 'text'?)"),
    ({}, "inputs.text", "inputs.text: 'text' is a required property (skill 'repeat-text')"),
])
def test_inputs_that_break_the_skill_schema_are_refused_before_it_runs(
        engine: Skillgrove, inputs: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        engine.run_skill("repeat-text", inputs)
    assert refused.value.field == field and refused.value.message == message
    assert engine.runs() == []  # nothing ran, nothing was recorded
