"""The query vectors a process embedded are saved once, when its engine closes, keyed by model
and text, in a bounded table: the next process asking the same thing needs no model; a search
itself never writes."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, Vectors
from skillgrove.runtime.engine import Skillgrove
from tests.helpers import copy_fixture_library


class CountingEncoder:
    """Deterministic 4-dimensional vectors; counts the texts it is asked to embed."""

    dimensions = 4

    def __init__(self, name: str = "counting") -> None:
        self.name = name
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        rows = np.array([[len(t), t.count("a") + 1, t.count("e") + 1, 1] for t in texts],
                        dtype=np.float32)
        normed: Vectors = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return normed


def rows(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as db:
        return [str(model) for (model,) in db.execute(f"SELECT model FROM {table}")]


def test_queries_are_saved_once_at_flush_and_read_by_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    first = CachedEncoder(CountingEncoder(), EmbeddingCache(path))
    vectors = first.encode(["find a pdf"]), first.encode(["make a chart"])
    first.encode(["find a pdf"])
    assert first.writes == 0 and rows(path, "query") == []  # searching writes nothing
    first.flush()
    assert first.writes == 1 and len(rows(path, "query")) == 2
    first.flush()  # nothing new: no transaction
    assert first.writes == 1

    inner = CountingEncoder()
    second = CachedEncoder(inner, EmbeddingCache(path))
    again = second.encode(["find a pdf"]), second.encode(["make a chart"])
    assert inner.texts == []  # both from the file: the model is never asked
    for old, new in zip(vectors, again, strict=True):
        assert old.tobytes() == new.tobytes()
    second.flush()
    assert second.writes == 0  # nothing it embedded itself


def test_another_model_does_not_see_the_saved_queries(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    first = CachedEncoder(CountingEncoder("model-a"), EmbeddingCache(path))
    first.encode(["find a pdf"])
    first.flush()
    other = CountingEncoder("model-b")
    CachedEncoder(other, EmbeddingCache(path)).encode(["find a pdf"])
    assert other.texts == ["find a pdf"]


def test_the_query_table_keeps_only_the_latest_saved(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    encoder = CachedEncoder(CountingEncoder(), EmbeddingCache(path, query_rows=2))
    for text in ("one", "two", "three"):
        encoder.encode([text])
    encoder.flush()
    assert len(rows(path, "query")) == 2
    inner = CountingEncoder()
    reader = CachedEncoder(inner, EmbeddingCache(path, query_rows=2))
    for text in ("three", "two", "one"):
        reader.encode([text])
    assert inner.texts == ["one"]  # the oldest was dropped


def test_indexing_writes_the_index_table_and_never_the_query_table(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    encoder = CachedEncoder(CountingEncoder(), EmbeddingCache(path))
    with encoder.bulk():
        encoder.encode(["skill text one", "skill text two"])
    encoder.flush()
    assert len(rows(path, "embedding")) == 2 and rows(path, "query") == []
    assert encoder.writes == 1


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = EmbeddingCache(path)
    encoder = CachedEncoder(CountingEncoder(), cache)
    encoder.encode(["find a pdf"])
    cache.close()  # any sqlite3 error at flush time: a cache, never a failure
    encoder.flush()
    assert encoder.writes == 0


def test_an_engine_saves_the_queries_of_the_encoder_it_made_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = copy_fixture_library(tmp_path / "lib")
    given = CachedEncoder(CountingEncoder(), EmbeddingCache(tmp_path / "given.sqlite"))
    engine = Skillgrove([library], index=tmp_path / "index", encoder=given)
    engine.encoder.encode(["find a pdf"])
    engine.close()
    assert given.writes == 0  # the caller's encoder: the caller decides when it is saved

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    real = Path(os.environ.get("SKILLGROVE_CACHE") or Path.home() / ".cache" / "skillgrove")
    if (real / "onnx").is_dir():  # the model's ONNX export (made once per machine)
        (cache / "onnx").symlink_to(real / "onnx")
    monkeypatch.setenv("SKILLGROVE_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    own = Skillgrove([library], index=tmp_path / "index")  # the real model, made by the engine
    own.encoder.encode(["find a pdf"])
    assert rows(cache / "embeddings.sqlite", "query") == []
    own.close()
    assert rows(cache / "embeddings.sqlite", "query") == [own.encoder.name]
