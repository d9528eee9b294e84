"""Several conditional flows of one target trained together as one batched model (``torch.func.vmap``).

The conditionals p(v | u_k) of a target share the marginal they start from, so their parameters have
the same shapes except the random projection A_k of the source (d_k -> r). A_k is zero-padded to the
widest source and each u_k to the same width: the padded columns multiply zeros, get zero gradients and
never move, so every flow computes what it would alone. The K flows' parameters are stacked along a
new leading axis and one vmapped log-likelihood evaluates all of them in the same kernels (batched
matrix products), which is what keeps a GPU busy with small flows.

Each flow keeps its own schedule: its own batch order (its seed), its own gradient-norm clipping and L2
penalty, its own early stopping and best weights. Flows that stopped keep riding along in the batch but
get no gradient; their kept weights are those of their best epoch. The numbers equal those of
:func:`flare_core.analyses.sufficiency.flows._fit_conditional` run flow by flow up to the rounding of batched
versus single matrix products.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence

import numpy as np
import torch
from nflows.flows.base import Flow
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from flare_core.analyses.sufficiency._rows import (
    StandardizedRows,
    as_training_data,
    gather,
    n_rows,
    row_slice,
)
from flare_core.analyses.sufficiency._training import FitOutcome, _autocast
from flare_core.analyses.sufficiency.flows import (
    FlowConfig,
    _keep_transforms_in_float32,
    branches,
    make_conditional,
)
from flare_core.device import seed_everything


class _LogProb(nn.Module):
    """``forward(v (n, d_v), u (n, d_u)) -> log p(v | u) (n,)`` of a conditional flow."""

    def __init__(self, flow: Flow) -> None:
        super().__init__()
        self.flow = flow

    def forward(self, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return self.flow.log_prob(v, context=u)


def _pad_projection(conditional: Flow, width: int) -> None:
    """Widen every branch's A (r, d_u) to (r, ``width``) with zero columns."""
    for branch in branches(conditional):
        old = branch.A
        wide = nn.Linear(width, old.out_features, bias=False).to(old.weight.device)
        with torch.no_grad():
            wide.weight.zero_()
            wide.weight[:, : old.in_features] = old.weight
        branch.A = wide


def _narrow_projection(conditional: Flow, width: int) -> None:
    """Undo :func:`_pad_projection`: every branch's A back to (r, ``width``), the source's own width."""
    for branch in branches(conditional):
        wide = branch.A
        narrow = nn.Linear(width, wide.out_features, bias=False).to(wide.weight.device)
        with torch.no_grad():
            narrow.weight.copy_(wide.weight[:, :width])
        branch.A = narrow


def _padded(u: torch.Tensor, width: int) -> torch.Tensor:
    return u if u.shape[1] == width else nn.functional.pad(u, (0, width - u.shape[1]))


