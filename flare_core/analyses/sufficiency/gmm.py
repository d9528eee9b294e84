"""The mixture estimator (EMIR / KNIFE): a Gaussian-mixture marginal and an MLP-parametrised conditional.

Marginal p(v): ``n_modes`` Gaussians with learnable logits, means and log-scales; the std of every
component and dimension is ``exp(log_scale_bound * tanh(raw))`` (EMIR's ``exp(tanh(.))`` for the
default bound 1). Conditional p(v|u): an MLP ``2 x (LayerNorm -> Linear -> ReLU)`` maps u to mixture
logits (K,), means (K, d_v) and raw log-scales (K, d_v); :class:`GMMConfig` says which of KNIFE's parts
the default keeps and why.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from flare_core.analyses.sufficiency._config import DictConfig
from flare_core.analyses.sufficiency._rows import TrainingData, as_training_data, gather, n_rows
from flare_core.analyses.sufficiency._training import FitOutcome, _train
from flare_core.analyses.sufficiency.estimator import Estimator, TrainingArray
from flare_core.checks import check_bool, check_choice, check_int, check_number
from flare_core.device import seed_everything

_LOG_2PI = math.log(2 * math.pi)
_EVALUATE_ON = ("val", "train")
_COVARIANCES = ("diagonal", "full")
_INITS = ("rows", "em")
_EM_ROWS = 8192


@dataclass(frozen=True)
class GMMConfig(DictConfig):
    """Hyper-parameters of the mixture estimator.

    The default was chosen on the ladder of known truth (``bench/studies/is_ladder.py``; docs/methods.md,
    "Information sufficiency against known truth", where each part is measured against the default): one
    Gaussian component whose mean is a linear map of u plus a small MLP (8 hidden units), the marginal started
    from an EM fit and the conditional started as the trained marginal, early stopping on held-out rows
    (patience 3, at most 30 / 60 epochs, Adam 3e-3). KNIFE's input LayerNorm discards each row's mean
    and scale across its features; an MLP as wide as the target overfits before it has learnt the linear
    part; several components overfit more than one; a conditional trained from scratch beats a marginal
    trained apart on a shuffled pair, which the warm start removes.

    :meth:`knife` is KNIFE's architecture as EMIR uses it (8 diagonal modes, input LayerNorm, an MLP as
    wide as the target, marginal means started at training rows), held out; :meth:`emir` is EMIR's whole
    protocol: Adam 1e-3, 5 / 10 epochs, no early stopping, NLLs measured on the training rows
    (``evaluate_on="train"``).

    - ``n_modes``: mixture components; ``hidden_features``: MLP width (None: the target's width);
      ``log_scale_bound``: each std is exp(bound * tanh(raw)).
    - ``covariance``: "diagonal", or "full" (KNIFE's off-diagonal precision factor, one per component).
    - ``input_norm``: KNIFE's LayerNorm of u at the MLP's input; ``skip``: a linear path from u to the
      means; ``warm_start``: the conditional starts as the trained marginal (which is then a candidate
      for the kept weights, so IS is floored at 0 and ``is_raw_nats`` keeps the figure before the floor);
      ``init``: the marginal's start, "rows" (means at random training rows) or "em" (scikit-learn EM).
    """

    n_modes: int = 1
    hidden_features: int | None = 8
    log_scale_bound: float = 1.0
    lr: float = 3e-3
    batch_size: int = 128
    max_epochs: int = 30
    max_epochs_conditional: int = 60
    patience: int = 3
    evaluate_on: str = "val"
    grad_clip: float | None = 5.0
    eval_batch_size: int = 1024
    covariance: str = "diagonal"
    input_norm: bool = False
    warm_start: bool = True
    skip: bool = True
    init: str = "em"

    def __post_init__(self) -> None:
        self._require_positive_ints(
            "n_modes", "batch_size", "max_epochs", "max_epochs_conditional", "patience", "eval_batch_size"
        )
        self._require_optimiser_settings()
        check_int(self.hidden_features, "hidden_features", min_value=1, allow_none=True)
        check_number(self.log_scale_bound, "log_scale_bound", min_value=0, include_min=False)
        check_choice(self.evaluate_on, "evaluate_on", _EVALUATE_ON)
        check_choice(self.covariance, "covariance", _COVARIANCES)
        check_bool(self.input_norm, "input_norm")
        check_bool(self.warm_start, "warm_start")
        check_bool(self.skip, "skip")
        check_choice(self.init, "init", _INITS)

    @classmethod
    def knife(cls) -> GMMConfig:
        """KNIFE's architecture as EMIR uses it, trained and measured on held-out rows (the default before
        the ladder): 8 diagonal modes, input LayerNorm, an MLP as wide as the target, 30 / 30 epochs."""
        return cls(
            n_modes=8,
            hidden_features=None,
            max_epochs_conditional=30,
            input_norm=True,
            warm_start=False,
            skip=False,
            init="rows",
        )

    @classmethod
    def emir(cls) -> GMMConfig:
        """EMIR's protocol: KNIFE's architecture, Adam 1e-3, 5 / 10 epochs, no early stopping, NLLs
        measured on the training rows."""
        return dataclasses.replace(
            cls.knife(), lr=1e-3, max_epochs=5, max_epochs_conditional=10, evaluate_on="train"
        )

    @classmethod
    def fast(cls) -> GMMConfig:
        """A small preset for tests and demos (fewer epochs)."""
        return cls(max_epochs=20, max_epochs_conditional=30, patience=2)


def _mixture_log_prob(
    v: torch.Tensor,
    logits: torch.Tensor,
    means: torch.Tensor,
    log_scales: torch.Tensor,
    mixing: torch.Tensor | None = None,
) -> torch.Tensor:
    """log p(v) (n,) of Gaussian mixtures: v (n, d), logits (n|1, K), means and log_scales (n|1, K, d).

    Without ``mixing`` every component is diagonal with std exp(log_scales). With ``mixing`` (K, d, d)
    (KNIFE's off-diagonal option; its strictly lower triangle is used) component k's precision factor
    is (I + T_k) diag(exp(-log_scales_k)): z = (I + T_k) (v - mean_k) / scale_k, whose log-determinant is
    still -sum log_scales_k because I + T_k is unit lower-triangular.
    """
    z = (v.unsqueeze(1) - means) * torch.exp(-log_scales)
    if mixing is not None:
        z = z + torch.einsum("kij,nkj->nki", torch.tril(mixing, diagonal=-1), z)
    comp = -0.5 * (z * z).sum(-1) - log_scales.sum(-1) - 0.5 * v.shape[1] * _LOG_2PI
    return torch.logsumexp(torch.log_softmax(logits, dim=-1) + comp, dim=-1)


def _mixing(n_modes: int, features: int, covariance: str) -> nn.Parameter | None:
    """The (K, d, d) zero-initialised off-diagonal precision factors of full covariances (None: diagonal)."""
    return nn.Parameter(torch.zeros(n_modes, features, features)) if covariance == "full" else None


class DiagonalGMM(nn.Module):
    """Marginal mixture: ``forward(v (n, d)) -> log p(v) (n,)``; diagonal components, or full ones with
    ``covariance="full"``."""

    def __init__(
        self,
        features: int,
        n_modes: int,
        log_scale_bound: float,
        init_means: torch.Tensor,
        covariance: str = "diagonal",
    ) -> None:
        super().__init__()
        self.log_scale_bound = log_scale_bound
        self.logits = nn.Parameter(torch.zeros(n_modes))
        self.means = nn.Parameter(init_means.clone().reshape(n_modes, features))
        self.raw_scales = nn.Parameter(torch.zeros(n_modes, features))
        self.mixing = _mixing(n_modes, features, covariance)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        log_scales = self.log_scale_bound * torch.tanh(self.raw_scales)
        return _mixture_log_prob(v, self.logits[None], self.means[None], log_scales[None], self.mixing)

    def log_prob(self, v: torch.Tensor) -> torch.Tensor:
        """log p(v) (n,) of v (n, d), as a flow's ``log_prob``."""
        return self(v)


class ConditionalGMM(nn.Module):
    """Conditional mixture: ``forward(v (n, d_v), u (n, d_u)) -> log p(v|u) (n,)``.

    ``input_norm`` starts the MLP with KNIFE's LayerNorm of u (which discards each row's mean and scale
    across its features); ``covariance="full"`` gives each component an off-diagonal precision factor
    learned for the component (not a function of u). With a trained marginal as ``base`` (warm start)
    the MLP's outputs are added to a trainable copy of the marginal's logits, means and scales, and the
    output layers start at zero: the conditional starts exactly equal to the marginal for every u.
    """

    def __init__(
        self,
        context_features: int,
        features: int,
        n_modes: int,
        hidden: int,
        log_scale_bound: float,
        covariance: str = "diagonal",
        input_norm: bool = True,
        base: DiagonalGMM | None = None,
        skip: bool = False,
    ):
        super().__init__()
        self.features, self.n_modes, self.log_scale_bound = features, n_modes, log_scale_bound
        first: list[nn.Module] = [nn.LayerNorm(context_features)] if input_norm else []
        self.trunk = nn.Sequential(
            *first,
            nn.Linear(context_features, hidden),
            nn.ReLU(),
            nn.LayerNorm(hidden),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.logits = nn.Linear(hidden, n_modes)
        self.means = nn.Linear(hidden, n_modes * features)
        self.raw_scales = nn.Linear(hidden, n_modes * features)
        self.skip = nn.Linear(context_features, n_modes * features, bias=False) if skip else None
        if self.skip is not None:
            nn.init.zeros_(self.skip.weight)
        self.mixing = _mixing(n_modes, features, covariance) if base is None else None
        self.base = copy.deepcopy(base) if base is not None else None
        if self.base is not None:
            for head in (self.logits, self.means, self.raw_scales):
                nn.init.zeros_(head.weight)
                nn.init.zeros_(head.bias)

    def forward(self, v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        h = self.trunk(u)
        shape = (-1, self.n_modes, self.features)
        logits, means, raw = self.logits(h), self.means(h).reshape(shape), self.raw_scales(h).reshape(shape)
        if self.skip is not None:
            means = means + self.skip(u).reshape(shape)
        mixing = self.mixing
        if self.base is not None:
            base = self.base
            logits, means, raw = logits + base.logits, means + base.means, raw + base.raw_scales
            mixing = base.mixing
        log_scales = self.log_scale_bound * torch.tanh(raw)
        return _mixture_log_prob(v, logits, means, log_scales, mixing)


def _fit_marginal(
    v_train: np.ndarray, v_val: np.ndarray, config: GMMConfig, seed: int, device: torch.device
) -> FitOutcome:
    generator = seed_everything(seed)
    n, d = v_train.shape
    pick = torch.randint(0, n, (config.n_modes,), generator=generator)
    train = [as_training_data(v_train, device)]
    val = [as_training_data(v_val, device)]
    start_means = gather(train[0], pick.to(device), device)
    model = DiagonalGMM(d, config.n_modes, config.log_scale_bound, start_means, config.covariance).to(device)
    if config.init == "em":
        _em_start(model, train[0], config, seed)
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


def _em_start(model: DiagonalGMM, v_train: TrainingData, config: GMMConfig, seed: int) -> None:
    """Set the marginal's weights, means and scales to a diagonal mixture fitted by EM (scikit-learn) on
    at most 8,192 training rows drawn with ``seed``; scales are clipped into the model's bound."""
    from sklearn.mixture import GaussianMixture

    n = n_rows(v_train)
    rows = np.sort(np.random.default_rng(seed).permutation(n)[:_EM_ROWS])
    x = gather(v_train, torch.as_tensor(rows), torch.device("cpu")).cpu().numpy().astype(np.float64)
    mixture = GaussianMixture(
        config.n_modes, covariance_type="diag", reg_covar=1e-4, max_iter=200, random_state=seed
    ).fit(x)
    log_std = 0.5 * np.log(mixture.covariances_) / config.log_scale_bound
    raw = np.arctanh(np.clip(log_std, -0.99, 0.99))
    with torch.no_grad():
        model.logits.copy_(torch.as_tensor(np.log(mixture.weights_)))
        model.means.copy_(torch.as_tensor(mixture.means_))
        model.raw_scales.copy_(torch.as_tensor(raw))


def _fit_conditional(
    u_train: np.ndarray,
    v_train: np.ndarray,
    u_val: np.ndarray,
    v_val: np.ndarray,
    config: GMMConfig,
    seed: int,
    device: torch.device,
    marginal: DiagonalGMM | None = None,
) -> FitOutcome:
    generator = seed_everything(seed)
    d_v = v_train.shape[1]
    hidden = config.hidden_features or d_v
    model = ConditionalGMM(
        u_train.shape[1],
        d_v,
        config.n_modes,
        hidden,
        config.log_scale_bound,
        config.covariance,
        config.input_norm,
        marginal if config.warm_start else None,
        config.skip,
    ).to(device)
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
        evaluate_initial=config.warm_start,
        grad_clip=config.grad_clip,
        eval_batch_size=config.eval_batch_size,
    )


class GMMEstimator(Estimator):
    """EMIR/KNIFE's estimator: a mixture marginal and an MLP-parametrised mixture conditional.

    Means of the marginal start at ``n_modes`` training rows drawn with the seed. With
    ``config.evaluate_on == "train"`` there is no early stopping (fixed epochs) and the matrix measures
    the NLLs on the training rows, as EMIR does. With ``config.warm_start`` the conditional starts as the
    trained marginal (as FLARE's flows do), which is then a candidate for the kept weights.
    """

    name = "gmm"
    config_type = GMMConfig
    uses_marginal = True

    def evaluates_on_training_rows(self, config: GMMConfig) -> bool:
        return config.evaluate_on == "train"

    def run_config(self, preset: str, **options: Any) -> GMMConfig:
        """``fast``: fewer epochs; ``paper``: KNIFE's architecture (:meth:`GMMConfig.knife`); else the
        default."""
        if preset == "fast":
            return GMMConfig.fast()
        return GMMConfig.knife() if preset == "paper" else GMMConfig()

    def marginal_weights(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}

    def restore_marginal(
        self,
        weights: dict[str, torch.Tensor] | None,
        features: int,
        config: GMMConfig,
        seed: int,
        device: torch.device,
    ) -> DiagonalGMM | None:
        if weights is None:
            return None
        start = torch.zeros(config.n_modes, features)
        marginal = DiagonalGMM(features, config.n_modes, config.log_scale_bound, start, config.covariance)
        marginal.load_state_dict(weights)
        return marginal.to(device).eval()

    def _marginal_features(self, marginal: nn.Module | None) -> int | None:
        if marginal is None:
            return None
        if not isinstance(marginal, DiagonalGMM):
            raise ValueError(f"marginal must be a DiagonalGMM, got {type(marginal).__name__}")
        return int(marginal.means.shape[1])

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
        if config.warm_start and not isinstance(marginal, DiagonalGMM):
            raise ValueError("a warm-started mixture conditional needs its target's trained marginal")
        return _fit_conditional(u_train, v_train, u_val, v_val, config, seed, device, marginal)
