"""Runs with planted embeddings: three "models" of the same 60 texts in 3 classes, one that separates the
classes cleanly, one that half does, one of noise, so the best model is known without training anything
(built by :func:`tests.support.planted_run`)."""

from __future__ import annotations

import pytest

try:
    from tests.support import planted_run
except ImportError:  # pytest put tests/ itself on sys.path
    from support import planted_run  # type: ignore[no-redef]


@pytest.fixture
def unlabelled(tmp_path):
    """A finished run of the planted embeddings without labels, and the true labels (for a simulated user)."""
    return planted_run(tmp_path, with_labels=False)


@pytest.fixture
def labelled(tmp_path):
    """The same run with the true labels in the corpus."""
    return planted_run(tmp_path, with_labels=True)
