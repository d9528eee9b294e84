"""Fixtures of the pipeline's tests."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.data.demo import bbc_news_frame


@pytest.fixture(scope="session")
def _articles() -> pd.DataFrame:
    return bbc_news_frame(n_per_topic=6, seed=1)


@pytest.fixture
def articles(_articles) -> pd.DataFrame:
    """30 BBC News articles, 6 per topic (a copy for each test: the tests that use them share no module
    fixture, so pytest-xdist spreads them over its workers)."""
    return _articles.copy()
