"""EMIR / KNIFE estimator: a diagonal Gaussian mixture marginal and an MLP-parametrised conditional.

Marginal p(v): ``n_modes`` diagonal Gaussians with learnable logits, means and log-scales; the std of
every component and dimension is ``exp(log_scale_bound * tanh(raw))`` (EMIR's ``exp(tanh(.))`` for the
default bound 1). Conditional p(v|u): an MLP ``2 x (LayerNorm -> Linear -> ReLU)`` of width ``d_v``
(by default) maps u to mixture logits (K,), means (K, d_v) and raw log-scales (K, d_v).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from flare_core.analyses.sufficiency._config import DictConfig
from flare_core.analyses.sufficiency._rows import as_training_data, gather
from flare_core.analyses.sufficiency._training import FitOutcome, _train
from flare_core.analyses.sufficiency.estimator import Estimator, TrainingArray
from flare_core.checks import check_choice, check_int, check_number
from flare_core.device import seed_everything

_LOG_2PI = math.log(2 * math.pi)
_EVALUATE_ON = ("val", "train")


@dataclass(frozen=True)
class GMMConfig(DictConfig):
    """Hyper-parameters of the EMIR/KNIFE estimator.

    Reference (EMIR) training is Adam 1e-3, batch 128, 5 epochs for the marginal and 10 for the
    conditional, evaluated on the training data: :meth:`emir` reproduces it (``evaluate_on="train"``
    trains on every row for a fixed number of epochs and evaluates on the same rows). The default
    instead holds out a validation split and early-stops on it (patience 3, at most 30 / 30 epochs,
    best weights kept) with Adam 3e-3 (a 6-model matrix, dims 50-768, 2,000 texts: about 2.7 minutes
    on a 2-core CPU): within the same epoch budget 1e-3 stops short of convergence
    (on a 32-d Gaussian check it recovered 76% of the true IS against 80% for 3e-3).
    """

    n_modes: int = 8
    hidden_features: int | None = None
    log_scale_bound: float = 1.0
    lr: float = 3e-3
    batch_size: int = 128
    max_epochs: int = 30
    max_epochs_conditional: int = 30
    patience: int = 3
    evaluate_on: str = "val"
    grad_clip: float | None = 5.0
    eval_batch_size: int = 1024

    def __post_init__(self) -> None:
        self._require_positive_ints(
            "n_modes", "batch_size", "max_epochs", "max_epochs_conditional", "patience", "eval_batch_size"
        )
        self._require_optimiser_settings()
        check_int(self.hidden_features, "hidden_features", min_value=1, allow_none=True)
        check_number(self.log_scale_bound, "log_scale_bound", min_value=0, include_min=False)
        check_choice(self.evaluate_on, "evaluate_on", _EVALUATE_ON)

    @classmethod
    def emir(cls) -> GMMConfig:
        """EMIR's protocol: 5 / 10 epochs, no early stopping, NLLs measured on the training rows."""
        return cls(lr=1e-3, max_epochs=5, max_epochs_conditional=10, evaluate_on="train")

    @classmethod
    def fast(cls) -> GMMConfig:
        """A small preset for tests and demos (fewer epochs)."""
        return cls(max_epochs=20, max_epochs_conditional=20, patience=2)


def _mixture_log_prob(
    v: torch.Tensor, logits: torch.Tensor, means: torch.Tensor, log_scales: torch.Tensor
) -> torch.Tensor:
    """log p(v) (n,) of diagonal mixtures: v (n, d), logits (n|1, K), means and log_scales (n|1, K, d)."""
    z = (v.unsqueeze(1) - means) * torch.exp(-log_scales)
    comp = -0.5 * (z * z).sum(-1) - log_scales.sum(-1) - 0.5 * v.shape[1] * _LOG_2PI
    return torch.logsumexp(torch.log_softmax(logits, dim=-1) + comp, dim=-1)


class DiagonalGMM(nn.Module):
    """Marginal mixture: ``forward(v (n, d)) -> log p(v) (n,)``."""

    def __init__(self, features: int, n_modes: int, log_scale_bound: float, init_means: torch.Tensor) -> None:
        super().__init__()
        self.log_scale_bound = log_scale_bound
        self.logits = nn.Parameter(torch.zeros(n_modes))
        self.means = nn.Parameter(init_means.clone().reshape(n_modes, features))
        self.raw_scales = nn.Parameter(torch.zeros(n_modes, features))

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        log_scales = self.log_scale_bound * torch.tanh(self.raw_scales)
        return _mixture_log_prob(v, self.logits[None], self.means[None], log_scales[None])