def fit_conditionals_batched(
    marginal: Flow,
    sources: Sequence[tuple[np.ndarray | StandardizedRows, np.ndarray | StandardizedRows, int]],
    v_train: np.ndarray | StandardizedRows,
    v_val: np.ndarray | StandardizedRows,
    config: FlowConfig,
) -> list[FitOutcome]:
    """Train p(v | u_k) for each ``(u_train_k, u_val_k, seed_k)`` in ``sources`` as one batched model.

    ``u_*`` (n, d_k) and ``v_*`` (n, d_v) are standardised and row-aligned; ``marginal`` is the trained
    marginal flow of v (on the device to train on; not modified). Returns one :class:`FitOutcome` per
    source, in order; ``seconds`` is the group's wall time divided among its flows.
    """
    start_time = time.perf_counter()
    device = next(marginal.parameters()).device
    k_flows = len(sources)
    width = max(int(u_tr.shape[1]) for u_tr, _, _ in sources)
    flows_, generators = [], []
    for u_train, _, seed in sources:
        generators.append(seed_everything(int(seed)))
        conditional = make_conditional(marginal, int(u_train.shape[1]), config, int(seed))
        _pad_projection(conditional, width)
        if config.autocast:
            _keep_transforms_in_float32(conditional)
        flows_.append(conditional)
    modules = [_LogProb(f) for f in flows_]
    params, buffers = stack_module_state(modules)  # name -> (K, ...) leaf tensors
    template = copy.deepcopy(modules[0]).to("meta")
    branch_names = {n for n in params if ".branch." in n}
    trainable = [n for n in params if config.train_backbone or n in branch_names]
    anchored = [n for n in trainable if not n.endswith(".A.weight")]
    anchors = {n: params[n].detach().clone() for n in anchored}
    for name, p in params.items():
        p.requires_grad_(name in trainable)
    optimizer = torch.optim.Adam([params[n] for n in trainable], lr=config.lr)

    def log_prob(p: dict, b: dict, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return functional_call(template, (p, b), (v, u))

    batched_log_prob = vmap(log_prob)
    v_tr = as_training_data(v_train, device)
    v_va = as_training_data(v_val, device)
    u_tr = [as_training_data(s[0], device) for s in sources]
    u_va = [as_training_data(s[1], device) for s in sources]
    n = n_rows(v_tr)

    def evaluate(v_data, u_data) -> np.ndarray:
        """(K, n) float64 log-likelihoods of every flow on the rows of ``v_data`` / ``u_data[k]``."""
        rows = n_rows(v_data)
        out = np.empty((k_flows, rows), dtype=np.float64)
        step = config.eval_batch_size
        with torch.no_grad():
            for start in range(0, rows, step):
                v = row_slice(v_data, start, start + step, device)
                u = torch.stack([_padded(row_slice(x, start, start + step, device), width) for x in u_data])
                with _autocast(device, config.autocast):
                    logp = batched_log_prob(params, buffers, v.expand(k_flows, *v.shape), u)
                out[:, start : start + step] = logp.detach().to("cpu", torch.float64).numpy()
        return out

    def snapshot(k: int) -> dict[str, torch.Tensor]:
        return {name: p[k].detach().clone() for name, p in params.items()}

    first = evaluate(v_va, u_va)  # every flow equals the marginal here: a candidate for the kept weights
    history = [[float(-first[k].mean())] for k in range(k_flows)]
    best = [h[0] if math.isfinite(h[0]) else math.inf for h in history]
    best_state = [snapshot(k) for k in range(k_flows)]
    stale = [0] * k_flows
    epochs = [0] * k_flows
    active = [True] * k_flows
    for _epoch in range(config.max_epochs_conditional):
        perms = [torch.randperm(n, generator=g).to(device) for g in generators]
        for start in range(0, n, config.batch_size):
            idx = [perm[start : start + config.batch_size] for perm in perms]
            v = torch.stack([gather(v_tr, i, device) for i in idx])
            u = torch.stack([_padded(gather(x, i, device), width) for x, i in zip(u_tr, idx, strict=True)])
            with _autocast(device, config.autocast):
                nll = -batched_log_prob(params, buffers, v, u).mean(dim=1)  # (K,)
            if config.l2_deviation > 0:
                deviation = sum(((params[m] - anchors[m]) ** 2).flatten(1).sum(1) for m in anchored)
                nll = nll + config.l2_deviation * deviation
            finite = torch.isfinite(nll).tolist()  # one synchronisation for the K flows
            for k in range(k_flows):
                if active[k] and not finite[k]:
                    active[k] = False  # diverged: keeps its best weights
            if not any(active):
                break
            mask = torch.tensor(active, device=device)
            optimizer.zero_grad(set_to_none=True)
            nll[mask].sum().backward()
            if config.grad_clip is not None:
                _clip_per_flow([params[m] for m in trainable], config.grad_clip)
            optimizer.step()
        for k in range(k_flows):
            epochs[k] += int(active[k])
        if not any(active):
            break
        current = evaluate(v_va, u_va)
        for k in range(k_flows):
            if not active[k]:
                continue
            value = float(-current[k].mean())
            value = value if math.isfinite(value) else math.inf
            history[k].append(value)
            if value < best[k]:
                best[k], stale[k], best_state[k] = value, 0, snapshot(k)
            else:
                stale[k] += 1
                if stale[k] >= config.patience:
                    active[k] = False
        if not any(active):
            break
    with torch.no_grad():
        for k in range(k_flows):
            for name, p in params.items():
                p[k].copy_(best_state[k][name])
    logp_train = evaluate(v_tr, u_tr)
    logp_val = evaluate(v_va, u_va)
    share = (time.perf_counter() - start_time) / k_flows
    outcomes = []
    for k, conditional in enumerate(flows_):
        with torch.no_grad():
            for name, p in modules[k].named_parameters():
                p.copy_(params[name][k])
        _narrow_projection(conditional, int(sources[k][0].shape[1]))
        conditional.eval()
        outcomes.append(FitOutcome(conditional, logp_train[k], logp_val[k], epochs[k], share, history[k]))
    return outcomes


def _clip_per_flow(stacked: Sequence[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each flow's slice (index 0 of every stacked gradient) on its own."""
    grads = [p.grad for p in stacked if p.grad is not None]
    if not grads:
        return
    squares = sum(g.detach().flatten(1).pow(2).sum(1) for g in grads)  # (K,)
    coef = torch.clamp(max_norm / (squares.sqrt() + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
