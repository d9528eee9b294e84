"""The FLARE flow architecture: a marginal flow p_phi(v) and a low-rank conditional flow p_theta(v|u).

Stage 1 trains a masked autoregressive flow (MAF, or an autoregressive neural spline flow with linear
tails) on the standardised target V. Stage 2 copies it and adds, to every MADE conditioner, a low-rank
branch of the source U::

    h_cond = h_base + B(A(u)),   A: d_u -> r (random init),  B: r -> hidden (zero init)

The branch output is added linearly (no activation) to the pre-activation features of the MADE's first
hidden layer (the output of ``initial_layer``, which is the residual stream entering the residual
blocks). nflows' own context path, ``relu(context_layer(c))``, would have zero gradient at a zero-init
branch; this one does not. Because B starts at exactly zero, the conditional flow starts exactly equal to
the marginal flow for every u. Training is :mod:`flare_core.analyses.sufficiency.flows`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from nflows.distributions.normal import StandardNormal
from nflows.flows.base import Flow
from nflows.transforms.autoregressive import (
    AutoregressiveTransform,
    MaskedAffineAutoregressiveTransform,
    MaskedPiecewiseRationalQuadraticAutoregressiveTransform,
)
from nflows.transforms.base import CompositeTransform
from nflows.transforms.made import MADE
from nflows.transforms.permutations import Permutation
from torch import nn

from flare_core.analyses.sufficiency._config import DictConfig
from flare_core.checks import check_bool, check_choice, check_int, check_number
from flare_core.device import seed_everything

_FLOWS = ("maf", "nsf")


@dataclass(frozen=True)
class FlowConfig(DictConfig):
    """Hyper-parameters of the FLARE flow estimator.

    Defaults are sized for a 6-model matrix (dims 50-768) on 2,000 texts on a 2-core CPU (about
    2.5 minutes measured with ``bench/speed/sufficiency_matrix.py``: 6 marginals + 30 conditionals): 4 MAF
    transforms with random permutations between them, MADE conditioners with 128 hidden units and one
    residual block, Adam 1e-3, batch 256, at most 40 epochs, early stopping after 4 epochs without
    improvement of the validation NLL (best weights kept). With hidden units fewer than d_v, a MADE
    conditions each output on at most the first ``hidden_features`` inputs of its ordering; the random
    permutations change that ordering between transforms. The conditional flow is fine-tuned from the
    marginal (``train_backbone``) with a rank-64 branch and ``l2_deviation`` 1e-3.

    ``autocast`` (for GPUs with bfloat16 tensor cores) runs the MADE conditioners' matrix products in
    bfloat16 and casts each conditioner's output back to float32, so the affine or spline transform, its
    log|det J| and the base log-density are computed and summed in float32.

    ``batch_conditionals`` > 1 trains up to that many conditionals of one target together, stacked into
    one vmapped model in one task (:mod:`flare_core.analyses.sufficiency._batched`): the same numbers up to
    the rounding of batched matrix products, in fewer and larger kernels. ``batch_targets`` > 1 stacks the
    groups of up to that many targets of the same width (after whitening) into one such model, each flow
    starting from its own target's marginal: the same numbers again, but on a CPU hardly faster, so it
    is off (1) by default. One torch thread on 2 busy cores (``bench/speed/all_target_flows.py``): the
    conditionals of 6 models × 2,000 texts, default preset, width 32, took 33.0 s per target and 31.5 s
    all targets together (1.05×), of 16 models × 1,000 texts 139 s and 134 s (1.03×).

    ``even_batches`` splits each epoch into mini-batches of nearly ``batch_size`` rows (1,800 training
    rows: 7 of 257 rather than 7 of 256 and a last one of 8, a noisy step that costs as much as a full
    one); ``fused_adam`` takes Adam's fused update on CPU and CUDA (the same update up to rounding, in one
    kernel). Together they make a conditional's epoch about a fifth cheaper (``bench/speed/flows_stage.py``).
    Stores written before these fields existed were trained without them (and resume so).
    """

    flow: str = "maf"
    n_transforms: int = 4
    hidden_features: int = 128
    n_blocks: int = 1
    rank: int = 64
    num_bins: int = 8
    tail_bound: float = 4.0
    lr: float = 1e-3
    batch_size: int = 256
    max_epochs: int = 40
    max_epochs_conditional: int = 40
    patience: int = 4
    l2_deviation: float = 1e-3
    train_backbone: bool = True
    grad_clip: float | None = 5.0
    eval_batch_size: int = 2048
    autocast: bool = False
    batch_conditionals: int = 1
    batch_targets: int = 1
    even_batches: bool = True
    fused_adam: bool = True

    def __post_init__(self) -> None:
        check_choice(self.flow, "flow", _FLOWS)
        self._require_positive_ints(
            "n_transforms",
            "hidden_features",
            "n_blocks",
            "rank",
            "num_bins",
            "batch_size",
            "max_epochs",
            "max_epochs_conditional",
            "patience",
            "eval_batch_size",
            "batch_conditionals",
            "batch_targets",
        )
        self._require_optimiser_settings()
        check_number(self.tail_bound, "tail_bound", min_value=0, include_min=False)
        check_number(self.l2_deviation, "l2_deviation", min_value=0)
        for name in ("batch_conditionals", "batch_targets"):
            if getattr(self, name) > 1 and self.flow != "maf":
                raise ValueError(f"{name} > 1 needs flow='maf' (vmap cannot batch the spline's tail masks)")
        for name in ("autocast", "even_batches", "fused_adam"):
            check_bool(getattr(self, name), name)

    @classmethod
    def fast(cls) -> FlowConfig:
        """A small preset for tests and demos: 2 MAF transforms, 64 hidden units, rank 16."""
        return cls(
            n_transforms=2, hidden_features=64, rank=16, max_epochs=30, max_epochs_conditional=30, patience=3
        )


class LowRankBranch(nn.Module):
    """``u (n, d_u) -> B(A(u)) (n, hidden)``: A random-init, B zero-init, both without bias.

    Without biases the branch is a rank-r linear map of the (standardised, zero-mean) source, so it
    cannot add a u-independent offset that would improve the marginal fit and pass for information.
    """

    def __init__(
        self, context_features: int, hidden_features: int, rank: int, generator: torch.Generator
    ) -> None:
        super().__init__()
        self.A = nn.Linear(context_features, rank, bias=False)
        self.B = nn.Linear(rank, hidden_features, bias=False)
        bound = 1.0 / np.sqrt(context_features)
        with torch.no_grad():
            self.A.weight.copy_(torch.empty_like(self.A.weight).uniform_(-bound, bound, generator=generator))
            self.B.weight.zero_()

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        return self.B(self.A(context))


class ConditionedMADE(nn.Module):
    """A MADE whose first hidden layer receives ``+ B(A(u))`` linearly (pre-activation).

    ``forward(inputs (n, d_v), context (n, d_u) | None) -> (n, d_v * multiplier)``. With context None
    (or B = 0) the output equals the wrapped MADE's output exactly.
    """

    def __init__(self, made: MADE, context_features: int, rank: int, generator: torch.Generator) -> None:
        super().__init__()
        self.made = made
        hidden = made.initial_layer.out_features
        self.branch = LowRankBranch(context_features, hidden, rank, generator)

    def forward(self, inputs: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        made = self.made
        temps = made.initial_layer(inputs)
        if context is not None:
            temps = temps + self.branch(context)
        if not made.use_residual_blocks:
            temps = made.activation(temps)
        for block in made.blocks:
            temps = block(temps, None)
        return made.final_layer(temps)


def _build_flow(features: int, config: FlowConfig, generator: torch.Generator) -> Flow:
    """A MAF/NSF flow on R^features; permutations drawn from ``generator``."""
    layers: list[nn.Module] = []
    for _ in range(config.n_transforms):
        layers.append(Permutation(torch.randperm(features, generator=generator)))
        if config.flow == "maf":
            layers.append(
                MaskedAffineAutoregressiveTransform(
                    features=features, hidden_features=config.hidden_features, num_blocks=config.n_blocks
                )
            )
        else:
            layers.append(
                MaskedPiecewiseRationalQuadraticAutoregressiveTransform(
                    features=features,
                    hidden_features=config.hidden_features,
                    num_blocks=config.n_blocks,
                    num_bins=config.num_bins,
                    tails="linear",
                    tail_bound=config.tail_bound,
                )
            )
    return Flow(CompositeTransform(layers), StandardNormal([features]))


def _made_transforms(flow: Flow) -> list[AutoregressiveTransform]:
    return [t for t in flow._transform._transforms if isinstance(t, AutoregressiveTransform)]


def _float32_output(module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.float()


def _keep_transforms_in_float32(flow: Flow) -> Flow:
    """Cast every conditioner's output to float32 (under autocast its last layer returns bfloat16)."""
    for transform in _made_transforms(flow):
        net = transform.autoregressive_net
        if _float32_output not in net._forward_hooks.values():
            net.register_forward_hook(_float32_output)
    return flow


