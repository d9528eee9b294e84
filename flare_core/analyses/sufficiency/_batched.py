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
    TrainingData,
    as_training_data,
    gather,
    n_rows,
    row_slice,
)
from flare_core.analyses.sufficiency._training import FitOutcome, _autocast, adam, n_batches, trained_best
from flare_core.analyses.sufficiency.flow_model import (
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
    stack = _StackedFlows(marginal, sources, config)
    device = stack.device
    v_tr, v_va = as_training_data(v_train, device), as_training_data(v_val, device)
    u_tr = [as_training_data(s[0], device) for s in sources]
    u_va = [as_training_data(s[1], device) for s in sources]
    # every flow equals the marginal here: a candidate for the kept weights
    schedule = _Schedule(stack.evaluate(v_va, u_va), stack, config.patience)
    for _epoch in range(config.max_epochs_conditional):
        stack.train_epoch(v_tr, u_tr, schedule.active)
        schedule.count_epoch()
        if not any(schedule.active):
            break
        schedule.update(stack.evaluate(v_va, u_va), stack)
        if not any(schedule.active):
            break
    stack.load(schedule.best_state)
    logp_train = stack.evaluate(v_tr, u_tr)
    logp_val = stack.evaluate(v_va, u_va)
    share = (time.perf_counter() - start_time) / len(sources)
    return [
        FitOutcome(
            flow,
            logp_train[k],
            logp_val[k],
            schedule.epochs[k],
            share,
            schedule.history[k],
            trained_best(schedule.history[k]),
        )
        for k, flow in enumerate(stack.unstacked([int(u.shape[1]) for u, _, _ in sources]))
    ]


class _StackedFlows:
    """K conditional flows of one target, their parameters stacked along a leading axis (K, ...), with
    one vmapped log-likelihood and one optimiser over the trainable stacked parameters."""

    def __init__(
        self,
        marginal: Flow,
        sources: Sequence[tuple[np.ndarray | StandardizedRows, np.ndarray | StandardizedRows, int]],
        config: FlowConfig,
    ) -> None:
        self.config = config
        self.device = next(marginal.parameters()).device
        self.k_flows = len(sources)
        self.width = max(int(u_tr.shape[1]) for u_tr, _, _ in sources)
        self.flows, self.generators = [], []
        for u_train, _, seed in sources:
            self.generators.append(seed_everything(int(seed)))
            conditional = make_conditional(marginal, int(u_train.shape[1]), config, int(seed))
            _pad_projection(conditional, self.width)
            if config.autocast:
                _keep_transforms_in_float32(conditional)
            self.flows.append(conditional)
        self.modules = [_LogProb(f) for f in self.flows]
        self.params, self.buffers = stack_module_state(self.modules)  # name -> (K, ...) leaf tensors
        self.template = copy.deepcopy(self.modules[0]).to("meta")
        branch_names = {n for n in self.params if ".branch." in n}
        self.trainable = [n for n in self.params if config.train_backbone or n in branch_names]
        self.anchored = [n for n in self.trainable if not n.endswith(".A.weight")]
        self.anchors = {n: self.params[n].detach().clone() for n in self.anchored}
        for name, p in self.params.items():
            p.requires_grad_(name in self.trainable)
        trainable = [self.params[n] for n in self.trainable]
        self.optimizer = adam(trainable, config.lr, self.device, config.fused_adam, foreach=None)
        self.batched_log_prob = vmap(self._log_prob)

    def _log_prob(self, p: dict, b: dict, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return functional_call(self.template, (p, b), (v, u))

    def evaluate(self, v_data: TrainingData, u_data: list[TrainingData]) -> np.ndarray:
        """(K, n) float64 log-likelihoods of every flow on the rows of ``v_data`` / ``u_data[k]``."""
        rows, k_flows, device = n_rows(v_data), self.k_flows, self.device
        out = np.empty((k_flows, rows), dtype=np.float64)
        step = self.config.eval_batch_size
        with torch.no_grad():
            for start in range(0, rows, step):
                v = row_slice(v_data, start, start + step, device)
                u = torch.stack(
                    [_padded(row_slice(x, start, start + step, device), self.width) for x in u_data]
                )
                with _autocast(device, self.config.autocast):
                    logp = self.batched_log_prob(self.params, self.buffers, v.expand(k_flows, *v.shape), u)
                out[:, start : start + step] = logp.detach().to("cpu", torch.float64).numpy()
        return out

    def snapshot(self, k: int) -> dict[str, torch.Tensor]:
        """A copy of flow ``k``'s parameters."""
        return {name: p[k].detach().clone() for name, p in self.params.items()}

    def train_epoch(self, v_tr: TrainingData, u_tr: list[TrainingData], active: list[bool]) -> None:
        """One epoch of each flow's own batches; a flow whose loss turns non-finite stops (``active``)."""
        config, device = self.config, self.device
        n = n_rows(v_tr)
        perms = [torch.randperm(n, generator=g).to(device) for g in self.generators]
        if config.even_batches:
            splits = [perm.tensor_split(n_batches(n, config.batch_size)) for perm in perms]
        else:
            splits = [perm.split(config.batch_size) for perm in perms]
        for idx in zip(*splits, strict=True):
            v = torch.stack([gather(v_tr, i, device) for i in idx])
            u = torch.stack(
                [_padded(gather(x, i, device), self.width) for x, i in zip(u_tr, idx, strict=True)]
            )
            with _autocast(device, config.autocast):
                nll = -self.batched_log_prob(self.params, self.buffers, v, u).mean(dim=1)  # (K,)
            if config.l2_deviation > 0:
                deviation = sum(
                    ((self.params[m] - self.anchors[m]) ** 2).flatten(1).sum(1) for m in self.anchored
                )
                nll = nll + config.l2_deviation * deviation
            finite = torch.isfinite(nll).tolist()  # one synchronisation for the K flows
            for k in range(self.k_flows):
                if active[k] and not finite[k]:
                    active[k] = False  # diverged: keeps its best weights
            if not any(active):
                return
            mask = torch.tensor(active, device=device)
            self.optimizer.zero_grad(set_to_none=True)
            nll[mask].sum().backward()
            if config.grad_clip is not None:
                _clip_per_flow([self.params[m] for m in self.trainable], config.grad_clip)
            self.optimizer.step()

    def load(self, states: list[dict[str, torch.Tensor]]) -> None:
        """Set every flow's parameters to ``states[k]``."""
        with torch.no_grad():
            for k in range(self.k_flows):
                for name, p in self.params.items():
                    p[k].copy_(states[k][name])

    def unstacked(self, widths: list[int]) -> list[Flow]:
        """Each flow with its stacked parameters copied back and its projection narrowed to its source."""
        for k, conditional in enumerate(self.flows):
            with torch.no_grad():
                for name, p in self.modules[k].named_parameters():
                    p.copy_(self.params[name][k])
            _narrow_projection(conditional, widths[k])
            conditional.eval()
        return self.flows


class _Schedule:
    """Each flow's early stopping: its validation history, best value and weights, epochs and whether it
    still trains."""

    def __init__(self, first: np.ndarray, stack: _StackedFlows, patience: int) -> None:
        k_flows = len(first)
        self.patience = patience
        self.history = [[float(-first[k].mean())] for k in range(k_flows)]
        self.best = [h[0] if math.isfinite(h[0]) else math.inf for h in self.history]
        self.best_state = [stack.snapshot(k) for k in range(k_flows)]
        self.stale = [0] * k_flows
        self.epochs = [0] * k_flows
        self.active = [True] * k_flows

    def count_epoch(self) -> None:
        for k, active in enumerate(self.active):
            self.epochs[k] += int(active)

    def update(self, current: np.ndarray, stack: _StackedFlows) -> None:
        """Record the validation NLL of each active flow; keep its weights when best, stop it after
        ``patience`` epochs without improvement."""
        for k, active in enumerate(self.active):
            if not active:
                continue
            value = float(-current[k].mean())
            value = value if math.isfinite(value) else math.inf
            self.history[k].append(value)
            if value < self.best[k]:
                self.best[k], self.stale[k], self.best_state[k] = value, 0, stack.snapshot(k)
            else:
                self.stale[k] += 1
                if self.stale[k] >= self.patience:
                    self.active[k] = False


def _clip_per_flow(stacked: Sequence[torch.Tensor], max_norm: float) -> None:
    """``clip_grad_norm_`` applied to each flow's slice (index 0 of every stacked gradient) on its own."""
    grads = [p.grad for p in stacked if p.grad is not None]
    if not grads:
        return
    squares = sum(g.detach().flatten(1).pow(2).sum(1) for g in grads)  # (K,)
    coef = torch.clamp(max_norm / (squares.sqrt() + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
