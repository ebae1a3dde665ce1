"""The ONNX Runtime encoder gives the PyTorch (sentence-transformers) vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph.embeddings import (
    OnnxEncoder,
    SentenceTransformerEncoder,
    default_encoder,
)
from skillgrove.graph.errors import ModelError
from tests.conftest import CORPUS

TEXTS = [
    "",
    "send the weekly report to the team",
    "发布文章到微信公众号",
    "Could you please detect if the IP address 198.51.100.5 is using a VPN, and provide the "
    "results in JSON format, including data for the United States " * 6,  # past 256 tokens
    "résumé naïve café — emoji 🚀 and tabs\tand\nnewlines",
]


@pytest.fixture(scope="module")
def onnx(tmp_path_factory: pytest.TempPathFactory) -> OnnxEncoder:
    return OnnxEncoder(cache_dir=tmp_path_factory.mktemp("cache"))


def corpus_texts(limit: int = 40) -> list[str]:
    files = sorted(CORPUS.rglob("SKILL.md"))[:limit]
    return [f.read_text(encoding="utf-8", errors="replace")[:1500] for f in files]


def test_onnx_vectors_equal_sentence_transformers(onnx: OnnxEncoder) -> None:
    texts = TEXTS + corpus_texts()
    ours = onnx.encode(texts)  # one padded batch of very different lengths
    reference = SentenceTransformerEncoder().encode(texts)
    assert ours.shape == reference.shape == (len(texts), 384)
    assert ours.dtype == np.float32
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() > 0.99999, cosines.min()
    single = onnx.encode([texts[1]])[0]  # unpadded single request, as in search
    assert float(single @ reference[1]) > 0.99999
    assert onnx.onnx_path.is_file()  # exported once, into the cache folder


def test_an_unsupported_model_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text('[{"type": "x.Transformer", "path": ""}]')
    (tmp_path / "sentence_bert_config.json").write_text("{}")
    with pytest.raises(ModelError, match="only Transformer, mean Pooling, Normalize"):
        OnnxEncoder(tmp_path, cache_dir=tmp_path / "cache")
    # ...and the default falls back to PyTorch for it.
    assert isinstance(default_encoder(tmp_path, tmp_path / "cache"), SentenceTransformerEncoder)


def test_torch_can_be_forced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert isinstance(default_encoder(None, tmp_path), OnnxEncoder)
    monkeypatch.setenv("SKILLGROVE_ENCODER", "torch")
    assert isinstance(default_encoder(None, tmp_path), SentenceTransformerEncoder)