def make_conditional(marginal: Flow, context_features: int, config: FlowConfig, seed: int) -> Flow:
    """Deep-copy ``marginal`` and wrap each MADE in a :class:`ConditionedMADE` of rank ``config.rank``.

    The returned flow's ``log_prob(v (n, d_v), context=u (n, d_u))`` equals the marginal's
    ``log_prob(v)`` exactly until B is trained. A is initialised from a generator seeded by ``seed``.
    """
    if not isinstance(marginal, Flow):
        raise ValueError(f"marginal must be an nflows Flow, got {type(marginal).__name__}")
    check_int(context_features, "context_features", min_value=1)
    generator = torch.Generator().manual_seed(int(seed))
    conditional = copy.deepcopy(marginal)
    device = next(marginal.parameters()).device
    for transform in _made_transforms(conditional):
        made = transform.autoregressive_net
        if isinstance(made, ConditionedMADE):
            raise ValueError("marginal already carries a conditioning branch")
        transform.autoregressive_net = ConditionedMADE(made, context_features, config.rank, generator)
    return conditional.to(device)


def branches(conditional: Flow) -> list[LowRankBranch]:
    """The low-rank branches of a conditional flow, one per MADE."""
    return [t.autoregressive_net.branch for t in _made_transforms(conditional)]


def build_marginal(features: int, config: FlowConfig, seed: int) -> Flow:
    """An untrained marginal flow with the architecture :meth:`FlowEstimator.fit_marginal` uses for ``seed``.

    Used to reload saved weights: ``build_marginal(d, cfg, seed).load_state_dict(state)``.
    """
    check_int(features, "features", min_value=1)
    return _build_flow(features, config, seed_everything(int(seed)))
