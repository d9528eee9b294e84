"""Exact SOCM for many pairs of texts at once (SOCM; Hara et al., papers/socm_mean_pooling_collapse.txt).

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
see ``bench/speed/socm_pairs.py`` and ``tests/test_collapse.py``):

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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import torch

from flare_core.analyses.collapse.distances import (
    ArrayLike,
    _bw2_reference,
    _check_eps,
    _check_exponent,
    _normalize,
    socm_value,
    token_matrix,
)
from flare_core.analyses.collapse.pairs import check_pairs, sample_pairs
from flare_core.checks import check_int, check_number
from flare_core.compute.executor import torch_threads
from flare_core.device import pick_device
from flare_core.encoders.token_store import TokenStates

Progress = Callable[[int, int], None]

PAIR_COLUMNS = ["i", "j", "d_mu", "d_sigma", "socm"]


_DEFAULT_MAX_MEMORY_MB = 512.0


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
        x = token_matrix(self.tokens[t], f"tokens[{t}]").cpu().to(torch.float64)
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


class _PaddedTexts:
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


def _chunk_nuclear(store: _PaddedTexts, ii: np.ndarray, jj: np.ndarray) -> torch.Tensor:
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
    order = np.lexsort((jj, ii))
    total = len(order)
    if chunk_size is None:
        size = max(1, min(1024, int(budget // (2 * _bytes_per_pair(n_max, n_max, d, itemsize)))))
    else:
        size = chunk_size
    job = _NuclearChunks(_padded_texts(blocks, lengths, dev, dtype, budget), ii[order], jj[order], order)
    tasks = [(a, min(a + size, total)) for a in range(0, total, size)]
    if dev.type != "cpu":
        _progressing(map(job, tasks), total, progress)
        return job.out
    # One intra-op thread per worker: OpenMP is per thread, so each pool thread sets it itself.
    workers = max(1, min(torch.get_num_threads(), len(tasks)))
    with torch_threads(1):
        if workers == 1:
            _progressing(map(job, tasks), total, progress)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                _progressing(pool.map(job.single_threaded, tasks), total, progress)
    return job.out


def _padded_texts(
    blocks: Sequence[torch.Tensor], lengths: np.ndarray, dev: torch.device, dtype: torch.dtype, budget: float
) -> _PaddedTexts:
    """All texts as one zero-padded ``(T, N_max, d)`` tensor on ``dev`` when it fits in ``budget`` bytes;
    otherwise the blocks themselves (moved to ``dev``, or rebuilt from disk on demand)."""
    d = blocks[0].shape[1]
    n_max = int(lengths.max())
    if len(blocks) * n_max * d * torch.empty((), dtype=dtype).element_size() <= budget:
        padded = torch.zeros((len(blocks), n_max, d), dtype=dtype, device=dev)
        for t in range(len(blocks)):
            b = blocks[t]
            padded[t, : b.shape[0]] = b
        if isinstance(blocks, list):
            blocks.clear()  # the padded copy replaces them (internal list owned by pair_distances)
        return _PaddedTexts([], lengths, padded)
    if isinstance(blocks, _TextBlocks):
        blocks.device = dev  # each text's block is rebuilt from disk when a chunk needs it
        return _PaddedTexts(blocks, lengths, None)
    return _PaddedTexts([b.to(dev) for b in blocks], lengths, None)


class _NuclearChunks:
    """``job((a, b))`` computes the nuclear norms of the sorted pairs ``a:b`` into ``out`` (float64, in the
    callers' pair order) and returns how many it did; chunks write disjoint slices, so threads may share
    it."""

    def __init__(self, texts: _PaddedTexts, si: np.ndarray, sj: np.ndarray, order: np.ndarray) -> None:
        self.texts, self.si, self.sj, self.order = texts, si, sj, order
        self.out = np.empty(len(order), dtype=np.float64)

    def __call__(self, chunk: tuple[int, int]) -> int:
        a, b = chunk
        with torch.no_grad():
            nuc = _chunk_nuclear(self.texts, self.si[a:b], self.sj[a:b])
        self.out[self.order[a:b]] = nuc.to(torch.float64).cpu().numpy()
        return b - a

    def single_threaded(self, chunk: tuple[int, int]) -> int:
        torch.set_num_threads(1)
        return self(chunk)


def _progressing(counts: Iterable[int], total: int, progress: Progress | None) -> None:
    """Consume the pair counts of finished chunks, reporting ``progress(done, total)`` after each."""
    done = 0
    for count in counts:
        done += count
        if progress is not None:
            progress(done, total)


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
    pairs_arr, dev = _checked_options(tokens, pairs, eps, dtype, chunk_size, max_memory_mb, device)
    # per text, in float64: scale, mean, trace, and the centred 1/sqrt(n) block in `dtype`: kept for
    # texts held in memory, rebuilt from the store on demand for a TokenStates store on disk
    on_disk = isinstance(tokens, TokenStates)
    means, scales, traces, lengths, blocks = _text_statistics(
        tokens, normalize, dtype, eps is None and not on_disk
    )
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
        bw2 = _reference_bw2(tokens, ii, jj, normalize, float(eps), progress)
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


def _checked_options(
    tokens: Sequence[ArrayLike],
    pairs: np.ndarray | None,
    eps: float | None,
    dtype: torch.dtype,
    chunk_size: int | None,
    max_memory_mb: float,
    device: str | torch.device | None,
) -> tuple[np.ndarray, torch.device]:
    """The (P, 2) pairs to compute (all ``i < j`` when None) and the device, after checking every option."""
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
        pairs_arr = check_pairs(pairs, n_texts)
    check_int(chunk_size, "chunk_size", min_value=1, allow_none=True)
    check_number(max_memory_mb, "max_memory_mb", min_value=0, include_min=False, finite=False)
    dev = pick_device(str(device) if device is not None else None)
    if dev.type == "mps" and dtype == torch.float64:
        raise ValueError("float64 is not supported on MPS; use dtype=torch.float32 or device='cpu'")
    return pairs_arr, dev


def _text_statistics(
    tokens: Sequence[ArrayLike], normalize: bool, dtype: torch.dtype, keep_blocks: bool
) -> tuple[torch.Tensor, list[float], np.ndarray, np.ndarray, list[torch.Tensor]]:
    """Per text: the (normalised) mean (T, d) float64, the scale ``||mu||`` (1 without ``normalize``),
    ``tr Sigma`` (T,), the token count (T,) and, with ``keep_blocks``, the centred ``1/sqrt(n)`` block
    ``B_t`` (n_t, d) in ``dtype``."""
    means, scales, traces, lengths, blocks = [], [], [], [], []
    bad = []
    dim = None
    for k in range(len(tokens)):
        m = token_matrix(tokens[k], f"tokens[{k}]").cpu()
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
        means.append(mu)
        scales.append(norm)
        lengths.append(x.shape[0])
        traces.append(float((b * b).sum()))  # tr Sigma_t
        if keep_blocks:
            blocks.append(b.to(dtype))
    if bad:
        raise ValueError(f"texts {bad[:5]} have a zero mean token state: cannot normalise")
    return torch.stack(means), scales, np.array(traces), np.array(lengths, dtype=np.int64), blocks


def _reference_bw2(
    tokens: Sequence[ArrayLike],
    ii: np.ndarray,
    jj: np.ndarray,
    normalize: bool,
    eps: float,
    progress: Progress | None,
) -> np.ndarray:
    """``BW^2`` of every pair by the reference ``d x d`` path with ``eps`` (float64, one pair at a time)."""
    n_pairs = len(ii)
    bw2 = np.zeros(n_pairs, dtype=np.float64)
    for k in range(n_pairs):
        x1 = token_matrix(tokens[ii[k]], f"tokens[{ii[k]}]").cpu().to(torch.float64)
        x2 = token_matrix(tokens[jj[k]], f"tokens[{jj[k]}]").cpu().to(torch.float64)
        if normalize:
            x1, x2 = _normalize(x1), _normalize(x2)
        bw2[k] = _bw2_reference(x1, x2, eps)
        if progress is not None and ((k + 1) % 64 == 0 or k + 1 == n_pairs):
            progress(k + 1, n_pairs)
    return bw2
