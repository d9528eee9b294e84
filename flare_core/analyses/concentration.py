"""Layer-wise token concentration (paper §6, papers/socm_mean_pooling_collapse.txt).

For every Transformer layer, with ``H`` the layer input, ``Z`` the attention-branch output (after the
output projection, before the residual and LayerNorm), ``Y = H + Z`` the post-residual states
before LayerNorm, ``X`` the layer output, all of shape ``(n, d)`` for one text of ``n`` tokens
(special tokens included), and ``S(M) = (1/n) sum_j ||m_j - mu(M)||^2``:

* ``lambda_h = ||W^o_h W^v_h||_op^2 * ||P A_h||_F^2 / (n - 1)`` per head (Definition 1, Eq. 13), with
  ``A_h`` the ``(n, n)`` attention probabilities (rows = queries, each summing to 1),
  ``P = I_n - 11^T/n`` and ``||P A||_F^2 = ||A||_F^2 - ||A^T 1||^2 / n``; ``W^v_h`` (``d_h x d``) is the
  head's row slice of the value projection and ``W^o_h`` (``d x d_h``) the matching column slice of
  the output projection; biases are excluded (they shift every token equally and do not change any
  spread). ``lambda`` is the mean over heads.
* ``r = S(H) / ||mu(Y)||^2`` (Definition 2, as measured in Figure 4b);
* ``C = [S(X)/||mu(X)||^2] / [S(Y)/||mu(Y)||^2]`` (Definition 3, as measured in Figure 4c);
* ``concentration = S(X)/||mu(X)||^2`` (Figure 4d), which is also ``tr Sigma(X_norm)``;
* ``mean_cos = (1/n^2) sum_{j,k} cos(x_j, x_k)`` (Appendix H.2, diagonal included);
* ``z_spread_ratio = S(Z)/S(H)``, the measured counterpart of ``lambda`` (Eq. 42 bounds its
  expectation by ``lambda`` for i.i.d. isotropic Gaussian inputs; real inputs need not obey it).

Every quantity is computed per text and per layer, then averaged over texts (texts with a single
token have no spread: their ``lambda`` and ``C`` are NaN and skipped by the averages).

Values come from forward hooks on the real Hugging Face modules (no re-implementation):

* BERT layout (``BertModel``, ``RobertaModel``, ``XLMRobertaModel``): ``encoder.layer[i]`` pre-hook
  -> ``H``; ``attention.self`` output ``(context, probs)`` -> ``A`` (eager attention is switched on
  for the call and restored after); ``attention.output.dense`` output -> ``Z``;
  ``attention.output.LayerNorm`` input -> ``Y``; ``encoder.layer[i]`` output -> ``X``.
* MPNet (``MPNetModel``): ``encoder.layer[i]`` -> ``H``/``X``; ``attention.attn.dropout`` input
  (the softmax output, relative position bias included) -> ``A``; ``attention.attn.o`` output ->
  ``Z``; ``attention.LayerNorm`` input -> ``Y``.

Texts are tokenised in padded batches; statistics use only the rows (and attention columns) of real
tokens, so padding does not change the values beyond float rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.checks import check_int
from flare_core.device import pick_device
from flare_core.errors import UnsupportedArchitecture

LAYER_COLUMNS = ["layer", "lambda_mean", "r", "C", "concentration", "mean_cos", "z_spread_ratio", "n_texts"]
HEAD_COLUMNS = ["layer", "head", "lambda_mean", "op_norm2", "pa_ratio_mean"]
TEXT_COLUMNS = [
    "text",
    "layer",
    "n_tokens",
    "lambda_mean",
    "r",
    "C",
    "concentration",
    "mean_cos",
    "z_spread_ratio",
]

_BERT_TYPES = ("bert", "roberta", "xlm-roberta")
_MPNET_TYPES = ("mpnet",)
SUPPORTED_MODEL_TYPES = _BERT_TYPES + _MPNET_TYPES


@dataclass
class _LayerHandles:
    """Modules of one layer to hook, and the weights that define ``lambda``."""

    layer: torch.nn.Module
    probs_module: torch.nn.Module
    probs_from: str  # "output1" (BERT self-attention returns (context, probs)) or "input0" (MPNet dropout)
    z_module: torch.nn.Module
    y_module: torch.nn.Module
    w_value: torch.Tensor  # (n_heads * d_h, d)
    w_out: torch.Tensor  # (d, n_heads * d_h)
    n_heads: int


@dataclass
class ConcentrationResult:
    """Output of :func:`concentration_profile`.

    Attributes:
        layers: one row per layer (``layer`` = 1..L, the output of ``encoder.layer[layer - 1]``),
            columns :data:`LAYER_COLUMNS`; every value is the mean over texts; ``lambda_mean`` is also
            averaged over heads; ``n_texts`` counts the texts.
        heads: one row per (layer, head), columns :data:`HEAD_COLUMNS`: ``lambda_mean`` (mean over
            texts), ``op_norm2`` (``||W^o_h W^v_h||_op^2``, weights only) and ``pa_ratio_mean``
            (mean over texts of ``||P A_h||_F^2 / (n - 1)``), so ``lambda_mean = op_norm2 * pa_ratio_mean``.
        texts: one row per (text, layer), columns :data:`TEXT_COLUMNS` (``lambda_mean`` averaged over
            heads), for distributions and custom aggregations.
    """

    layers: pd.DataFrame
    heads: pd.DataFrame
    texts: pd.DataFrame = field(repr=False)


def _base(model: Any) -> Any:
    base = getattr(model, "base_model", None)
    return base if isinstance(base, torch.nn.Module) else model


def _model_type(model: Any) -> str:
    return str(getattr(getattr(_base(model), "config", None), "model_type", "") or "")


def _layer_list(model: Any) -> list[torch.nn.Module] | None:
    encoder = getattr(_base(model), "encoder", None)
    layers = getattr(encoder, "layer", None)
    if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
        return list(layers)
    return None


def _bert_layer_ok(layer: torch.nn.Module) -> bool:
    att = getattr(layer, "attention", None)
    sa, out = getattr(att, "self", None), getattr(att, "output", None)
    return all(
        isinstance(getattr(m, name, None), torch.nn.Module)
        for m, name in ((sa, "query"), (sa, "key"), (sa, "value"), (out, "dense"), (out, "LayerNorm"))
    ) and hasattr(sa, "num_attention_heads")


def _mpnet_layer_ok(layer: torch.nn.Module) -> bool:
    att = getattr(layer, "attention", None)
    attn = getattr(att, "attn", None)
    return (
        all(
            isinstance(getattr(attn, name, None), torch.nn.Module) for name in ("q", "k", "v", "o", "dropout")
        )
        and isinstance(getattr(att, "LayerNorm", None), torch.nn.Module)
        and hasattr(attn, "num_attention_heads")
    )


def supported(model: Any) -> bool:
    """True when :func:`layer_concentration` has an adapter for ``model``.

    Supported: encoder-only models of type ``bert``, ``roberta``, ``xlm-roberta`` (BERT layout) and
    ``mpnet``, bare or wrapped in a task head (``model.base_model`` is used).
    """
    if not isinstance(model, torch.nn.Module):
        return False
    mtype = _model_type(model)
    layers = _layer_list(model)
    if layers is None:
        return False
    config = getattr(_base(model), "config", None)
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return False
    if mtype in _BERT_TYPES:
        return all(_bert_layer_ok(layer) for layer in layers)
    if mtype in _MPNET_TYPES:
        return all(_mpnet_layer_ok(layer) for layer in layers)
    return False


def _handles(model: Any) -> tuple[str, list[_LayerHandles]]:
    if not supported(model):
        name = type(model).__name__
        mtype = _model_type(model) or "unknown"
        raise UnsupportedArchitecture(
            f"layer-wise concentration has no adapter for {name} (model_type {mtype!r}); supported encoder "
            f"types: {', '.join(SUPPORTED_MODEL_TYPES)} (BertModel-style and MPNetModel layers, not decoders)"
        )
    mtype = _model_type(model)
    out = []
    for layer in _layer_list(model) or []:
        att = layer.attention
        if mtype in _BERT_TYPES:
            out.append(
                _LayerHandles(
                    layer=layer,
                    probs_module=att.self,
                    probs_from="output1",
                    z_module=att.output.dense,
                    y_module=att.output.LayerNorm,
                    w_value=att.self.value.weight,
                    w_out=att.output.dense.weight,
                    n_heads=int(att.self.num_attention_heads),
                )
            )
        else:
            out.append(
                _LayerHandles(
                    layer=layer,
                    probs_module=att.attn.dropout,
                    probs_from="input0",
                    z_module=att.attn.o,
                    y_module=att.LayerNorm,
                    w_value=att.attn.v.weight,
                    w_out=att.attn.o.weight,
                    n_heads=int(att.attn.num_attention_heads),
                )
            )
    return ("bert" if mtype in _BERT_TYPES else "mpnet"), out


def _op_norms(h: _LayerHandles) -> np.ndarray:
    """Squared spectral norms of ``W^o_h W^v_h`` (``d x d``, rank ``d_h``) for the heads of one layer.

    With ``W^o_h = Q_o R_o`` and ``W^v_h^T = Q_v R_v`` (thin QR), ``W^o_h W^v_h = Q_o (R_o R_v^T) Q_v^T``,
    so the norm is that of the ``d_h x d_h`` matrix ``R_o R_v^T``.
    """
    wv = h.w_value.detach().to("cpu", torch.float64)
    wo = h.w_out.detach().to("cpu", torch.float64)
    dh = wv.shape[0] // h.n_heads
    wo_h = torch.stack([wo[:, k * dh : (k + 1) * dh] for k in range(h.n_heads)])  # (heads, d, dh)
    wv_h = torch.stack([wv[k * dh : (k + 1) * dh, :].T for k in range(h.n_heads)])  # (heads, d, dh)
    r_o = torch.linalg.qr(wo_h, mode="r").R
    r_v = torch.linalg.qr(wv_h, mode="r").R
    top = torch.linalg.svdvals(r_o @ r_v.transpose(1, 2))[:, 0]
    return (top**2).numpy()


def _spread(m: torch.Tensor) -> tuple[float, float]:
    """``(S(M), ||mu(M)||^2)`` for ``m`` of shape ``(n, d)``."""
    mu = m.mean(dim=0)
    return float(((m - mu) ** 2).sum(dim=1).mean()), float((mu * mu).sum())


def _text_stats(
    h: torch.Tensor, z: torch.Tensor, y: torch.Tensor, x: torch.Tensor, a: torch.Tensor, op2: np.ndarray
) -> dict[str, Any]:
    """Statistics of one text at one layer.

    Args:
        h, z, y, x: ``(n, d)`` float64 layer input, attention-branch output, post-residual, output.
        a: ``(n_heads, n, n)`` float64 attention probabilities (rows = queries).
        op2: ``(n_heads,)`` squared operator norms.
    """
    n = h.shape[0]
    s_h, _ = _spread(h)
    s_z, _ = _spread(z)
    s_y, m_y = _spread(y)
    s_x, m_x = _spread(x)
    if n > 1:
        fro2 = (a * a).sum(dim=(1, 2))
        col = a.sum(dim=1)  # (heads, n): A^T 1
        pa = ((fro2 - (col * col).sum(dim=1) / n) / (n - 1)).numpy()
        lam = op2 * pa
    else:
        pa = np.full(op2.shape, math.nan)
        lam = np.full(op2.shape, math.nan)
    unit = x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(1e-300)
    conc_x = s_x / m_x if m_x > 0 else math.nan
    conc_y = s_y / m_y if m_y > 0 else math.nan
    return {
        "n_tokens": n,
        "lambda_heads": lam,
        "pa_heads": pa,
        "lambda_mean": float(np.mean(lam)),
        "r": s_h / m_y if m_y > 0 else math.nan,
        "C": conc_x / conc_y if conc_y and conc_y > 0 else math.nan,
        "concentration": conc_x,
        "mean_cos": float((unit.sum(dim=0) ** 2).sum()) / (n * n),
        "z_spread_ratio": s_z / s_h if s_h > 0 else math.nan,
    }


class _Recorder:
    """Forward hooks that capture H, A, Z, Y, X of each layer and reduce them per text at once."""

    def __init__(self, handles: list[_LayerHandles], op2: np.ndarray) -> None:
        self.handles = handles
        self.op2 = op2
        self.mask: torch.Tensor | None = None  # (B, T) bool
        self.text_offset = 0
        self.cur: dict[str, torch.Tensor] = {}
        self.rows: list[dict[str, Any]] = []
        self.removers: list[Any] = []

    def attach(self) -> None:
        for idx, hd in enumerate(self.handles):
            self.removers.append(hd.layer.register_forward_pre_hook(self._pre_layer, with_kwargs=True))
            if hd.probs_from == "output1":
                self.removers.append(hd.probs_module.register_forward_hook(self._probs_out))
            else:
                self.removers.append(hd.probs_module.register_forward_pre_hook(self._probs_in))
            self.removers.append(hd.z_module.register_forward_hook(self._z_out))
            self.removers.append(hd.y_module.register_forward_pre_hook(self._y_in))
            self.removers.append(hd.layer.register_forward_hook(self._make_post(idx)))

    def detach(self) -> None:
        for r in self.removers:
            r.remove()
        self.removers.clear()

    def _pre_layer(self, module: Any, args: tuple, kwargs: dict) -> None:
        self.cur = {"H": args[0] if args else kwargs["hidden_states"]}

    def _probs_out(self, module: Any, args: tuple, output: Any) -> None:
        probs = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if probs is None:
            raise RuntimeError(
                "the self-attention module returned no attention probabilities (need eager attention)"
            )
        self.cur["A"] = probs

    def _probs_in(self, module: Any, args: tuple) -> None:
        self.cur["A"] = args[0]

    def _z_out(self, module: Any, args: tuple, output: Any) -> None:
        self.cur["Z"] = output[0] if isinstance(output, tuple) else output

    def _y_in(self, module: Any, args: tuple) -> None:
        self.cur["Y"] = args[0]

    def _make_post(self, idx: int) -> Callable[..., None]:
        def hook(module: Any, args: tuple, output: Any) -> None:
            x = output[0] if isinstance(output, tuple) else output
            self._reduce(idx, x)

        return hook

    def _reduce(self, idx: int, x_all: torch.Tensor) -> None:
        missing = [k for k in ("H", "A", "Z", "Y") if k not in self.cur]
        if missing:
            raise RuntimeError(
                f"layer {idx + 1}: hooks did not capture {missing}; the module layout is unexpected"
            )
        assert self.mask is not None
        h_all, a_all, z_all, y_all, x_all = (
            t.detach().to("cpu", torch.float64) for t in (*(self.cur[k] for k in ("H", "A", "Z", "Y")), x_all)
        )
        mask = self.mask.cpu()
        for b in range(x_all.shape[0]):
            pos = torch.nonzero(mask[b], as_tuple=True)[0]
            a = a_all[b][:, pos][:, :, pos]
            stats = _text_stats(h_all[b, pos], z_all[b, pos], y_all[b, pos], x_all[b, pos], a, self.op2[idx])
            stats["text"] = self.text_offset + b
            stats["layer"] = idx + 1
            self.rows.append(stats)
        self.cur = {}


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise ValueError("texts must be a sequence of strings (not a single string)")
    out = list(texts)
    if not out:
        raise ValueError("texts is empty")
    bad = [k for k, t in enumerate(out) if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts must be strings; entries {bad[:5]} are not")
    return out


def concentration_profile(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    max_length: int = 256,
    device: str | torch.device | None = None,
) -> ConcentrationResult:
    """Layer-wise ``lambda``, ``r``, ``C``, concentration and within-text cosine, with per-head detail.

    Args:
        model: a Hugging Face encoder (see :func:`supported`); put in eval mode for the call and
            restored after; BERT-layout models run with eager attention for the call.
        tokenizer: its tokenizer (special tokens are added and kept in the statistics).
        texts: ``T`` strings; each is truncated to ``max_length`` tokens.
        batch_size: texts per forward pass (padding does not change the values).
        max_length: truncation length in tokens (``>= 1``).
        device: where to run; default the model's current device. A different device moves the model.

    Returns:
        :class:`ConcentrationResult` with ``layers``, ``heads`` and ``texts`` frames.

    Raises:
        UnsupportedArchitecture: the model has no adapter.
        ValueError: invalid texts, batch size or length.
    """
    texts = _check_texts(texts)
    check_int(batch_size, "batch_size", min_value=1)
    check_int(max_length, "max_length", min_value=1)
    kind, handles = _handles(model)
    if not callable(tokenizer):
        raise ValueError("tokenizer must be a callable Hugging Face tokenizer")
    try:
        current = next(model.parameters()).device
    except StopIteration as exc:
        raise ValueError("model has no parameters") from exc
    dev = pick_device(str(device)) if device is not None else current
    if dev != current:
        model.to(dev)

    op2 = np.stack([_op_norms(h) for h in handles])  # (L, heads)
    rec = _Recorder(handles, op2)
    was_training = model.training
    old_impl = None
    config = getattr(model, "config", None)
    if kind == "bert" and getattr(config, "_attn_implementation", "eager") != "eager":
        old_impl = config._attn_implementation
        model.set_attn_implementation("eager")
    model.eval()
    rec.attach()
    try:
        with torch.no_grad():
            for start in range(0, len(texts), batch_size):
                batch = texts[start : start + batch_size]
                enc = tokenizer(
                    batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                enc = {
                    k: v.to(dev)
                    for k, v in enc.items()
                    if k in ("input_ids", "attention_mask", "token_type_ids")
                }
                if "attention_mask" not in enc:
                    enc["attention_mask"] = torch.ones_like(enc["input_ids"])
                rec.mask = enc["attention_mask"].bool()
                rec.text_offset = start
                model(**enc)
    finally:
        rec.detach()
        if old_impl is not None:
            model.set_attn_implementation(old_impl)
        model.train(was_training)
    return _assemble(rec.rows, op2)


def _assemble(rows: list[dict[str, Any]], op2: np.ndarray) -> ConcentrationResult:
    """Average per-text rows into the layer and head frames."""
    texts = pd.DataFrame(rows)
    per_text = texts[TEXT_COLUMNS].sort_values(["text", "layer"], kind="mergesort").reset_index(drop=True)
    layer_rows = []
    head_rows = []
    for layer, grp in texts.groupby("layer", sort=True):
        row = {"layer": int(layer)}
        for col in ("lambda_mean", "r", "C", "concentration", "mean_cos", "z_spread_ratio"):
            vals = grp[col].to_numpy(dtype=np.float64)
            row[col] = float(np.nanmean(vals)) if np.isfinite(vals).any() else math.nan
        row["n_texts"] = len(grp)
        layer_rows.append(row)
        lam = np.stack(grp["lambda_heads"].to_list())  # (texts, heads)
        pa = np.stack(grp["pa_heads"].to_list())
        for head in range(lam.shape[1]):
            ok = np.isfinite(lam[:, head])
            head_rows.append(
                {
                    "layer": int(layer),
                    "head": head,
                    "lambda_mean": float(lam[ok, head].mean()) if ok.any() else math.nan,
                    "op_norm2": float(op2[int(layer) - 1, head]),
                    "pa_ratio_mean": float(pa[ok, head].mean()) if ok.any() else math.nan,
                }
            )
    return ConcentrationResult(
        layers=pd.DataFrame(layer_rows, columns=LAYER_COLUMNS),
        heads=pd.DataFrame(head_rows, columns=HEAD_COLUMNS),
        texts=per_text,
    )


def layer_concentration(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    max_length: int = 256,
    device: str | torch.device | None = None,
) -> pd.DataFrame:
    """Per-layer averages over texts (the ``layers`` frame of :func:`concentration_profile`).

    Returns:
        DataFrame with one row per layer: ``layer`` (1..L), ``lambda_mean`` (mean over heads and
        texts), ``r``, ``C``, ``concentration`` (``S(X)/||mu(X)||^2``), ``mean_cos``,
        ``z_spread_ratio`` (``S(Z)/S(H)``) and ``n_texts``. Per-head values: use
        :func:`concentration_profile` (``.heads``).
    """
    return concentration_profile(
        model, tokenizer, texts, batch_size=batch_size, max_length=max_length, device=device
    ).layers
