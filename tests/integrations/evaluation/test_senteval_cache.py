"""The SentEval embedding cache: keyed by what computed the embeddings, exact on a hit, invalidated by any change
of the weights, tokenizer or pooler, robust to damaged files; the padding-free encoding it shares across tasks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cl_plugins.integrations.evaluation.senteval import engine
from cl_plugins.integrations.evaluation.senteval.embedders import Embedder
from cl_plugins.integrations.evaluation.senteval.embedding_cache import (
    ListCache,
    SentenceTable,
    model_fingerprint,
    prune,
)
from cl_plugins.integrations.modalities.text.testing import make_tiny_bert

SENTENCES = [
    "the man plays music .",
    "a woman reads a book .",
    "the dog runs in the city .",
    "the old man reads a long book in the city .",
    "a cat sits .",
    "the girl sings with her mother and the boy swims in the river .",
    "a dog .",
    "the man plays music .",  # repeated: encoded once by the distinct table
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("cache") / "bert")


class Counting:
    """An encoder that counts the sentences it is asked to encode."""

    def __init__(self, encoder) -> None:  # type: ignore[no-untyped-def]
        self.encoder, self.calls = encoder, 0
        self.fingerprint = encoder.fingerprint

    def __call__(self, sentences):  # type: ignore[no-untyped-def]
        self.calls += len(sentences)
        return self.encoder(sentences)

    def encode_unpadded(self, sentences):  # type: ignore[no-untyped-def]
        self.calls += len(sentences)
        return self.encoder.encode_unpadded(sentences)


def _encoder(model_dir, pooler: str = "avg"):  # type: ignore[no-untyped-def]
    from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder

    return load_encoder(model_dir, pooler)


def test_fingerprint_follows_weights_tokenizer_and_pooler(model_dir, tmp_path) -> None:
    first = _encoder(model_dir)
    assert _encoder(model_dir).fingerprint == first.fingerprint  # reloading the same files: the same key
    assert _encoder(model_dir, "cls_before_pooler").fingerprint != first.fingerprint
    changed = _encoder(model_dir)
    with torch.no_grad():
        changed.model.encoder.encoder.layer[0].output.dense.weight[0, 0] += 1e-6
    assert changed.fingerprint != first.fingerprint
    other_tokenizer = _encoder(model_dir)
    other_tokenizer.tokenizer.do_lower_case = False
    other_tokenizer.tokenizer.backend_tokenizer.normalizer.lowercase = False
    assert model_fingerprint(other_tokenizer.model, other_tokenizer.tokenizer) != model_fingerprint(
        first.model, first.tokenizer
    )


@pytest.mark.parametrize("batching", ["senteval", "distinct"])
def test_cache_hits_are_exact_and_changed_weights_recompute(model_dir, tmp_path, batching: str) -> None:
    cache = tmp_path / "cache"
    first = Counting(_encoder(model_dir))
    embedder = Embedder(first, batching, cache)
    fresh = embedder.transfer(SENTENCES)
    embedder.close()
    assert first.calls == (len(set(SENTENCES)) if batching == "distinct" else len(SENTENCES))
    again = Counting(_encoder(model_dir))
    embedder = Embedder(again, batching, cache)
    assert np.array_equal(embedder.transfer(SENTENCES), fresh) and again.calls == 0  # a second evaluation: no encoding
    changed = _encoder(model_dir)
    with torch.no_grad():
        changed.model.encoder.embeddings.word_embeddings.weight.mul_(1.5)
    changed = Counting(changed)
    embedder = Embedder(changed, batching, cache)
    out = embedder.transfer(SENTENCES)
    embedder.close()
    assert changed.calls > 0 and not np.allclose(out, fresh)
    assert len(list(cache.iterdir())) == 2  # one folder per fingerprint


def test_a_damaged_entry_is_recomputed(model_dir, tmp_path) -> None:
    encoder = _encoder(model_dir)
    lists = ListCache(encoder.fingerprint, tmp_path)
    want = lists.encode(encoder, SENTENCES, 3)
    (entry,) = lists.folder.glob("list-*.npz")
    entry.write_bytes(entry.read_bytes()[:50])
    with pytest.warns(UserWarning, match="unreadable"):
        assert np.array_equal(lists.encode(encoder, SENTENCES, 3), want)
    assert lists.encode(encoder, SENTENCES[:-1], 3).shape[0] == len(SENTENCES) - 1  # another list, another entry


def test_sentence_table_persists_in_row_order(model_dir, tmp_path) -> None:
    encoder = _encoder(model_dir)
    table = SentenceTable(encoder.fingerprint, tmp_path)
    first = table.lookup(encoder.encode_unpadded, SENTENCES[:4])
    both = table.lookup(encoder.encode_unpadded, SENTENCES)
    table.save()
    reloaded = SentenceTable(encoder.fingerprint, tmp_path)
    assert reloaded.rows == table.rows
    assert np.array_equal(reloaded.lookup(lambda s: pytest.fail("encoded again"), SENTENCES), both)
    assert np.array_equal(both[:4], first)


def test_unpadded_embeddings_are_canonical_and_close_to_padded_ones(model_dir) -> None:
    """The same set of sentences in any order: the same bits (canonical batches); alone or among others and
    against SentEval's padded batches: equal up to float rounding."""
    encoder = _encoder(model_dir)
    together = encoder.encode_unpadded(SENTENCES)
    order = np.random.RandomState(0).permutation(len(SENTENCES))
    assert np.array_equal(encoder.encode_unpadded([SENTENCES[i] for i in order]), together[order])
    for i, s in enumerate(SENTENCES):
        assert np.allclose(encoder.encode_unpadded([s])[0], together[i], rtol=0, atol=1e-6)
    assert np.allclose(encoder(SENTENCES), together, rtol=0, atol=1e-5)


def test_prune_deletes_least_recently_used_but_kept(tmp_path) -> None:
    import os

    for i, name in enumerate(["a", "b", "c"]):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.npz").write_bytes(b"0" * 1000)
        os.utime(tmp_path / name, (i, i))
    assert prune(tmp_path, max_bytes=2000, keep=["a"]) == [tmp_path / "b"]  # a is older, but kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c"]


def test_evaluate_reports_stage_times_and_checks_batching(data_root, model_dir, tmp_path) -> None:
    from cl_plugins.integrations.modalities.text.sentence_encoder import load_encoder

    timings: dict = {}
    encoder = load_encoder(model_dir, "avg", max_length=60)  # the tiny model has 64 positions
    engine.evaluate(encoder, "STS13", progress=False, cache=tmp_path, timings=timings)
    assert set(timings["STS13"]) == {"encode", "probe"} and timings["STS13"]["encode"] > 0
    with pytest.raises(ValueError, match="encode_unpadded"):
        engine.evaluate(lambda s: np.ones((len(s), 2)), "STS13", batching="distinct", progress=False)
    with pytest.raises(ValueError, match="batching must be"):
        engine.evaluate(encoder, "STS13", batching="sorted", progress=False)
