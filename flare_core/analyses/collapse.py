"""Second-order collapse by mean pooling (SOCM; Hara et al., papers/socm_mean_pooling_collapse.txt).

For a text with token states ``X`` of shape ``(n, d)`` (one row per token, special tokens included):

* ``X_norm = X / ||mu(X)||`` so that the mean-pooled embedding has unit norm (paper Eq. 8);
* ``d_mu = ||mu_1 - mu_2||^2 / 4`` in ``[0, 1]`` (Eq. 5);
* ``d_sigma = BW^2(Sigma_1, Sigma_2) / 4`` with biased (``1/n``) covariances (Eq. 3, 6);
* ``SOCM_{alpha,beta} = (1 - d_mu)^alpha * d_sigma^beta`` (Eq. 4 for ``alpha = beta = 1``, Eq. 30).

Exact Bures-Wasserstein without ``d x d`` matrix square roots. With ``B_i = C_i / sqrt(n_i)``
(``C_i`` the centred token matrix, shape ``(n_i, d)``) we have ``Sigma_i = B_i^T B_i`` and

    tr (Sigma_1^1/2 Sigma_2 Sigma_1^1/2)^1/2 = ||Sigma_1^1/2 Sigma_2^1/2||_* = ||B_1 B_2^T||_*,

the nuclear norm of an ``n_1 x n_2`` matrix, so ``BW^2 = ||B_1||_F^2 + ||B_2||_F^2 - 2 ||B_1 B_2^T||_*``.
Pairs are batched by zero-padding every ``B_i`` to ``(N, d)`` (zero rows add only zero singular
values) and taking the singular values of the ``(P, N, N)`` stack. Cost per pair: ``O(N^2 d + N^3)``
instead of ``O(d^3)``.

Numerical paths (measured on all-MiniLM-L6-v2 / all-mpnet-base-v2 token states of BBC articles,
see ``bench/socm_pairs.py`` and ``tests/test_collapse.py``):

* ``dtype=torch.float64``: singular values of ``B_1 B_2^T`` (``torch.linalg.svdvals``); agrees with
  ``scipy.linalg.sqrtm`` within 1e-8 on ``BW^2`` (tested; on the singular ``d x d`` covariances of
  ``n < d`` tokens sqrtm itself is only good to ~1e-7, so the test applies it inside the range of
  ``Sigma_1``). Use it for tests and references.
* ``dtype=torch.float32`` (default, fast): ``G = B_1 B_2^T`` in float32, then the eigenvalues of the
  symmetric ``G G^T`` (``torch.linalg.eigvalsh``), ``||G||_* = sum sqrt(max(eig, 0))``. This is
  about 2.4x faster than ``svdvals`` on CPU. Means, traces and ``d_mu`` are always computed in
  float64; only the nuclear norm is float32. Measured gap to float64 (128-token BBC articles):
  all-MiniLM-L6-v2, 190 pairs: max |d_sigma difference| 2.7e-5, mean 5e-6; all-mpnet-base-v2
  sample: max 1.2e-6. It comes from the square roots of the smallest eigenvalues of ``G G^T``;
  the tests bound it by 1e-4 (real states) and 5e-4 (synthetic).

Devices: on CPU the batches run on ``torch.get_num_threads()`` Python threads with one intra-op
thread each (batched LAPACK calls with several intra-op threads were 10-250x slower on a loaded
2-core machine); the global torch thread count is set to 1 during the call and restored after, so
do not run other torch work concurrently in the same process. On CUDA, torch's batched
``eigvalsh``/``svdvals`` loop over matrices larger than 32 x 32 (measured on an H100 for
128 x 128: eigvalsh 1.8 ms float32 / 0.7 ms float64, svdvals 2.5 / 3.6 ms per matrix), which is
no faster than two CPU cores; pass ``device="cpu"`` on machines with many cores.

``eps`` reproduces the public reference implementation (tohoku-nlp/socm-text-embedding), which takes
``d x d`` eigendecomposition square roots with ``eps = 1e-9`` added to the diagonal. That biases
``BW^2`` low by about ``2 (d - rank) sqrt(eps)`` (~0.01 in ``d_sigma`` at ``d = 768``), so the
default is the exact value (``eps=None``); see :func:`bw2_reference_eps`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.checks import check_int, check_number
from flare_core.device import pick_device
from flare_core.encoders.token_store import TokenStates

ArrayLike = np.ndarray | torch.Tensor
Progress = Callable[[int, int], None]

PAIR_COLUMNS = ["i", "j", "d_mu", "d_sigma", "socm"]
_DEFAULT_MAX_MEMORY_MB = 512.0
_SUMMARY_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


# ----------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------


def _as_matrix(x: Any, name: str) -> torch.Tensor:
    """Return ``x`` as a 2-D floating CPU/GPU tensor of shape ``(n, d)`` after checking it."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if torch.is_floating_point(t) and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} contains NaN or infinite values")
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise ValueError(f"{name} must be an array of token states, got {type(x).__name__}") from exc
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        if arr.dtype != bool and not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.ndim != 2:
        raise ValueError(f"{name} must have shape (n_tokens, dim), got shape {tuple(t.shape)}")
    if t.shape[0] < 1:
        raise ValueError(f"{name} has no tokens (shape {tuple(t.shape)})")
    if t.shape[1] < 1:
        raise ValueError(f"{name} has dimension 0 (shape {tuple(t.shape)})")
    if not torch.is_floating_point(t):
        t = t.to(torch.float64)
    return t


def _check_eps(eps: float | None) -> None:
    check_number(eps, "eps", min_value=0, allow_none=True)


