"""ONE real-model smoke test: packaged all-MiniLM-L6-v2 on a tiny document.

Checks the single forward pass against sentence-transformers' own ``encode``, the token
embeddings' shape and norms, MaxSim over them, and that a cached rebuild loads no model.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.data.schema import Dataset, Question, Unit
from harness.retrieval import encoder as encoder_mod
from harness.retrieval.encoder import DenseEncoder, markup_token_ids
from harness.retrieval.rerankers import maxsim
from harness.retrieval.table import build_outcome_table

TEXTS = [
    "We evaluate on the SQuAD and TriviaQA benchmarks.",
    "Table 2: Results of BERT-base on the development set.",
    "Our model uses twelve transformer layers with 768 hidden units.",
    "Related work",
    "The learning rate was set to 0.0001 and training ran for three epochs on four GPUs in total.",
]


@pytest.mark.slow
def test_real_minilm_encoder_maxsim_and_cached_rebuild(tmp_path, monkeypatch):
    enc = DenseEncoder(batch_size=2, precision="fp32")
    out = enc.encode(TEXTS)
    st = enc._loaded()
    ref = st.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    assert np.allclose(out.vectors, ref, atol=1e-5)  # same vectors despite length-sorted batching
    n_ids = [len(st.tokenizer(t)["input_ids"]) for t in TEXTS]
    assert [len(t) for t in out.tokens] == [n - 2 for n in n_ids]  # CLS and SEP dropped
    assert all(np.allclose(np.linalg.norm(t, axis=1), 1, atol=1e-5) for t in out.tokens)
    assert out.n_tokens.tolist() == n_ids

    # literal special tokens inside a text are dropped too (by id, not by position)
    lit = ["[CLS] layers [SEP] of the model [SEP]", "[SEP]"]
    lit_out = enc.encode(lit)
    special = set(st.tokenizer.all_special_ids) - {st.tokenizer.unk_token_id}
    assert special == set(markup_token_ids(st.tokenizer)) and st.tokenizer.cls_token_id in special
    for text, toks in zip(lit, lit_out.tokens):
        ids = st.tokenizer(text)["input_ids"]
        assert len(toks) == sum(i not in special for i in ids)
    assert [len(t) for t in lit_out.tokens] == [4, 0]  # "layers of the model"; nothing

    q = enc.encode(["How many layers does the model use?"])
    scores = [maxsim(q.tokens[0], t) for t in out.tokens]
    assert int(np.argmax(scores)) == 2  # the unit about layers

    units = [Unit(f"d#{i}", "d", i, "caption" if i == 1 else "paragraph", t) for i, t in enumerate(TEXTS)]
    ds = Dataset("smoke", {"d": units}, [Question("q1", "d", "d", "How many layers does the model use?",
                                                   gold_unit_ids=("d#2",))], {"d": [u.unit_id for u in units]})
    cfg = {"k": 3, "candidates": 4, "precision": "fp32", "encoder": {"batch_size": 4}}
    first = build_outcome_table(ds, cfg, {"name": "maxsim"}, cache_dir=tmp_path, progress=False)
    assert first.frame.loc[0, "keep.hit@1"] == 1
    assert first.info["models"]["encoder"]["weights_sha256"]
    assert first.info["model_forward_seconds"] > 0

    def no_model(*a, **k):
        raise AssertionError("model loaded on a cached build")

    monkeypatch.setattr(encoder_mod, "load_sentence_transformer", no_model)
    second = build_outcome_table(ds, cfg, {"name": "maxsim"}, cache_dir=tmp_path, progress=False)
    assert second.key == first.key
    assert second.frame.equals(first.frame)


@pytest.mark.slow
def test_cross_encoder_reranker_from_local_path(tmp_path):
    """A tiny randomly initialised BERT cross-encoder saved locally: the reranker loads it by path
    and its scores order pairs exactly as the model's own logits do."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from harness.retrieval.encoder import packaged_minilm_path
    from harness.retrieval.rerankers import CrossEncoderReranker, RerankInputs, make_reranker

    tok = AutoTokenizer.from_pretrained(str(packaged_minilm_path()))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=1)
    model = BertForSequenceClassification(cfg).eval()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)

    rr = make_reranker({"name": "cross_encoder", "model": str(tmp_path), "batch_size": 2}, {}, "fp32")
    assert isinstance(rr, CrossEncoderReranker) and rr.identity()["weights_sha256"]
    q = ["How many layers does the model use?"]
    pairs = [(0, i) for i in range(len(TEXTS))]
    got = rr.score(RerankInputs(q, [], TEXTS, []), pairs)
    with torch.inference_mode():
        enc = tok([q[0]] * len(TEXTS), TEXTS, padding=True, truncation=True, return_tensors="pt")
        logits = model(**enc).logits[:, 0].numpy()
    assert np.argsort(-got, kind="stable").tolist() == np.argsort(-logits, kind="stable").tolist()
    assert rr.forward_seconds > 0
