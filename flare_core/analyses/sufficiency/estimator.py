"""The estimator protocol: what a density estimator provides to information sufficiency.

IS(U → V) is the validation log-likelihood a conditional density p(v | u) gains over the marginal
density p(v) of the same target. An estimator fits both and returns each one's per-sample
log-likelihoods (:class:`~flare_core.analyses.sufficiency._training.FitOutcome`); everything else (the
split, standardisation, seeds, the unit store, executors, scores) is shared by all estimators.

Adding an estimator is one module that subclasses :class:`Estimator` (a configuration dataclass with
``to_dict``/``from_dict``, and the two private hooks) and one line in
:data:`flare_core.analyses.sufficiency.registry.ESTIMATORS`. Public methods validate their inputs;
the hooks ``_fit_marginal`` and ``_fit_conditional`` compute (they are what the units of a matrix call
in worker processes, on arrays already checked and standardised).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from flare_core.analyses.sufficiency._config import DictConfig
from flare_core.analyses.sufficiency._rows import StandardizedRows
from flare_core.analyses.sufficiency._training import FitOutcome
from flare_core.checks import check_matrix
from flare_core.device import pick_device

TrainingArray = np.ndarray | StandardizedRows
#: What a batch of conditionals needs of one target:
#: ``(marginal, [(u_train, u_val, seed), ...], v_train, v_val)``.
TargetSources = tuple[
    nn.Module | None, list[tuple[TrainingArray, TrainingArray, int]], TrainingArray, TrainingArray
]


class Estimator(ABC):
    """A pair of density models on a target V: a marginal p(v) and a conditional p(v | u).

    - :meth:`fit_marginal` (v_train (n_train, d_v), v_val (n_val, d_v)) and :meth:`fit_conditional`
      (u_* (n, d_u) row-aligned with v_*) return a :class:`FitOutcome` whose ``logp_train`` and
      ``logp_val`` are per-sample log-likelihoods in nats, computed with the kept weights.
    - Estimators whose conditional starts from the trained marginal (``uses_marginal``) receive it as
      ``marginal``; to reach a task in another process it travels as :meth:`marginal_weights` and is
      rebuilt there by :meth:`restore_marginal`.
    """

    name: ClassVar[str]
    config_type: ClassVar[type[DictConfig]]
    uses_marginal: ClassVar[bool] = False

    # -- public: validate, then compute ----------------------------------------------------------------

    def fit_marginal(
        self,
        v_train: np.ndarray,
        v_val: np.ndarray,
        config: DictConfig | None = None,
        *,
        seed: int = 0,
        device: str | torch.device | None = None,
    ) -> FitOutcome:
        """Fit p(v) on ``v_train`` (n_train, d_v), monitored on ``v_val`` (n_val, d_v); both standardised."""
        config = self.checked_config(config)
        v_train = check_matrix(v_train, "v_train", min_rows=2, dtype=np.float32)
        v_val = check_matrix(v_val, "v_val", min_rows=2, n_cols=v_train.shape[1], dtype=np.float32)
        return self._fit_marginal(v_train, v_val, config, int(seed), _device(device))

    def fit_conditional(
        self,
        u_train: np.ndarray,
        v_train: np.ndarray,
        u_val: np.ndarray,
        v_val: np.ndarray,
        config: DictConfig | None = None,
        *,
        seed: int = 0,
        device: str | torch.device | None = None,
        marginal: nn.Module | None = None,
    ) -> FitOutcome:
        """Fit p(v | u) on row-aligned, standardised ``u_*`` (n, d_u) and ``v_*`` (n, d_v).

        ``marginal`` is the ``model`` of this estimator's :meth:`fit_marginal` on the same target
        (required when ``uses_marginal``; it is not modified).
        """
        config = self.checked_config(config)
        u_train = check_matrix(u_train, "u_train", min_rows=2, dtype=np.float32)
        v_train = check_matrix(
            v_train, "v_train", min_rows=2, n_cols=self._marginal_features(marginal), dtype=np.float32
        )
        u_val = check_matrix(u_val, "u_val", min_rows=2, n_cols=u_train.shape[1], dtype=np.float32)
        v_val = check_matrix(v_val, "v_val", min_rows=2, n_cols=v_train.shape[1], dtype=np.float32)
        if len(u_train) != len(v_train) or len(u_val) != len(v_val):
            raise ValueError(
                f"u and v must have the same rows: train {len(u_train)} vs {len(v_train)}, "
                f"val {len(u_val)} vs {len(v_val)}"
            )
        return self._fit_conditional(
            u_train, v_train, u_val, v_val, config, int(seed), _device(device), marginal
        )

    def checked_config(self, config: DictConfig | None) -> Any:
        """``config``, or the default configuration when None; ValueError for another estimator's."""
        if config is None:
            return self.config_type()
        if not isinstance(config, self.config_type):
            raise ValueError(f"config must be a {self.config_type.__name__}, got {type(config).__name__}")
        return config

    def run_config(self, preset: str, **options: Any) -> Any:
        """The configuration a run uses: ``preset`` ("default", "fast" or "paper") and run options such as
        ``autocast`` that the estimator may take (the others are ignored)."""
        return self.config_type()

    # -- what a matrix asks of every estimator ---------------------------------------------------------

    def marginal_weights(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """What conditionals need of a trained marginal, as CPU tensors (None: nothing)."""
        return None

    def restore_marginal(
        self,
        weights: dict[str, torch.Tensor] | None,
        features: int,
        config: Any,
        seed: int,
        device: torch.device,
    ) -> nn.Module | None:
        """The marginal rebuilt from :meth:`marginal_weights` in a task (None when not ``uses_marginal``)."""
        return None

    def group_size(self, config: Any) -> int:
        """How many conditionals of one target are trained together in one task (1: one by one)."""
        return 1

    def fit_conditional_group(
        self,
        marginal: nn.Module | None,
        sources: list[tuple[TrainingArray, TrainingArray, int]],
        v_train: TrainingArray,
        v_val: TrainingArray,
        config: Any,
    ) -> list[FitOutcome]:
        """Fit p(v | u_k) for each ``(u_train_k, u_val_k, seed_k)`` together (when ``group_size`` > 1)."""
        raise NotImplementedError(f"the {self.name} estimator trains its conditionals one by one")

    def targets_per_batch(self, config: Any) -> int:
        """How many targets' conditional groups are trained together in one task (1: each target alone)."""
        return 1

    def fit_conditional_batch(
        self,
        groups: list[TargetSources],
        config: Any,
    ) -> list[list[FitOutcome]]:
        """Fit the conditionals of several targets of one width together (when ``targets_per_batch`` > 1):
        each group is ``(marginal, sources, v_train, v_val)`` as in :meth:`fit_conditional_group`; returns
        one list of outcomes per group, in order."""
        raise NotImplementedError(f"the {self.name} estimator trains the conditionals of each target alone")

    def evaluates_on_training_rows(self, config: Any) -> bool:
        """Whether NLLs are measured on the training rows (no validation split), as EMIR does."""
        return False

    # -- private hooks: compute -------------------------------------------------------------------------

    def _marginal_features(self, marginal: nn.Module | None) -> int | None:
        """The width the conditional's target must have (``marginal``'s), when the estimator can tell."""
        return None

    @abstractmethod
    def _fit_marginal(
        self, v_train: TrainingArray, v_val: TrainingArray, config: Any, seed: int, device: torch.device
    ) -> FitOutcome:
        """Fit p(v); the arrays are checked and standardised (or read a mini-batch at a time)."""

    @abstractmethod
    def _fit_conditional(
        self,
        u_train: TrainingArray,
        v_train: TrainingArray,
        u_val: TrainingArray,
        v_val: TrainingArray,
        config: Any,
        seed: int,
        device: torch.device,
        marginal: nn.Module | None,
    ) -> FitOutcome:
        """Fit p(v | u); the arrays are checked, row-aligned and standardised."""


def _device(device: str | torch.device | None) -> torch.device:
    return device if isinstance(device, torch.device) else pick_device(device)
