"""Conditional flows trained together as one batched model (``torch.func.vmap``): those of one target,
or those of several targets of the same width.

The conditionals p(v | u_k) of a target share the marginal they start from, so their parameters have
the same shapes except the random projection A_k of the source (d_k -> r). A_k is zero-padded to the
widest source and each u_k to the same width: the padded columns multiply zeros, get zero gradients and
never move, so every flow computes what it would alone. The K flows' parameters are stacked along a
new leading axis and one vmapped log-likelihood evaluates all of them in the same kernels (batched
matrix products), which is what keeps a GPU busy with small flows.

The conditionals of targets of one width d_v have the same shapes too: each starts from its own
target's marginal (its weights and permutations are stacked like any other parameter or buffer) and
reads its own target's rows. Targets of different widths are not padded to one: a padded coordinate of
v would be a coordinate of the density, not an input that multiplies zeros.

Each flow keeps its own schedule: its own batch order (its seed), its own gradient-norm clipping and L2
penalty, its own early stopping and best weights. A flow that stops is dropped from the stacked
parameters (and from Adam's state) at the end of the epoch, so the others go on without computing it;
its kept weights are those of its best epoch. The numbers equal those of
:func:`flare_core.analyses.sufficiency.flows._fit_conditional` run flow by flow up to the rounding of batched
versus single matrix products.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

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
    _made_transforms,
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


Source = tuple[np.ndarray | StandardizedRows, np.ndarray | StandardizedRows, int]


@dataclass(frozen=True)
class TargetGroup:
    """The conditionals of one target to train: its trained ``marginal`` flow (on the device to train on;
    not modified), its standardised rows ``v_train`` (n_train, d_v) and ``v_val`` (n_val, d_v), and one
    ``(u_train (n_train, d_k), u_val (n_val, d_k), seed_k)`` per source, row-aligned with v."""

    marginal: Flow
    sources: Sequence[Source]
    v_train: np.ndarray | StandardizedRows
    v_val: np.ndarray | StandardizedRows


def fit_conditionals_batched(
    marginal: Flow,
    sources: Sequence[Source],
    v_train: np.ndarray | StandardizedRows,
    v_val: np.ndarray | StandardizedRows,
    config: FlowConfig,
) -> list[FitOutcome]:
    """Train p(v | u_k) for each ``(u_train_k, u_val_k, seed_k)`` in ``sources`` as one batched model.

    ``u_*`` (n, d_k) and ``v_*`` (n, d_v) are standardised and row-aligned; ``marginal`` is the trained
    marginal flow of v (on the device to train on; not modified). Returns one :class:`FitOutcome` per
    source, in order; ``seconds`` is the group's wall time divided among its flows.
    """
    return _fit_stacked([TargetGroup(marginal, sources, v_train, v_val)], config)[0]


def fit_conditionals_across_targets(
    groups: Sequence[TargetGroup], config: FlowConfig
) -> list[list[FitOutcome]]:
    """Train the conditionals of several targets of the same width as one batched model.

    Each flow starts from its own target's marginal and reads its own target's rows; the marginals must
    share one architecture (the same ``config`` and target width d_v: a padded target would change the
    flow's density, unlike a padded source), one device and the same numbers of training and validation
    rows. Returns, per group, one :class:`FitOutcome` per source, in order (what
    :func:`fit_conditionals_batched` returns for that group alone, up to the rounding of batched matrix
    products); ``seconds`` is the wall time divided among all the flows.
    """
    if not groups:
        raise ValueError("groups must not be empty")
    widths, devices, rows = set(), set(), set()
    for group in groups:
        if not isinstance(group.marginal, Flow):
            raise ValueError(f"marginal must be an nflows Flow, got {type(group.marginal).__name__}")
        if not group.sources:
            raise ValueError("every group needs at least one source")
        made = _made_transforms(group.marginal)
        width = made[0].features if made else int(group.v_train.shape[1])
        if int(group.v_train.shape[1]) != width or int(group.v_val.shape[1]) != width:
            raise ValueError(f"a group's v has {group.v_train.shape[1]} columns, its marginal {width}")
        widths.add(width)
        devices.add(next(group.marginal.parameters()).device)
        rows.add((n_rows(group.v_train), n_rows(group.v_val)))
        rows.update((n_rows(u_tr), n_rows(u_va)) for u_tr, u_va, _ in group.sources)
    if len(widths) > 1:
        raise ValueError(f"the targets must have one width to be batched together, got {sorted(widths)}")
    if len(devices) > 1:
        raise ValueError(f"the marginals must be on one device, got {sorted(map(str, devices))}")
    if len(rows) > 1:
        raise ValueError(f"every array must have the same training and validation rows, got {sorted(rows)}")
    return _fit_stacked(groups, config)


# gradients on whatever mode the calling thread was left in (as ``_training._train``)
@torch.enable_grad()
def _fit_stacked(groups: Sequence[TargetGroup], config: FlowConfig) -> list[list[FitOutcome]]:
    """Every source of every group as one stacked model: per group, one outcome per source, in order."""
    start_time = time.perf_counter()
    stack = _StackedFlows(groups, config)
    device = stack.device
    v_tr = [as_training_data(g.v_train, device) for g in groups]
    v_va = [as_training_data(g.v_val, device) for g in groups]
    sources = [s for g in groups for s in g.sources]
    u_tr = [as_training_data(s[0], device) for s in sources]
    u_va = [as_training_data(s[1], device) for s in sources]
    # every flow equals its marginal here: a candidate for the kept weights
    schedule = _Schedule(stack.evaluate(v_va, u_va), stack, config.patience)
    for _epoch in range(config.max_epochs_conditional):
        stack.train_epoch(v_tr, u_tr, schedule.active)
        schedule.count_epoch()
        if not any(schedule.active):
            break
        schedule.update(stack.evaluate(v_va, u_va), stack)
        if not any(schedule.active):
            break
        stack.keep_active(schedule.active)
    stack.load(schedule.best_state)
    logp_train = stack.evaluate(v_tr, u_tr)
    logp_val = stack.evaluate(v_va, u_va)
    share = (time.perf_counter() - start_time) / len(sources)
    flows = stack.unstacked([int(u.shape[1]) for u, _, _ in sources])
    outcomes = [
        FitOutcome(
            flow,
            logp_train[k],
            logp_val[k],
            schedule.epochs[k],
            share,
            schedule.history[k],
            trained_best(schedule.history[k]),
        )
        for k, flow in enumerate(flows)
    ]
    out, first = [], 0
    for group in groups:
        out.append(outcomes[first : first + len(group.sources)])
        first += len(group.sources)
    return out


class _StackedFlows:
    """The conditional flows of one or more targets, their parameters stacked along a leading axis
    (K, ...), with one vmapped log-likelihood and one optimiser over the trainable stacked parameters.

    Flow k (in the order of the groups, then of their sources) is the conditional of target
    ``target_of[k]``. While training, the stacked rows hold the flows still training (``live``, flow
    indices): :meth:`keep_active` drops a stopped flow's row and its optimiser state, so it costs no more
    computation; its kept weights are the snapshot of its best epoch.
    """

    def __init__(self, groups: Sequence[TargetGroup], config: FlowConfig) -> None:
        self.config = config
        self.device = next(groups[0].marginal.parameters()).device
        self.target_of = [t for t, g in enumerate(groups) for _ in g.sources]
        self.k_flows = len(self.target_of)
        self.width = max(int(u_tr.shape[1]) for g in groups for u_tr, _, _ in g.sources)
        self.flows, self.generators = [], []
        for group in groups:
            for u_train, _, seed in group.sources:
                self.generators.append(seed_everything(int(seed)))
                conditional = make_conditional(group.marginal, int(u_train.shape[1]), config, int(seed))
                _pad_projection(conditional, self.width)
                if config.autocast:
                    _keep_transforms_in_float32(conditional)
                self.flows.append(conditional)
        self.modules = [_LogProb(f) for f in self.flows]
        self.params, self.all_buffers = stack_module_state(self.modules)  # name -> (K, ...) leaf tensors
        self.buffers = self.all_buffers
        self.live = list(range(self.k_flows))
        self.template = copy.deepcopy(self.modules[0]).to("meta")
        branch_names = {n for n in self.params if ".branch." in n}
        self.trainable = [n for n in self.params if config.train_backbone or n in branch_names]
        self.anchored = [n for n in self.trainable if not n.endswith(".A.weight")]
        self.anchors = {n: self.params[n].detach().clone() for n in self.anchored}
        for name, p in self.params.items():
            p.requires_grad_(name in self.trainable)
        self.optimizer = self._adam()
        self.batched_log_prob = vmap(self._log_prob)

    def _adam(self) -> torch.optim.Adam:
        trainable = [self.params[n] for n in self.trainable]
        return adam(trainable, self.config.lr, self.device, self.config.fused_adam, foreach=None)

    def _log_prob(self, p: dict, b: dict, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return functional_call(self.template, (p, b), (v, u))

    def _targets_rows(self, rows: dict[int, torch.Tensor]) -> torch.Tensor:
        """(len(live), b, d_v): each live flow's own target rows, from ``rows`` (target -> (b, d_v))."""
        return torch.stack([rows[self.target_of[k]] for k in self.live])

    def evaluate(self, v_data: list[TrainingData], u_data: list[TrainingData]) -> np.ndarray:
        """(len(live), n) float64 log-likelihoods of every live flow k on the rows of its target's
        ``v_data[target_of[k]]`` and its source's ``u_data[k]``."""
        n, live, device = n_rows(v_data[0]), self.live, self.device
        targets = sorted({self.target_of[k] for k in live})
        out = np.empty((len(live), n), dtype=np.float64)
        step = self.config.eval_batch_size
        with torch.no_grad():
            for start in range(0, n, step):
                rows = {t: row_slice(v_data[t], start, start + step, device) for t in targets}
                v = self._targets_rows(rows)
                u = torch.stack(
                    [_padded(row_slice(u_data[k], start, start + step, device), self.width) for k in live]
                )
                with _autocast(device, self.config.autocast):
                    logp = self.batched_log_prob(self.params, self.buffers, v, u)
                out[:, start : start + step] = logp.detach().to("cpu", torch.float64).numpy()
        return out

    def snapshot(self, k: int) -> dict[str, torch.Tensor]:
        """A copy of (live) flow ``k``'s parameters."""
        row = self.live.index(k)
        return {name: p[row].detach().clone() for name, p in self.params.items()}

    def train_epoch(self, v_tr: list[TrainingData], u_tr: list[TrainingData], active: list[bool]) -> None:
        """One epoch of each live flow's own batches; a flow whose loss turns non-finite stops (``active``,
        indexed by flow)."""
        config, device, live = self.config, self.device, self.live
        n = n_rows(v_tr[0])
        perms = [torch.randperm(n, generator=self.generators[k]).to(device) for k in live]
        if config.even_batches:
            splits = [perm.tensor_split(n_batches(n, config.batch_size)) for perm in perms]
        else:
            splits = [perm.split(config.batch_size) for perm in perms]
        for idx in zip(*splits, strict=True):
            v = torch.stack(
                [gather(v_tr[self.target_of[k]], i, device) for k, i in zip(live, idx, strict=True)]
            )
            u = torch.stack(
                [_padded(gather(u_tr[k], i, device), self.width) for k, i in zip(live, idx, strict=True)]
            )
            with _autocast(device, config.autocast):
                nll = -self.batched_log_prob(self.params, self.buffers, v, u).mean(dim=1)  # (live,)
            if config.l2_deviation > 0:
                deviation = sum(
                    ((self.params[m] - self.anchors[m]) ** 2).flatten(1).sum(1) for m in self.anchored
                )
                nll = nll + config.l2_deviation * deviation
            finite = torch.isfinite(nll).tolist()  # one synchronisation for the live flows
            for row, k in enumerate(live):
                if active[k] and not finite[row]:
                    active[k] = False  # diverged: keeps its best weights
            if not any(active[k] for k in live):
                return
            mask = torch.tensor([active[k] for k in live], device=device)
            self.optimizer.zero_grad(set_to_none=True)
            nll[mask].sum().backward()
            if config.grad_clip is not None:
                _clip_per_flow([self.params[m] for m in self.trainable], config.grad_clip)
            self.optimizer.step()

    def keep_active(self, active: list[bool]) -> None:
        """Drop the rows of the live flows that stopped (``active[k]`` False) from the stacked parameters,
        buffers, anchors and Adam's state; the others' rows and state are carried over unchanged."""
        rows = [row for row, k in enumerate(self.live) if active[k]]
        if not rows or len(rows) == len(self.live):
            return
        index = torch.tensor(rows, device=self.device)
        old, state = self.params, self.optimizer.state
        self.params = {name: p.detach().index_select(0, index) for name, p in old.items()}
        for name, p in self.params.items():
            p.requires_grad_(name in self.trainable)
        self.buffers = {name: b.index_select(0, index) for name, b in self.buffers.items()}
        self.anchors = {name: a.index_select(0, index) for name, a in self.anchors.items()}
        self.optimizer = self._adam()
        for name in self.trainable:
            moments = state.get(old[name])
            if moments:  # step counts are shared (every live flow took every step); moments per row
                self.optimizer.state[self.params[name]] = {
                    key: value.index_select(0, index) if value.dim() else value.clone()
                    for key, value in moments.items()
                }
        self.live = [self.live[row] for row in rows]

    def load(self, states: list[dict[str, torch.Tensor]]) -> None:
        """Set every flow's parameters to ``states[k]`` (every flow live again, for evaluation)."""
        with torch.no_grad():
            self.params = {name: torch.stack([s[name] for s in states]) for name in self.params}
        self.buffers = self.all_buffers
        self.live = list(range(self.k_flows))

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
        """Record the validation NLL of each active flow (``current`` (len(live), n_val), the rows of
        ``stack.live``); keep its weights when best, stop it after ``patience`` epochs without improvement."""
        for row, k in enumerate(stack.live):
            if not self.active[k]:
                continue
            value = float(-current[row].mean())
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
