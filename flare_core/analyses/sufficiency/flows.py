"""FLARE's flow estimator: training the marginal flow and the conditionals fine-tuned from it
(the architecture is :mod:`flare_core.analyses.sufficiency.flow_model`).

Training the conditional minimises the conditional NLL plus an L2 penalty towards the marginal::

    l2_deviation * ( sum_backbone ||theta - phi||^2 + sum ||B||^2 )

i.e. the squared distance of all parameters from their starting values, except A (random, and inert
when B = 0). The penalty is not part of any reported NLL.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch
from nflows.flows.base import Flow
from torch import nn

from flare_core.analyses.sufficiency._batched import (
    TargetGroup,
    fit_conditionals_across_targets,
    fit_conditionals_batched,
)
from flare_core.analyses.sufficiency._rows import StandardizedRows, as_training_data
from flare_core.analyses.sufficiency._training import FitOutcome, _train
from flare_core.analyses.sufficiency.estimator import Estimator, TargetSources, TrainingArray
from flare_core.analyses.sufficiency.flow_model import (
    FlowConfig,
    _build_flow,
    _keep_transforms_in_float32,
    _made_transforms,
    branches,
    build_marginal,
    make_conditional,
)
from flare_core.device import seed_everything

__all__ = ["FlowConfig", "FlowEstimator"]

#: The configuration fields a run sets besides the preset (a resumed run: as its stored units were trained).
RUN_OPTIONS = ("autocast", "batch_conditionals", "batch_targets", "even_batches", "fused_adam")


def _fit_marginal(
    v_train: np.ndarray | StandardizedRows,
    v_val: np.ndarray | StandardizedRows,
    config: FlowConfig,
    seed: int,
    device: torch.device,
) -> FitOutcome:
    generator = seed_everything(seed)
    flow = _build_flow(v_train.shape[1], config, generator).to(device)
    if config.autocast:
        _keep_transforms_in_float32(flow)
    train, val = [as_training_data(v_train, device)], [as_training_data(v_val, device)]
    return _train(
        flow,
        lambda batch: flow.log_prob(batch[0]),
        list(flow.parameters()),
        train,
        val,
        lr=config.lr,
        batch_size=config.batch_size,
        max_epochs=config.max_epochs,
        patience=config.patience,
        generator=generator,
        grad_clip=config.grad_clip,
        eval_batch_size=config.eval_batch_size,
        autocast=config.autocast,
        even_batches=config.even_batches,
        fused=config.fused_adam,
    )


def _deviation_penalty(conditional: Flow, config: FlowConfig) -> tuple[list[nn.Parameter], Any]:
    """Trainable parameters and the L2-to-marginal penalty closure of a conditional flow."""
    anchors: list[tuple[nn.Parameter, torch.Tensor]] = []
    params: list[nn.Parameter] = []
    branch_params = set()
    for branch in branches(conditional):
        params.extend(branch.parameters())
        branch_params.update(id(p) for p in branch.parameters())
        anchors.extend((p, torch.zeros_like(p)) for p in branch.B.parameters())
    if config.train_backbone:
        for p in conditional.parameters():
            if id(p) not in branch_params:
                params.append(p)
                anchors.append((p, p.detach().clone()))
    weight = config.l2_deviation
    moving = [p for p, _ in anchors]
    origins = [a for _, a in anchors]

    def penalty() -> torch.Tensor:
        # one multi-tensor subtraction and norm for all parameters rather than a Python loop over them
        deviations = torch._foreach_sub(moving, origins)
        return weight * torch.stack(torch._foreach_norm(deviations)).square().sum()

    return params, (penalty if weight > 0 else None)


def _fit_conditional(
    marginal: Flow,
    u_train: np.ndarray | StandardizedRows,
    v_train: np.ndarray | StandardizedRows,
    u_val: np.ndarray | StandardizedRows,
    v_val: np.ndarray | StandardizedRows,
    config: FlowConfig,
    seed: int,
) -> FitOutcome:
    generator = seed_everything(seed)
    device = next(marginal.parameters()).device
    conditional = make_conditional(marginal, u_train.shape[1], config, seed)
    if config.autocast:
        _keep_transforms_in_float32(conditional)
    if not config.train_backbone:
        for p in conditional.parameters():
            p.requires_grad_(False)
        for branch in branches(conditional):
            for p in branch.parameters():
                p.requires_grad_(True)
    params, penalty = _deviation_penalty(conditional, config)
    train = [as_training_data(v_train, device), as_training_data(u_train, device)]
    val = [as_training_data(v_val, device), as_training_data(u_val, device)]
    return _train(
        conditional,
        lambda batch: conditional.log_prob(batch[0], context=batch[1]),
        params,
        train,
        val,
        lr=config.lr,
        batch_size=config.batch_size,
        max_epochs=config.max_epochs_conditional,
        patience=config.patience,
        generator=generator,
        evaluate_initial=True,
        penalty=penalty,
        grad_clip=config.grad_clip,
        eval_batch_size=config.eval_batch_size,
        autocast=config.autocast,
        even_batches=config.even_batches,
        fused=config.fused_adam,
    )


class FlowEstimator(Estimator):
    """FLARE's estimator: a marginal flow p_phi(v), and conditionals p_theta(v | u) fine-tuned from it.

    The conditional's initial model (equal to the marginal) is a candidate for the kept weights, so the
    validation IS is never negative by more than rounding. With ``batch_conditionals`` > 1 the
    conditionals of one target are trained together as one vmapped model (:mod:`._batched`), and with
    ``batch_targets`` > 1 those of several targets of one width too.
    """

    name = "flow"
    config_type = FlowConfig
    uses_marginal = True

    def run_config(self, preset: str, **options: Any) -> FlowConfig:
        """``fast``: :meth:`FlowConfig.fast`; ``default`` and ``paper`` (which differ in the whitened width
        a run fits in, not in the flow): FLARE's flow, :class:`FlowConfig`."""
        config = FlowConfig.fast() if preset == "fast" else FlowConfig()
        known = {name: options[name] for name in RUN_OPTIONS if name in options}
        return dataclasses.replace(config, **known)

    def marginal_weights(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def restore_marginal(
        self,
        weights: dict[str, torch.Tensor] | None,
        features: int,
        config: FlowConfig,
        seed: int,
        device: torch.device,
    ) -> Flow:
        if weights is None:
            raise ValueError("a conditional flow needs its target's marginal weights")
        marginal = build_marginal(features, config, seed).to(device)
        marginal.load_state_dict(weights)
        marginal.eval()
        return marginal

    def group_size(self, config: FlowConfig) -> int:
        return config.batch_conditionals

    def fit_conditional_group(
        self,
        marginal: nn.Module | None,
        sources: list[tuple[TrainingArray, TrainingArray, int]],
        v_train: TrainingArray,
        v_val: TrainingArray,
        config: FlowConfig,
    ) -> list[FitOutcome]:
        assert isinstance(marginal, Flow)
        return fit_conditionals_batched(marginal, sources, v_train, v_val, config)

    def targets_per_batch(self, config: FlowConfig) -> int:
        return config.batch_targets

    def fit_conditional_batch(
        self,
        groups: list[TargetSources],
        config: FlowConfig,
    ) -> list[list[FitOutcome]]:
        targets = []
        for marginal, sources, v_train, v_val in groups:
            assert isinstance(marginal, Flow)
            targets.append(TargetGroup(marginal, sources, v_train, v_val))
        return fit_conditionals_across_targets(targets, config)

    def _marginal_features(self, marginal: nn.Module | None) -> int | None:
        if not isinstance(marginal, Flow):
            raise ValueError(f"marginal must be an nflows Flow, got {type(marginal).__name__}")
        made = _made_transforms(marginal)
        return made[0].features if made else None

    def _fit_marginal(
        self,
        v_train: TrainingArray,
        v_val: TrainingArray,
        config: FlowConfig,
        seed: int,
        device: torch.device,
    ) -> FitOutcome:
        return _fit_marginal(v_train, v_val, config, seed, device)

    def _fit_conditional(
        self,
        u_train: TrainingArray,
        v_train: TrainingArray,
        u_val: TrainingArray,
        v_val: TrainingArray,
        config: FlowConfig,
        seed: int,
        device: torch.device,
        marginal: nn.Module | None,
    ) -> FitOutcome:
        assert isinstance(marginal, Flow)
        return _fit_conditional(marginal, u_train, v_train, u_val, v_val, config, seed)