def _check_exponent(value: float, name: str) -> float:
    return check_number(value, name, min_value=0, include_min=False, reason="paper B.6")


# ----------------------------------------------------------------------------------------------
# single-text and single-pair functions
# ----------------------------------------------------------------------------------------------


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return x / torch.linalg.vector_norm(x.mean(dim=0))


def normalize_tokens(x: ArrayLike) -> torch.Tensor:
    """Scale the token states of one text so that their mean has unit norm (paper Eq. 8).

    Args:
        x: token states, shape ``(n, d)``, numpy array or tensor (any device).

    Returns:
        ``x / ||mu(x)||``, shape ``(n, d)``, same device; floating dtype kept (integers become float64).

    Raises:
        ValueError: ``x`` is not 2-D, is empty, has non-finite values, or its mean is the zero vector.
    """
    t = _as_matrix(x, "x")
    norm = float(torch.linalg.vector_norm(t.to(torch.float64).mean(dim=0)))
    if not norm > 0.0:
        raise ValueError("the mean token state is the zero vector: cannot normalise (||mu(X)|| = 0)")
    return _normalize(t)


def _centred_scaled(x: torch.Tensor) -> torch.Tensor:
    """``B = (X - mu(X)) / sqrt(n)`` so that ``Sigma = B^T B``; shape ``(n, d)``."""
    return (x - x.mean(dim=0, keepdim=True)) / math.sqrt(x.shape[0])


def _bw2_exact(x1: torch.Tensor, x2: torch.Tensor) -> float:
    """Exact BW^2 between the biased covariances of ``x1 (n1, d)`` and ``x2 (n2, d)`` (float64)."""
    b1 = _centred_scaled(x1.to(torch.float64))
    b2 = _centred_scaled(x2.to(torch.float64))
    nuclear = torch.linalg.svdvals(b1 @ b2.T).sum()
    bw2 = (b1 * b1).sum() + (b2 * b2).sum() - 2.0 * nuclear
    return max(float(bw2), 0.0)


def _sqrtm_eps(a: torch.Tensor, eps: float) -> torch.Tensor:
    """Square root of a symmetric PSD ``(d, d)`` matrix via ``eigh(a + eps I)``, as the reference does."""
    a = 0.5 * (a + a.T) + eps * torch.eye(a.shape[0], dtype=a.dtype, device=a.device)
    w, v = torch.linalg.eigh(a)
    return (v * w.clamp_min(0.0).sqrt()) @ v.T


def _bw2_reference(x1: torch.Tensor, x2: torch.Tensor, eps: float) -> float:
    """``d x d`` eigendecomposition BW^2 with ``eps`` on the diagonal of each square root (float64)."""
    b1 = _centred_scaled(x1.to(torch.float64))
    b2 = _centred_scaled(x2.to(torch.float64))
    s1, s2 = b1.T @ b1, b2.T @ b2
    r1 = _sqrtm_eps(s1, eps)
    fid = torch.trace(_sqrtm_eps(r1 @ s2 @ r1, eps))
    return float(torch.trace(s1) + torch.trace(s2) - 2.0 * fid)


def bw2_reference_eps(x1: ArrayLike, x2: ArrayLike, eps: float = 1e-9) -> float:
    """Bures-Wasserstein^2 computed like the public reference (slow ``d x d`` path).

    ``BW^2 = tr S1 + tr S2 - 2 tr sqrtm_eps(R1 S2 R1)``, ``R1 = sqrtm_eps(S1)``, where ``S_i`` are the
    biased covariances of the rows of ``x_i`` and ``sqrtm_eps(A) = V diag(sqrt(max(w, 0))) V^T`` with
    ``(w, V) = eigh(A + eps I)``. Traces use the covariances without ``eps``. Each null direction of
    ``R1 S2 R1`` contributes ``sqrt(eps)`` to the last trace, so the result sits about
    ``2 (d - rank(S1^1/2 S2 S1^1/2)) sqrt(eps)`` below the exact value (and may be slightly negative).
    Cost ``O(d^3)`` per pair; used with ``eps`` given in :func:`pair_distances` and as the naive
    reference in the benchmark.

    Args:
        x1: token states of text 1, shape ``(n1, d)`` (normalise first for ``d_sigma = BW^2 / 4``).
        x2: token states of text 2, shape ``(n2, d)``.
        eps: diagonal jitter, ``>= 0`` (the reference uses ``1e-9``).

    Returns:
        ``BW^2`` as a Python float (float64 arithmetic).
    """
    _check_eps(eps)
    if eps is None:
        raise ValueError(
            "eps must be a number for bw2_reference_eps; use bures_wasserstein2 for the exact value"
        )
    t1, t2 = _as_matrix(x1, "x1"), _as_matrix(x2, "x2")
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    return _bw2_reference(t1.cpu(), t2.cpu(), float(eps))


def bures_wasserstein2(
    x1: ArrayLike, x2: ArrayLike, *, eps: float | None = None, normalize: bool = False
) -> float:
    """Squared Bures-Wasserstein distance between the token covariances of two texts.

    Works on the rows as given (raw or already normalised): ``BW^2(Sigma(x1), Sigma(x2))`` with biased
    ``1/n`` covariances. With ``normalize=True`` both texts are first scaled by ``1/||mu||`` (paper
    Eq. 8), so that ``d_sigma = bures_wasserstein2(x1, x2, normalize=True) / 4``. Scaling both inputs
    by ``c`` scales the raw result by ``c^2``.

    Args:
        x1: token states of text 1, shape ``(n1, d)``.
        x2: token states of text 2, shape ``(n2, d)``.
        eps: ``None`` for the exact value (nuclear norm of ``B1 B2^T`` in float64, tiny negative
            rounding clamped to 0); a number to reproduce the reference ``d x d`` path
            (:func:`bw2_reference_eps`), not clamped.
        normalize: scale each text to a unit-norm mean first.

    Returns:
        ``BW^2`` as a Python float.
    """
    _check_eps(eps)
    t1, t2 = _as_matrix(x1, "x1"), _as_matrix(x2, "x2")
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    if normalize:
        t1, t2 = normalize_tokens(t1), normalize_tokens(t2)
    t1, t2 = t1.cpu(), t2.cpu()
    if eps is not None:
        return _bw2_reference(t1, t2, float(eps))
    return _bw2_exact(t1, t2)


