"""What a probe trained on k labels can show of a model's accuracy with plenty of labels: the likelihood
the few-label posterior (:mod:`flare_core.choosing.accuracy_posterior`) reads the labels with.

The few-label answer scores each candidate by a leave-one-out probe on the k labelled texts. Its mean
score ``ȳ_m`` is not a reading of the accuracy ``a_m`` with plenty of labels (the benchmark's oracle,
5-fold logistic regression on every text): a probe trained on one or two texts a class sits many points
under it, by an amount that differs by model (a model whose classes are tight from one example learns
fast; a wide or corpus-trained one learns late) and by corpus. So the posterior reads

    ȳ = a + offset(x) + e,   e ~ N(0, s² R + τ²(x) I + σ²(x) 11ᵀ),   x = log(k / classes)

- ``offset_m(x)`` (M,): how far model m's k-label score sits from its accuracy with plenty of labels, at
  x = log(labels per class), learned on the benchmark's corpora: a line in x shared by every model (a
  study may add each known model's own line, shrunk towards the shared one as few corpora measure it,
  :data:`SHRINK_CORPORA`; the product does not, :func:`fit`);
- ``R`` (M, M): the sampling error of the mean of k per-text scores (the per-text covariance over k, as
  :func:`flare_core.choosing.accuracy_posterior.label_error` reads it), scaled by ``s²``;
- ``τ²(x)``: the part of each model's gap that is its own on this corpus (how it learns here, apart from
  its record), which no number of texts at the same labels per class averages away; ``σ²(x)``: the part
  every model shares (the corpus's own learning curve). Both are log-linear in x.

:func:`fit` learns the four lines and ``s`` by maximum likelihood from :class:`ReadingRow`\\ s (one per
corpus, draw of random texts and k; ``flare_core.benchmark.reading_draws`` makes them from the kept
vectors). With many labels per class ``τ`` shrinks and the labels decide; with one or two a class they
move the answer only as far as they really separate the models.

Shapes: M candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

#: A model's own offset line is shrunk towards the shared one by n / (n + this), n the corpora measuring it.
SHRINK_CORPORA = 3.0
#: The labels per class the lines are read at are kept within this range (the benchmark's own range is
#: about 0.4 to 64): beyond it a line is not carried further.
LEAST_PER_CLASS, MOST_PER_CLASS = 0.5, 64.0


@dataclass(frozen=True)
class ReadingRow:
    """One draw of k labelled texts on one corpus: ``ybar`` (M,) each model's mean per-text score,
    ``oracle`` (M,) its accuracy with plenty of labels, ``error`` (M, M) the sampling error of ``ybar``
    (unscaled), ``classes`` the corpus's classes."""

    corpus: str
    models: tuple[str, ...]
    k: int
    classes: int
    ybar: np.ndarray
    oracle: np.ndarray
    error: np.ndarray


