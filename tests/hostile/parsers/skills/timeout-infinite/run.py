"""Writes a marker if it ever runs: the hostile tests assert it never does."""

from pathlib import Path


def main(**inputs):
    Path(__file__).with_name("EXECUTED").write_text("ran\n")
    return {"text": "ran"}