def socm_value(
    d_mu: ArrayLike | float, d_sigma: ArrayLike | float, alpha: float = 1.0, beta: float = 1.0
) -> np.ndarray:
    """Generalised SOCM ``(1 - d_mu)^alpha * d_sigma^beta`` (paper Eq. 4 and Eq. 30).

    ``1 - d_mu`` is clipped at 0 (``d_mu <= 1`` holds for unit-norm means up to rounding; without
    normalisation ``d_mu`` can exceed 1) and ``d_sigma`` at 0 below; ``d_sigma`` is not clipped above
    (it exceeds 1 only when the trace bound ``tr Sigma <= 2`` fails).

    Args:
        d_mu: first-order distances, any shape.
        d_sigma: second-order distances, broadcastable with ``d_mu``.
        alpha, beta: exponents ``> 0``.

    Returns:
        float64 array with the broadcast shape.
    """
    alpha = _check_exponent(alpha, "alpha")
    beta = _check_exponent(beta, "beta")
    dm = np.asarray(d_mu, dtype=np.float64)
    ds = np.asarray(d_sigma, dtype=np.float64)
    if not (np.isfinite(dm).all() and np.isfinite(ds).all()):
        raise ValueError("d_mu and d_sigma must be finite")
    return np.clip(1.0 - dm, 0.0, None) ** alpha * np.clip(ds, 0.0, None) ** beta


# ----------------------------------------------------------------------------------------------
# batched pairs
# ----------------------------------------------------------------------------------------------