class ConditionalGMM(nn.Module):
    """Conditional mixture: ``forward(v (n, d_v), u (n, d_u)) -> log p(v|u) (n,)``."""

    def __init__(
        self, context_features: int, features: int, n_modes: int, hidden: int, log_scale_bound: float
    ):
        super().__init__()
        self.features, self.n_modes, self.log_scale_bound = features, n_modes, log_scale_bound
        self.trunk = nn.Sequential(
            nn.LayerNorm(context_features),
            nn.Linear(context_features, hidden),
            nn.ReLU(),
            nn.LayerNorm(hidden),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.logits = nn.Linear(hidden, n_modes)
        self.means = nn.Linear(hidden, n_modes * features)
        self.raw_scales = nn.Linear(hidden, n_modes * features)

    def forward(self, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        h = self.trunk(u)
        shape = (-1, self.n_modes, self.features)
        log_scales = self.log_scale_bound * torch.tanh(self.raw_scales(h).reshape(shape))
        return _mixture_log_prob(v, self.logits(h), self.means(h).reshape(shape), log_scales)


def _fit_marginal(
    v_train: np.ndarray, v_val: np.ndarray, config: GMMConfig, seed: int, device: torch.device
) -> FitOutcome:
    generator = seed_everything(seed)
    n, d = v_train.shape
    pick = torch.randint(0, n, (config.n_modes,), generator=generator)
    train = [as_training_data(v_train, device)]
    val = [as_training_data(v_val, device)]
    start_means = gather(train[0], pick.to(device), device)
    model = DiagonalGMM(d, config.n_modes, config.log_scale_bound, start_means).to(device)
    return _train(
        model,
        lambda batch: model(batch[0]),
        list(model.parameters()),
        train,
        val,
        lr=config.lr,
        batch_size=config.batch_size,
        max_epochs=config.max_epochs,
        patience=config.patience,
        generator=generator,
        early_stopping=config.evaluate_on == "val",
        grad_clip=config.grad_clip,
        eval_batch_size=config.eval_batch_size,
    )


def _fit_conditional(
    u_train: np.ndarray,
    v_train: np.ndarray,
    u_val: np.ndarray,
    v_val: np.ndarray,
    config: GMMConfig,
    seed: int,
    device: torch.device,
) -> FitOutcome:
    generator = seed_everything(seed)
    d_v = v_train.shape[1]
    hidden = config.hidden_features or d_v
    model = ConditionalGMM(u_train.shape[1], d_v, config.n_modes, hidden, config.log_scale_bound).to(device)
    train = [as_training_data(v_train, device), as_training_data(u_train, device)]
    val = [as_training_data(v_val, device), as_training_data(u_val, device)]
    return _train(
        model,
        lambda batch: model(batch[0], batch[1]),
        list(model.parameters()),
        train,
        val,
        lr=config.lr,
        batch_size=config.batch_size,
        max_epochs=config.max_epochs_conditional,
        patience=config.patience,
        generator=generator,
        early_stopping=config.evaluate_on == "val",
        grad_clip=config.grad_clip,
        eval_batch_size=config.eval_batch_size,
    )


class GMMEstimator(Estimator):
    """EMIR/KNIFE's estimator: a diagonal mixture marginal and an MLP-parametrised mixture conditional.

    Means of the marginal start at ``n_modes`` training rows drawn with the seed. With
    ``config.evaluate_on == "train"`` there is no early stopping (fixed epochs) and the matrix measures
    the NLLs on the training rows, as EMIR does.
    """

    name = "gmm"
    config_type = GMMConfig

    def evaluates_on_training_rows(self, config: GMMConfig) -> bool:
        return config.evaluate_on == "train"

    def _fit_marginal(
        self, v_train: TrainingArray, v_val: TrainingArray, config: GMMConfig, seed: int, device: torch.device
    ) -> FitOutcome:
        return _fit_marginal(v_train, v_val, config, seed, device)

    def _fit_conditional(
        self,
        u_train: TrainingArray,
        v_train: TrainingArray,
        u_val: TrainingArray,
        v_val: TrainingArray,
        config: GMMConfig,
        seed: int,
        device: torch.device,
        marginal: nn.Module | None,
    ) -> FitOutcome:
        return _fit_conditional(u_train, v_train, u_val, v_val, config, seed, device)