@dataclass(frozen=True)
class ProbeReading:
    """The fitted likelihood: the shared offset line (``intercept``, ``slope``; shares per unit of x), each
    known model's own line (``own``: model → (intercept, slope), already shrunk), the sampling scale
    ``scale`` (s) and the log-linear variances ``own_log_var`` (τ²: intercept, slope) and ``shared_log_var``
    (σ²). ``corpora``: how many corpora it was learned on."""

    intercept: float
    slope: float
    own: dict[str, tuple[float, float]] = field(default_factory=dict)
    scale: float = 1.0
    own_log_var: tuple[float, float] = (np.log(1e-4), 0.0)
    shared_log_var: tuple[float, float] = (np.log(1e-4), 0.0)
    corpora: int = 0

    @classmethod
    def widened(cls, scale: float) -> ProbeReading:
        """A reading that only widens the sampling error ``scale`` times: no offset, no gap of a model's
        own (as the posterior reads labels without a learned reading, at ``SPREAD_INFLATION``)."""
        return cls(0.0, 0.0, {}, float(scale), (-60.0, 0.0), (-60.0, 0.0), 0)

    def offset(self, models: Sequence[str], k: int, classes: int) -> np.ndarray:
        """(M,) each model's expected k-label score minus its accuracy with plenty of labels (shares)."""
        x = per_class_x(k, classes)
        own = np.array([self.own.get(str(m), (0.0, 0.0)) for m in models], dtype=np.float64).reshape(-1, 2)
        return self.intercept + self.slope * x + own[:, 0] + own[:, 1] * x

    def variances(self, k: int, classes: int) -> tuple[float, float]:
        """(τ², σ²) at k labels of ``classes`` classes: the models' own and shared gap variances (shares²)."""
        x = per_class_x(k, classes)
        return (
            float(np.exp(self.own_log_var[0] + self.own_log_var[1] * x)),
            float(np.exp(self.shared_log_var[0] + self.shared_log_var[1] * x)),
        )

    def error(self, sampling: np.ndarray, k: int, classes: int) -> np.ndarray:
        """The labels' whole error (M, M): ``s²`` times the ``sampling`` error (M, M), plus the own and
        shared gap variances at k labels."""
        own, shared = self.variances(k, classes)
        m = sampling.shape[0]
        return self.scale**2 * sampling + own * np.eye(m) + shared * np.ones((m, m))

    def to_json(self) -> dict[str, Any]:
        """A plain dict (:meth:`from_json` reads it back)."""
        return {
            "intercept": self.intercept,
            "slope": self.slope,
            "scale": self.scale,
            "corpora": self.corpora,
            "own": {m: list(v) for m, v in self.own.items()},
            "own_log_var": list(self.own_log_var),
            "shared_log_var": list(self.shared_log_var),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeReading:
        """The reading :meth:`to_json` wrote; ``ValueError`` for a malformed one."""
        try:
            own = {str(m): (float(v[0]), float(v[1])) for m, v in dict(data.get("own", {})).items()}
            values = [float(data["intercept"]), float(data["slope"]), float(data.get("scale", 1.0))]
            own_var = tuple(float(v) for v in data["own_log_var"])
            shared_var = tuple(float(v) for v in data["shared_log_var"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"not a probe reading: {exc}") from exc
        numbers = values + list(own_var) + list(shared_var) + [v for pair in own.values() for v in pair]
        if len(own_var) != 2 or len(shared_var) != 2 or not np.all(np.isfinite(numbers)) or values[2] <= 0:
            raise ValueError("not a probe reading: its numbers must be finite, two per line, scale > 0")
        return cls(  # type: ignore[arg-type]
            values[0], values[1], own, values[2], own_var, shared_var, int(data.get("corpora", 0))
        )


def per_class_x(k: int, classes: int) -> float:
    """x = log(labels per class), the labels per class kept within [:data:`LEAST_PER_CLASS`,
    :data:`MOST_PER_CLASS`]."""
    per_class = max(int(k), 1) / max(int(classes), 2)
    return float(np.log(np.clip(per_class, LEAST_PER_CLASS, MOST_PER_CLASS)))


def fit(rows: Sequence[ReadingRow], *, own_lines: bool = False) -> ProbeReading:
    """The likelihood learned from ``rows`` (at least two corpora): the shared offset line by least squares,
    each corpus weighing the same (``own_lines``: each known model's own line too), then ``s`` and the two
    variance lines by maximum likelihood of what the offsets leave.

    The product reads labels without the models' own lines, each model's own gap left to ``τ``: on the
    answer benchmark's 12 kept classification corpora (``bench/studies/few_label_prior.py``, 5 draws, each
    corpus judged with what was learned on the others) the own lines lost more points with few labels,
    3.67 / 3.36 / 3.31 at k = 16 / 32 / 48 against 3.17 / 2.85 / 3.22 without them (the label-free pick:
    3.09), and fewer with more, 2.02 / 1.40 / 1.49 at k = 64 / 80 / 96 against 2.28 / 1.99 / 1.65; over
    every k 2.27 against 2.25, the 95% intervals' coverage 0.93 against 0.92, calibration 0.048 against
    0.047. Without them the answer after 16 to 48 labels loses no more than the label-free pick's."""
    corpora = sorted({r.corpus for r in rows})
    if len(corpora) < 2:
        raise ValueError("a probe reading is learned from at least two corpora")
    weight = {c: 1.0 / sum(r.corpus == c for r in rows) for c in corpora}
    xs = np.array([per_class_x(r.k, r.classes) for r in rows])
    # the shared line: every model's gap, each corpus weighing the same
    gaps = [r.ybar - r.oracle for r in rows]
    pooled_x = np.concatenate([np.full(g.size, x) for g, x in zip(gaps, xs, strict=True)])
    pooled_w = np.concatenate(
        [np.full(g.size, weight[r.corpus] / g.size) for g, r in zip(gaps, rows, strict=True)]
    )
    intercept, slope = _line(pooled_x, np.concatenate(gaps), pooled_w)
    # each model's own line, on what the shared line leaves
    own: dict[str, tuple[float, float]] = {}
    for model in sorted({m for r in rows for m in r.models}) if own_lines else ():
        at = [
            (x, r.ybar[i] - r.oracle[i] - intercept - slope * x, weight[r.corpus], r.corpus)
            for x, r in zip(xs, rows, strict=True)
            for i, m in enumerate(r.models)
            if m == model
        ]
        seen = len({c for *_, c in at})
        if seen < 2:
            continue
        a, b = _line(np.array([v[0] for v in at]), np.array([v[1] for v in at]), np.array([v[2] for v in at]))
        shrink = seen / (seen + SHRINK_CORPORA)
        own[model] = (shrink * a, shrink * b)
    reading = ProbeReading(intercept, slope, own, corpora=len(corpora))
    residuals = [r.ybar - r.oracle - reading.offset(r.models, r.k, r.classes) for r in rows]
    groups = _stacked(rows, residuals, xs, [weight[r.corpus] for r in rows])

    def loss(theta: np.ndarray) -> float:
        log_scale, t0, t1, c0, c1 = theta
        total = 0.0
        for errors, e, x, w in groups:  # (N, M, M), (N, M), (N,), (N,): the rows of one pool size
            m = e.shape[1]
            own, shared = np.exp(t0 + t1 * x), np.exp(c0 + c1 * x)
            cov = np.exp(2 * log_scale) * errors + own[:, None, None] * np.eye(m) + shared[:, None, None]
            sign, logdet = np.linalg.slogdet(cov)
            if np.any(sign <= 0):
                return 1e12
            quad = np.einsum("nm,nm->n", e, np.linalg.solve(cov, e[..., None])[..., 0])
            total += float(w @ (logdet + quad))
        return total

    start = np.array([0.0, np.log(1e-3), 0.0, np.log(1e-3), 0.0])
    best = optimize.minimize(
        loss, start, method="Nelder-Mead", options={"maxiter": 3000, "xatol": 1e-4, "fatol": 1e-7}
    )
    log_scale, t0, t1, c0, c1 = (float(v) for v in best.x)
    return ProbeReading(intercept, slope, own, float(np.exp(log_scale)), (t0, t1), (c0, c1), len(corpora))


def _stacked(
    rows: Sequence[ReadingRow], residuals: Sequence[np.ndarray], xs: np.ndarray, weights: Sequence[float]
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The rows grouped by pool size, each group stacked: errors (N, M, M), residuals (N, M), x (N,),
    weights (N,)."""
    out = []
    for m in sorted({r.ybar.size for r in rows}):
        at = [i for i, r in enumerate(rows) if r.ybar.size == m]
        out.append(
            (
                np.stack([rows[i].error for i in at]),
                np.stack([residuals[i] for i in at]),
                xs[at],
                np.asarray(weights, dtype=np.float64)[at],
            )
        )
    return out


def _line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Weighted least-squares intercept and slope of y on x (the slope 0 when x does not vary)."""
    w = w / w.sum()
    mx, my = float(w @ x), float(w @ y)
    spread = float(w @ (x - mx) ** 2)
    slope = float(w @ ((x - mx) * (y - my)) / spread) if spread > 1e-12 else 0.0
    return my - slope * mx, slope