def sample_pairs(n: int, kind: str = "all", n_pairs: int | None = None, seed: int = 0) -> np.ndarray:
    """Index pairs ``(i, j)`` with ``i < j`` over ``n`` texts.

    Args:
        n: number of texts (``>= 2``).
        kind: ``"all"`` for every pair (``n (n - 1) / 2`` rows, row-major order) or ``"random"`` for
            ``n_pairs`` distinct pairs drawn uniformly without replacement.
        n_pairs: number of pairs for ``"random"`` (capped at the number of distinct pairs); with
            ``"all"`` it must be ``None``.
        seed: seed of the numpy generator for ``"random"``.

    Returns:
        int64 array of shape ``(P, 2)``, sorted lexicographically, ``i < j`` in every row.
    """
    n = check_int(n, "n", min_value=2)
    total = n * (n - 1) // 2
    if kind == "all":
        if n_pairs is not None:
            raise ValueError("n_pairs is only used with kind='random'")
        i, j = np.triu_indices(n, k=1)
        return np.stack([i, j], axis=1).astype(np.int64)
    if kind != "random":
        raise ValueError(f"kind must be 'all' or 'random', got {kind!r}")
    if (
        n_pairs is None
        or isinstance(n_pairs, bool)
        or not isinstance(n_pairs, int | np.integer)
        or n_pairs < 1
    ):
        raise ValueError(f"kind='random' needs n_pairs, an integer >= 1, got {n_pairs!r}")
    want = min(int(n_pairs), total)
    if want * 3 >= total:
        full = sample_pairs(n, "all")
        pick = np.random.default_rng(seed).choice(total, size=want, replace=False)
        return full[np.sort(pick)]
    rng = np.random.default_rng(seed)
    keys = np.empty(0, dtype=np.int64)
    while keys.size < want:
        m = 2 * (want - keys.size) + 16
        a = rng.integers(0, n, size=m)
        b = rng.integers(0, n, size=m)
        keep = a != b
        lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
        new = lo.astype(np.int64) * n + hi
        keys = np.concatenate([keys, new[~np.isin(new, keys)]])
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
    keys = np.sort(keys[:want])
    return np.stack([keys // n, keys % n], axis=1).astype(np.int64)


def label_pairs(
    labels: Sequence[Any] | np.ndarray, n_pairs: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Random distinct pairs, half within one label and half across labels (as far as available).

    Args:
        labels: one label per text, length ``n >= 2``.
        n_pairs: total number of pairs wanted (``>= 1``); ``ceil(n_pairs / 2)`` same-label and the rest
            different-label pairs, each capped at what exists.
        seed: numpy generator seed.

    Returns:
        ``(pairs, same_label)``: int64 ``(P, 2)`` with ``i < j`` (same-label pairs first, each block
        sorted) and a bool ``(P,)`` that is True where ``labels[i] == labels[j]``.
    """
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.size < 2:
        raise ValueError(f"labels must be a 1-D sequence of at least 2 labels, got shape {lab.shape}")
    if pd.isna(pd.Series(lab)).any():
        raise ValueError("labels contain missing values")
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int | np.integer) or n_pairs < 1:
        raise ValueError(f"n_pairs must be an integer >= 1, got {n_pairs!r}")
    _, codes = np.unique(lab, return_inverse=True)
    n = lab.size
    counts = np.bincount(codes)
    n_same_total = int((counts * (counts - 1) // 2).sum())
    n_diff_total = n * (n - 1) // 2 - n_same_total
    want_same = min((int(n_pairs) + 1) // 2, n_same_total)
    want_diff = min(int(n_pairs) - want_same, n_diff_total)
    rng = np.random.default_rng(seed)
    blocks: list[np.ndarray] = []
    for want, same in ((want_same, True), (want_diff, False)):
        got = np.empty(0, dtype=np.int64)
        total = n_same_total if same else n_diff_total
        if want > 0 and want * 3 >= total:
            allp = sample_pairs(n, "all")
            mask = codes[allp[:, 0]] == codes[allp[:, 1]]
            cand = allp[mask if same else ~mask]
            pick = np.sort(rng.choice(len(cand), size=want, replace=False))
            blocks.append(cand[pick])
            continue
        members = [np.flatnonzero(codes == c) for c in range(counts.size)]
        weights = (counts * (counts - 1) / 2.0) / max(n_same_total, 1)
        while got.size < want:
            m = 2 * (want - got.size) + 16
            if same:
                cls = rng.choice(counts.size, size=m, p=weights)
                a = np.array([members[c][rng.integers(0, counts[c])] for c in cls])
                b = np.array([members[c][rng.integers(0, counts[c])] for c in cls])
            else:
                a = rng.integers(0, n, size=m)
                b = rng.integers(0, n, size=m)
            keep = (a != b) & ((codes[a] == codes[b]) == same)
            lo, hi = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
            new = lo.astype(np.int64) * n + hi
            got = np.concatenate([got, new[~np.isin(new, got)]])
            _, first = np.unique(got, return_index=True)
            got = got[np.sort(first)]
        got = np.sort(got[:want])
        blocks.append(np.stack([got // n, got % n], axis=1))
    pairs = np.concatenate(blocks).astype(np.int64).reshape(-1, 2)
    same_label = codes[pairs[:, 0]] == codes[pairs[:, 1]]
    return pairs, same_label


def _check_pairs(pairs: Any, n_texts: int) -> np.ndarray:
    arr = np.asarray(pairs)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"pairs must have shape (P, 2), got {arr.shape}")
    if (
        arr.size
        and not np.issubdtype(arr.dtype, np.integer)
        and (not np.issubdtype(arr.dtype, np.floating) or not np.all(arr == np.round(arr)))
    ):
        raise ValueError(f"pairs must hold integer indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= n_texts):
        raise ValueError(f"pair indices must lie in [0, {n_texts - 1}], got range [{arr.min()}, {arr.max()}]")
    return arr


def _bytes_per_pair(n1: int, n2: int, d: int, itemsize: int) -> int:
    """Working memory of one pair in a chunk: the gathered ``(n2, d)`` block (and ``(n1, d)`` when
    both sides are gathered), ``G`` ``(n2, n1)``, ``G^T G`` and eigen/SVD workspace (``~4 n^2``)."""
    n = min(n1, n2)
    return itemsize * ((n1 + n2) * d + n1 * n2 + 5 * n * n)


def _nuclear_from_g(g: torch.Tensor) -> torch.Tensor:
    """Nuclear norms of a stack ``g`` of shape ``(B, p, q)``; returns ``(B,)`` in ``g.dtype``.

    float64: sum of ``svdvals``. float32: ``sum sqrt(max(eig(G^T G), 0))`` on the smaller side.
    """
    if g.dtype == torch.float64:
        return torch.linalg.svdvals(g).sum(dim=-1)
    m = g.transpose(1, 2) @ g if g.shape[2] <= g.shape[1] else g @ g.transpose(1, 2)
    m = 0.5 * (m + m.transpose(1, 2))
    return torch.linalg.eigvalsh(m).clamp_min(0.0).sqrt().sum(dim=-1)


class _TextBlocks(Sequence[torch.Tensor]):
    """The blocks of texts read from a token store on demand: ``[t]`` is text t's centred, scaled
    ``(n_t, d)`` matrix in ``dtype``, computed exactly as :func:`pair_distances` computes it in memory.

    The most recently used blocks stay cached up to ``cache_bytes`` (pairs in ``(i, j)`` order reuse
    text ``i`` for a whole run of pairs, and nearby ``j`` across chunks).
    """

    def __init__(
        self,
        tokens: Sequence[Any],
        means: torch.Tensor,
        scales: list[float],
        dtype: torch.dtype,
        normalize: bool,
        cache_bytes: float,
    ) -> None:
        self.tokens, self.means, self.scales = tokens, means, scales
        self.dtype, self.normalize = dtype, normalize
        self.device = torch.device("cpu")
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, t: int) -> torch.Tensor:  # type: ignore[override]
        t = int(t)
        with self._lock:
            block = self._cache.get(t)
            if block is not None:
                self._cache.move_to_end(t)
                return block
        x = _as_matrix(self.tokens[t], f"tokens[{t}]").cpu().to(torch.float64)
        if self.normalize:
            x = x / self.scales[t]
        block = ((x - self.means[t]) / math.sqrt(x.shape[0])).to(self.dtype).to(self.device)
        size = block.numel() * block.element_size()
        with self._lock:
            if t not in self._cache:
                self._cache[t] = block
                self._cached_bytes += size
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= dropped.numel() * dropped.element_size()
        return block


class _Store:
    """Normalised, centred, ``1/sqrt(n)``-scaled token matrices of all texts, ready to gather.

    ``padded`` is ``(T, N_max, d)`` (zero rows past each text's length) when it fits in the memory
    budget; otherwise ``None`` and stacks are assembled from ``blocks`` (``(n_t, d)`` tensors).
    """

    def __init__(self, blocks: list[torch.Tensor], lengths: np.ndarray, padded: torch.Tensor | None) -> None:
        self.blocks = blocks
        self.lengths = lengths
        self.padded = padded

    def one(self, t: int) -> torch.Tensor:
        """Rows of text ``t``, shape ``(n_t, d)``."""
        if self.padded is not None:
            return self.padded[t, : int(self.lengths[t])]
        return self.blocks[t]

    def gather(self, idx: np.ndarray, n: int) -> torch.Tensor:
        """Zero-padded ``(len(idx), n, d)`` stack of the texts ``idx`` (a view for a contiguous run)."""
        if self.padded is not None:
            if len(idx) > 1 and np.all(np.diff(idx) == 1):
                return self.padded[int(idx[0]) : int(idx[-1]) + 1, :n]
            return self.padded[torch.as_tensor(idx, device=self.padded.device), :n]
        ref = self.blocks[0]
        out = torch.zeros((len(idx), n, ref.shape[1]), dtype=ref.dtype, device=ref.device)
        for k, t in enumerate(idx):
            b = self.blocks[int(t)]
            out[k, : b.shape[0]] = b
        return out


def _chunk_nuclear(store: _Store, ii: np.ndarray, jj: np.ndarray) -> torch.Tensor:
    """Nuclear norms ``||B_i B_j^T||_*`` for one chunk of pairs sorted by ``i``; returns ``(len(ii),)``.

    Runs of pairs sharing ``i`` (as in all-pairs order) are one matrix product
    ``(m, N, d) @ (d, n_i)`` against the rows of text ``i``; scattered pairs are gathered on both
    sides and multiplied with ``bmm``. Zero-padded rows contribute only zero singular values.
    """
    lengths = store.lengths
    cuts = np.flatnonzero(np.diff(ii)) + 1
    bounds = np.concatenate([[0], cuts, [len(ii)]])
    if len(bounds) - 1 <= max(1, len(ii) // 8):
        parts = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            js = jj[a:b]
            rows = store.one(int(ii[a]))  # (n_i, d)
            other = store.gather(js, int(lengths[js].max()))  # (m, N, d)
            parts.append(_nuclear_from_g(torch.matmul(other, rows.T)))  # G^T: (m, N, n_i)
        return torch.cat(parts)
    n1, n2 = int(lengths[ii].max()), int(lengths[jj].max())
    g = torch.bmm(store.gather(ii, n1), store.gather(jj, n2).transpose(1, 2))  # (B, n1, n2)
    return _nuclear_from_g(g)


def _batched_nuclear(
    blocks: list[torch.Tensor],
    lengths: np.ndarray,
    ii: np.ndarray,
    jj: np.ndarray,
    dev: torch.device,
    dtype: torch.dtype,
    chunk_size: int | None,
    max_memory_mb: float,
    progress: Progress | None,
) -> np.ndarray:
    """``||B_i B_j^T||_*`` for every pair ``(ii[k], jj[k])``; returns float64 ``(P,)``.

    ``blocks[t]`` is the centred, scaled ``(n_t, d)`` matrix of text ``t`` in the working dtype (CPU).

    Pairs are processed in ``(i, j)`` order in chunks of at most ``chunk_size`` pairs (default:
    as many as fit in ``max_memory_mb``). On CPU the chunks run on a pool of ``torch.get_num_threads()``
    Python threads with one intra-op thread each (the global setting is restored afterwards): batched
    ``eigvalsh`` with several intra-op threads was measured 10-250x slower on a loaded 2-core machine.
    """
    d = blocks[0].shape[1]
    itemsize = torch.empty((), dtype=dtype).element_size()
    budget = max_memory_mb * 2**20
    n_max = int(lengths.max())
    padded = None
    if len(blocks) * n_max * d * itemsize <= budget:
        padded = torch.zeros((len(blocks), n_max, d), dtype=dtype, device=dev)
        for t in range(len(blocks)):
            b = blocks[t]
            padded[t, : b.shape[0]] = b
        if isinstance(blocks, list):
            blocks.clear()  # the padded copy replaces them (internal list owned by pair_distances)
        store = _Store([], lengths, padded)
    elif isinstance(blocks, _TextBlocks):
        blocks.device = dev  # each text's block is rebuilt from disk when a chunk needs it
        store = _Store(blocks, lengths, None)
    else:
        store = _Store([b.to(dev) for b in blocks], lengths, None)

    order = np.lexsort((jj, ii))
    si, sj = ii[order], jj[order]
    total = len(order)
    if chunk_size is None:
        size = max(1, min(1024, int(budget // (2 * _bytes_per_pair(n_max, n_max, d, itemsize)))))
    else:
        size = chunk_size
    tasks = [(a, min(a + size, total)) for a in range(0, total, size)]
    out = np.empty(total, dtype=np.float64)

    def run(task: tuple[int, int]) -> int:
        a, b = task
        with torch.no_grad():
            nuc = _chunk_nuclear(store, si[a:b], sj[a:b])
        out[order[a:b]] = nuc.to(torch.float64).cpu().numpy()
        return b - a

    done = 0
    if dev.type != "cpu":
        for task in tasks:
            done += run(task)
            if progress is not None:
                progress(done, total)
        return out
    # One intra-op thread per worker: OpenMP is per thread, so each pool thread sets it itself.
    previous = torch.get_num_threads()
    workers = max(1, min(previous, len(tasks)))

    def run_single_threaded(task: tuple[int, int]) -> int:
        torch.set_num_threads(1)
        return run(task)

    torch.set_num_threads(1)
    try:
        if workers == 1:
            for task in tasks:
                done += run(task)
                if progress is not None:
                    progress(done, total)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for n_done in pool.map(run_single_threaded, tasks):
                    done += n_done
                    if progress is not None:
                        progress(done, total)
    finally:
        torch.set_num_threads(previous)
    return out


def pair_distances(
    tokens: Sequence[ArrayLike],
    pairs: np.ndarray | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
    eps: float | None = None,
    normalize: bool = True,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    chunk_size: int | None = None,
    max_memory_mb: float = _DEFAULT_MAX_MEMORY_MB,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """``d_mu``, ``d_sigma`` and SOCM for pairs of texts, batched and exact.

    Args:
        tokens: ``T`` token-state matrices, ``tokens[t]`` of shape ``(n_t, d)`` (same ``d`` for all).
        pairs: int array ``(P, 2)`` of text indices, or ``None`` for all ``i < j`` pairs.
        alpha, beta: SOCM exponents, ``(1 - d_mu)^alpha * d_sigma^beta``.
        eps: ``None`` (exact, batched); a number reproduces the reference ``d x d`` path per pair
            (:func:`bw2_reference_eps`, float64, slow, ``d_sigma`` not clamped).
        normalize: scale each text to a unit-norm mean first (paper Eq. 8). Without it ``d_mu``
            and ``d_sigma`` are no longer in ``[0, 1]``.
        device: torch device for the batched path (default :func:`flare_core.device.pick_device`).
        dtype: ``torch.float32`` (fast) or ``torch.float64`` (reference accuracy) for the nuclear
            norms; means, traces and ``d_mu`` are always float64.
        chunk_size: pairs per batch; default derived from ``max_memory_mb``.
        max_memory_mb: working-memory budget for one batch (and for keeping all padded texts
            resident as ``(T, N_max, d)``; otherwise chunks are assembled text by text).
        progress: called as ``progress(done_pairs, total_pairs)`` after each batch.

    Returns:
        DataFrame with one row per pair, in the order of ``pairs``: ``i``, ``j`` (int64), ``d_mu``,
        ``d_sigma``, ``socm`` (float64). ``d_sigma = BW^2 / 4`` with tiny negative rounding clamped
        to 0 on the exact path.
    """
    alpha = _check_exponent(alpha, "alpha")
    beta = _check_exponent(beta, "beta")
    _check_eps(eps)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if isinstance(tokens, np.ndarray | torch.Tensor) and getattr(tokens, "ndim", 0) == 2:
        raise ValueError("tokens must be a sequence of (n_i, d) matrices, one per text, not a single matrix")
    n_texts = len(tokens)
    if n_texts < 1:
        raise ValueError("tokens is empty: need at least one text")
    if pairs is None:
        if n_texts < 2:
            raise ValueError("need at least 2 texts for all pairs")
        pairs_arr = sample_pairs(n_texts, "all")
    else:
        pairs_arr = _check_pairs(pairs, n_texts)
    check_int(chunk_size, "chunk_size", min_value=1, allow_none=True)
    check_number(max_memory_mb, "max_memory_mb", min_value=0, include_min=False, finite=False)
    dev = pick_device(str(device) if device is not None else None)
    if dev.type == "mps" and dtype == torch.float64:
        raise ValueError("float64 is not supported on MPS; use dtype=torch.float32 or device='cpu'")

    # per text, in float64: scale, mean, trace, and the centred 1/sqrt(n) block in `dtype`: kept for
    # texts held in memory, rebuilt from the store on demand for a TokenStates store on disk
    on_disk = isinstance(tokens, TokenStates)
    means_l, traces_l, scales, lengths_l, blocks = [], [], [], [], []
    bad = []
    dim = None
    for k in range(n_texts):
        m = _as_matrix(tokens[k], f"tokens[{k}]").cpu()
        if dim is None:
            dim = m.shape[1]
        elif m.shape[1] != dim:
            raise ValueError(
                f"all token matrices must have the same dimension, got {sorted({dim, m.shape[1]})}"
            )
        x = m.to(torch.float64)
        mu = x.mean(dim=0)
        norm = 1.0
        if normalize:
            norm = float(torch.linalg.vector_norm(mu))
            if not norm > 0.0:
                bad.append(k)
                continue
            x, mu = x / norm, mu / norm
        b = (x - mu) / math.sqrt(x.shape[0])
        means_l.append(mu)
        scales.append(norm)
        lengths_l.append(x.shape[0])
        traces_l.append(float((b * b).sum()))  # tr Sigma_t
        if eps is None and not on_disk:
            blocks.append(b.to(dtype))
    if bad:
        raise ValueError(f"texts {bad[:5]} have a zero mean token state: cannot normalise")
    means = torch.stack(means_l)  # (T, d)
    traces = np.array(traces_l)  # (T,)
    lengths = np.array(lengths_l, dtype=np.int64)
    if eps is None and on_disk:
        blocks = _TextBlocks(tokens, means, scales, dtype, normalize, cache_bytes=max_memory_mb * 2**20 / 2)

    n_pairs = len(pairs_arr)
    ii, jj = pairs_arr[:, 0], pairs_arr[:, 1]
    d_mu = np.empty(n_pairs, dtype=np.float64)
    step = max(1, int(2**24 // means.shape[1]))  # (step, d) float64 differences: <= 128 MiB at a time
    for a in range(0, n_pairs, step):
        diff = means[torch.as_tensor(ii[a : a + step])] - means[torch.as_tensor(jj[a : a + step])]
        d_mu[a : a + step] = (diff * diff).sum(dim=1).numpy() / 4.0

    bw2 = np.zeros(n_pairs, dtype=np.float64)
    if eps is not None:
        for k in range(n_pairs):
            x1 = _as_matrix(tokens[ii[k]], f"tokens[{ii[k]}]").cpu().to(torch.float64)
            x2 = _as_matrix(tokens[jj[k]], f"tokens[{jj[k]}]").cpu().to(torch.float64)
            if normalize:
                x1, x2 = _normalize(x1), _normalize(x2)
            bw2[k] = _bw2_reference(x1, x2, float(eps))
            if progress is not None and ((k + 1) % 64 == 0 or k + 1 == n_pairs):
                progress(k + 1, n_pairs)
    elif n_pairs:
        nuclear = _batched_nuclear(blocks, lengths, ii, jj, dev, dtype, chunk_size, max_memory_mb, progress)
        bw2 = np.clip(traces[ii] + traces[jj] - 2.0 * nuclear, 0.0, None)
    d_sigma = bw2 / 4.0
    return pd.DataFrame(
        {
            "i": ii.astype(np.int64),
            "j": jj.astype(np.int64),
            "d_mu": d_mu.astype(np.float64),
            "d_sigma": d_sigma,
            "socm": socm_value(d_mu, d_sigma, alpha, beta) if n_pairs else np.zeros(0),
        },
        columns=PAIR_COLUMNS,
    )


# ----------------------------------------------------------------------------------------------
# summaries and views
# ----------------------------------------------------------------------------------------------


def _check_pair_frame(df: Any, columns: Sequence[str]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"expected a DataFrame from pair_distances, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"DataFrame is missing columns {missing}; expected those of pair_distances: {PAIR_COLUMNS}"
        )
    return df


def collapse_summary(df: pd.DataFrame) -> dict[str, Any]:
    """Summary statistics of a :func:`pair_distances` frame.

    Returns:
        ``{"n_pairs": P, "socm": stats, "d_mu": stats, "d_sigma": stats}`` where ``stats`` has
        ``mean``, ``std``, ``min``, ``q05``, ``q25``, ``median``, ``q75``, ``q95``, ``max`` (floats; NaN
        when ``P = 0``).
    """
    _check_pair_frame(df, ["d_mu", "d_sigma", "socm"])
    out: dict[str, Any] = {"n_pairs": len(df)}
    for col in ("socm", "d_mu", "d_sigma"):
        v = df[col].to_numpy(dtype=np.float64)
        if v.size == 0:
            out[col] = dict.fromkeys(
                ("mean", "std", "min", "q05", "q25", "median", "q75", "q95", "max"), math.nan
            )
            continue
        q = np.quantile(v, _SUMMARY_QUANTILES)
        out[col] = {
            "mean": float(v.mean()),
            "std": float(v.std(ddof=0)),
            "min": float(v.min()),
            "q05": float(q[0]),
            "q25": float(q[1]),
            "median": float(q[2]),
            "q75": float(q[3]),
            "q95": float(q[4]),
            "max": float(v.max()),
        }
    return out


def most_collapsed(df: pd.DataFrame, k: int = 20) -> pd.DataFrame:
    """The ``k`` pairs with the largest SOCM (ties broken by ``i``, then ``j``), index reset."""
    _check_pair_frame(df, ["i", "j", "socm"])
    k = check_int(k, "k", min_value=1)
    ranked = df.sort_values(["socm", "i", "j"], ascending=[False, True, True], kind="mergesort")
    return ranked.head(int(k)).reset_index(drop=True)


def token_view(
    x1: ArrayLike,
    x2: ArrayLike,
    tokens1: Sequence[str] | None = None,
    tokens2: Sequence[str] | None = None,
    *,
    normalize: bool = True,
) -> pd.DataFrame:
    """2-D PCA without centring of two texts' token states and their means (paper Figure 1).

    The stacked (normalised) tokens ``[X1; X2]`` of shape ``(n1 + n2, d)`` are factored by SVD
    without subtracting a mean; tokens and both mean-pooled embeddings are projected onto the top-2
    right singular vectors (each axis signed so that the sum of the two means' coordinates is >= 0).

    Args:
        x1, x2: token states, shapes ``(n1, d)`` and ``(n2, d)``.
        tokens1, tokens2: optional token strings (lengths ``n1`` and ``n2``); both or neither.
        normalize: scale each text to a unit-norm mean first (as SOCM does).

    Returns:
        DataFrame with ``n1 + n2 + 2`` rows: ``text`` (0/1), ``kind`` ("token"/"mean"), ``position``
        (token index; -1 for means), ``x``, ``y`` and, with token strings, ``token`` ("" for means).
        ``df.attrs["explained"]`` is the share of the squared singular values on the two axes.
    """
    t1, t2 = _as_matrix(x1, "x1").cpu(), _as_matrix(x2, "x2").cpu()
    if t1.shape[1] != t2.shape[1]:
        raise ValueError(f"x1 and x2 must have the same dimension, got {t1.shape[1]} and {t2.shape[1]}")
    if t1.shape[1] < 2:
        raise ValueError("token_view needs dimension >= 2")
    if (tokens1 is None) != (tokens2 is None):
        raise ValueError("give both tokens1 and tokens2, or neither")
    if tokens1 is not None and (len(tokens1) != t1.shape[0] or len(tokens2) != t2.shape[0]):
        raise ValueError(
            f"token strings do not match the states: {len(tokens1)}/{len(tokens2)} strings for "
            f"{t1.shape[0]}/{t2.shape[0]} rows"
        )
    a = (normalize_tokens(t1) if normalize else t1).to(torch.float64)
    b = (normalize_tokens(t2) if normalize else t2).to(torch.float64)
    stacked = torch.cat([a, b])
    _, s, vh = torch.linalg.svd(stacked, full_matrices=False)
    axes = vh[:2].T  # (d, 2)
    if axes.shape[1] < 2:
        axes = torch.cat([axes, torch.zeros((axes.shape[0], 2 - axes.shape[1]), dtype=axes.dtype)], dim=1)
    means = torch.stack([a.mean(dim=0), b.mean(dim=0)])
    sign = torch.where((means @ axes).sum(dim=0) < 0, -1.0, 1.0).to(torch.float64)
    axes = axes * sign
    pts = (torch.cat([a, b, means]) @ axes).numpy()
    n1, n2 = a.shape[0], b.shape[0]
    df = pd.DataFrame(
        {
            "text": np.concatenate([np.zeros(n1), np.ones(n2), [0, 1]]).astype(np.int64),
            "kind": ["token"] * (n1 + n2) + ["mean", "mean"],
            "position": np.concatenate([np.arange(n1), np.arange(n2), [-1, -1]]).astype(np.int64),
            "x": pts[:, 0],
            "y": pts[:, 1],
        }
    )
    if tokens1 is not None:
        df["token"] = [str(t) for t in tokens1] + [str(t) for t in tokens2] + ["", ""]
    energy = float((s**2).sum())
    df.attrs["explained"] = float((s[:2] ** 2).sum()) / energy if energy > 0 else 0.0
    return df


def normalized_trace(tokens: Sequence[ArrayLike]) -> np.ndarray:
    """``tr Sigma(X_norm)`` per text: ``mean_j ||x_j||^2 / ||mu(X)||^2 - 1`` (= ``S(X)/||mu(X)||^2``).

    Args:
        tokens: ``T`` matrices of shape ``(n_t, d)``.

    Returns:
        float64 array ``(T,)``.
    """
    mats = _token_list(tokens)
    out = np.empty(len(mats))
    for k, x in enumerate(mats):
        x = x.to(torch.float64)
        mu2 = float((x.mean(dim=0) ** 2).sum())
        if not mu2 > 0:
            raise ValueError(f"tokens[{k}] has a zero mean token state: cannot normalise")
        out[k] = float((x * x).sum(dim=1).mean()) / mu2 - 1.0
    return np.clip(out, 0.0, None)


def _token_list(tokens: Sequence[ArrayLike]) -> list[torch.Tensor]:
    if isinstance(tokens, np.ndarray | torch.Tensor) and getattr(tokens, "ndim", 0) == 2:
        raise ValueError("tokens must be a sequence of (n_i, d) matrices, one per text, not a single matrix")
    mats = [_as_matrix(x, f"tokens[{k}]") for k, x in enumerate(tokens)]
    if not mats:
        raise ValueError("tokens is empty")
    return mats


def trace_bound_holds(tokens: Sequence[ArrayLike], bound: float = 2.0) -> np.ndarray:
    """Whether the paper's assumption ``tr Sigma(X_norm) <= 2`` (§4.2.1) holds, text by text.

    Appendix J proves the bound only under two assumptions: (1) token states are LayerNorm outputs with
    ``gamma`` and ``beta`` shared across dimensions, so every token has the same norm, and (2) the
    mean pairwise cosine ``E_{j<k} cos(x_j, x_k) >= 1/3``. Then
    ``tr Sigma(X_norm) = n / (1 + (n - 1) c) - 1 <= 2 (n - 1) / (n + 2) < 2``; with equal norms the
    exact condition is ``c >= (n - 3) / (3 (n - 1))``. Real models have per-dimension LayerNorm
    parameters, so the bound is an empirical question; :func:`trace_bound_report` gives the details.

    Args:
        tokens: ``T`` matrices of shape ``(n_t, d)``.
        bound: the trace bound (default 2).

    Returns:
        bool array ``(T,)``; the values themselves come from :func:`normalized_trace`.
    """
    if not isinstance(bound, int | float) or not math.isfinite(bound):
        raise ValueError(f"bound must be a finite number, got {bound!r}")
    return normalized_trace(tokens) <= bound


def trace_bound_report(tokens: Sequence[ArrayLike]) -> pd.DataFrame:
    """Per-text check of the Appendix J trace bound.

    Returns:
        DataFrame with one row per text: ``n_tokens``; ``trace`` (``tr Sigma(X_norm)``);
        ``mean_cos_pairs`` (``E_{j<k} cos(x_j, x_k)``, NaN for one token); ``norm_cv`` (coefficient of
        variation of the token norms: 0 when Assumption 1's equal norms hold); ``trace_equal_norms``
        (``n / (1 + (n - 1) c) - 1``, the value Appendix J derives, exact when ``norm_cv = 0``);
        ``assumption2`` (``c >= 1/3``); ``holds`` (``trace <= 2``).
    """
    mats = _token_list(tokens)
    rows = []
    traces = normalized_trace(mats)
    for k, x in enumerate(mats):
        x = x.to(torch.float64)
        n = x.shape[0]
        norms = torch.linalg.vector_norm(x, dim=1)
        unit = x / norms.clamp_min(1e-300)[:, None]
        cos_sum = float((unit.sum(dim=0) ** 2).sum())  # sum over all j, k incl. j == k
        c = (cos_sum - n) / (n * (n - 1)) if n > 1 else math.nan
        pred = n / (1 + (n - 1) * c) - 1 if n > 1 else 0.0
        rows.append(
            {
                "n_tokens": n,
                "trace": float(traces[k]),
                "mean_cos_pairs": c,
                "norm_cv": float(norms.std(unbiased=False) / norms.mean()),
                "trace_equal_norms": pred,
                "assumption2": bool(c >= 1 / 3) if n > 1 else True,
                "holds": bool(traces[k] <= 2.0),
            }
        )
    return pd.DataFrame(rows)
