"""IS graph construction, Louvain communities, layout and plotting frames."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from flare_core.analyses.graph import (
    EDGE_COLUMNS,
    NODE_COLUMNS,
    communities,
    graph_frames,
    graph_layout,
    is_graph,
)
from tests.properties import assert_finite


def _small():
    return pd.DataFrame(
        [[9.0, 0.5, -0.2], [0.3, 9.0, np.nan], [0.05, 0.0, 9.0]],
        index=["a", "b", "c"],
        columns=["a", "b", "c"],
    )


def _two_cliques() -> pd.DataFrame:
    names = [f"p{i}" for i in range(4)] + [f"q{i}" for i in range(4)]
    values = np.full((8, 8), 0.01)
    values[:4, :4] = 1.0
    values[4:, 4:] = 1.0
    return pd.DataFrame(values, index=names, columns=names)


def test_is_graph_edges_weights_clipping_and_no_self_loops():
    g = is_graph(_small(), scores=pd.Series({"a": 0.7, "b": 0.1}))
    assert isinstance(g, nx.DiGraph)
    assert sorted(g.edges(data="weight")) == [("a", "b", 0.5), ("b", "a", 0.3), ("c", "a", 0.05)]
    assert nx.number_of_selfloops(g) == 0
    assert g.nodes["a"]["score"] == 0.7 and np.isnan(g.nodes["c"]["score"])


def test_is_graph_threshold_drops_light_edges():
    g = is_graph(_small(), threshold=0.1)
    assert sorted(g.edges) == [("a", "b"), ("b", "a")]
    assert set(g.nodes) == {"a", "b", "c"}  # isolated nodes stay


def test_is_graph_rectangular_and_validation():
    frame = pd.DataFrame([[0.2, 0.4]], index=["a"], columns=["b", "c"])
    g = is_graph(frame)
    assert set(g.nodes) == {"a", "b", "c"} and g["a"]["c"]["weight"] == 0.4
    with pytest.raises(ValueError, match="threshold"):
        is_graph(_small(), threshold=-1)
    with pytest.raises(ValueError, match="DataFrame"):
        is_graph(_small().to_numpy())
    with pytest.raises(ValueError, match="infinite"):
        is_graph(_small().replace(0.5, np.inf))
    with pytest.raises(ValueError, match="Series"):
        is_graph(_small(), scores={"a": 1.0})


@pytest.mark.parametrize("method", ["networkx", "python-louvain"])
def test_two_cliques_two_communities(method):
    comm = communities(is_graph(_two_cliques()), method=method)
    assert comm == {**{f"p{i}": 0 for i in range(4)}, **{f"q{i}": 1 for i in range(4)}}


def test_community_ids_by_size_then_name_and_seed_reproducible():
    frame = _two_cliques().drop(index="p0", columns="p0")  # p-clique now has 3 members
    g = is_graph(frame)
    comm = communities(g, seed=5)
    assert comm["q0"] == 0 and comm["p1"] == 1
    assert communities(g, seed=5) == comm
    rng = np.random.default_rng(0)
    noisy = is_graph(
        pd.DataFrame(rng.random((12, 12)), index=list("abcdefghijkl"), columns=list("abcdefghijkl"))
    )
    assert communities(noisy, seed=1) == communities(noisy, seed=1)


def test_no_edges_each_node_alone():
    g = is_graph(_small(), threshold=100.0)
    assert communities(g) == {"a": 0, "b": 1, "c": 2}
    assert communities(nx.DiGraph()) == {}
    with pytest.raises(ValueError, match="method"):
        communities(g, method="leiden")


def test_layout_and_frames():
    g = is_graph(_two_cliques(), scores=pd.Series({"p0": 1.0}))
    comm = communities(g)
    layout = graph_layout(g, seed=0)
    assert layout == graph_layout(g, seed=0)
    nodes, edges = graph_frames(g, comm, layout)
    assert list(nodes.columns) == NODE_COLUMNS and list(edges.columns) == EDGE_COLUMNS
    assert len(nodes) == 8 and len(edges) == 8 * 7
    assert_finite(nodes[["x", "y", "community"]].to_numpy(dtype=float), "node positions")
    assert_finite(edges[["weight", "x0", "y0", "x1", "y1"]].to_numpy(dtype=float), "edge positions")
    row = edges[(edges["source"] == "p1") & (edges["target"] == "q2")].iloc[0]
    assert (row["x0"], row["y0"]) == layout["p1"] and (row["x1"], row["y1"]) == layout["q2"]
    assert nodes.set_index("name").loc["p0", "score"] == 1.0
    with pytest.raises(ValueError, match="layout has no entry"):
        graph_frames(g, comm, {})
