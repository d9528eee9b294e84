"""Fixtures of the pipeline's tests."""

from __future__ import annotations

import pandas as pd
import pytest

from flare_core.data.demo import bbc_news_frame


@pytest.fixture(scope="module")
def articles() -> pd.DataFrame:
    """30 BBC News articles, 6 per topic."""
    return bbc_news_frame(n_per_topic=6, seed=1)
