"""The information-sufficiency graph between models, its Louvain communities and a plotting layout.

Nodes are models; an edge ``s -> t`` carries ``IS(s -> t) / d_t`` clipped at 0 (how much of target
``t`` the source ``s`` can simulate, per target dimension). Communities group models that simulate
each other well (EMIR: networkx Louvain on the directed graph, resolution 1.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import community as community_louvain
import networkx as nx
import numpy as np
import pandas as pd

from flare_core.checks import check_choice

METHODS = ("networkx", "python-louvain")
NODE_COLUMNS = ["name", "x", "y", "score", "community"]
EDGE_COLUMNS = ["source", "target", "weight", "x0", "y0", "x1", "y1"]


# ----------------------------------------------------------------------------------------------------
# computation


def _renumber(groups: list[set[str]]) -> dict[str, int]:
    """Community ids 0, 1, ... by size (largest first), then by smallest member name."""
    ordered = sorted((sorted(g) for g in groups if g), key=lambda g: (-len(g), g[0]))
    return {node: cid for cid, members in enumerate(ordered) for node in members}


def _symmetrised(graph: nx.DiGraph) -> nx.Graph:
    """Undirected graph with weight ``w(u, v) = w(u -> v) + w(v -> u)`` (same nodes)."""
    und = nx.Graph()
    und.add_nodes_from(graph.nodes(data=True))
    for u, v, w in graph.edges(data="weight", default=1.0):
        if und.has_edge(u, v):
            und[u][v]["weight"] += float(w)
        else:
            und.add_edge(u, v, weight=float(w))
    return und


# ----------------------------------------------------------------------------------------------------
# public API


def is_graph(is_per_dim: pd.DataFrame, scores: pd.Series | None = None, threshold: float = 0.0) -> nx.DiGraph:
    """Directed IS graph from a (sources x targets) table of ``IS(source -> target) / d_target``.

    Node names are the string form of the index and column labels (every model of either appears).
    Edge ``s -> t`` has ``weight = max(is_per_dim.loc[s, t], 0)``; self-loops, NaN entries and edges
    with ``weight <= threshold`` are left out. Node attribute ``score`` comes from ``scores``
    (indexed by model; NaN where missing).

    Raises ``ValueError`` for a non-DataFrame, duplicated or colliding model names, non-numeric
    entries, infinite entries, a non-Series ``scores``, or a negative or non-finite ``threshold``.
    """
    if not isinstance(is_per_dim, pd.DataFrame):
        raise ValueError(f"is_per_dim must be a pandas DataFrame; got {type(is_per_dim).__name__}")
    if not np.isfinite(threshold) or threshold < 0:
        raise ValueError(f"threshold must be a finite number >= 0; got {threshold!r}")
    sources = [str(s) for s in is_per_dim.index]
    targets = [str(t) for t in is_per_dim.columns]
    for what, names in (("index (sources)", sources), ("columns (targets)", targets)):
        if len(set(names)) != len(names):
            raise ValueError(f"is_per_dim {what} has duplicated model names")
    try:
        values = is_per_dim.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"is_per_dim must hold numbers: {exc}") from exc
    if np.isinf(values).any():
        raise ValueError(f"is_per_dim has {int(np.isinf(values).sum())} infinite entries")
    node_scores: dict[str, float] = {}
    if scores is not None:
        if not isinstance(scores, pd.Series):
            raise ValueError(f"scores must be a pandas Series indexed by model; got {type(scores).__name__}")
        try:
            numeric = pd.to_numeric(scores, errors="raise").astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scores must be numeric: {exc}") from exc
        node_scores = {str(k): float(v) for k, v in numeric.items()}

    graph = nx.DiGraph()
    for name in dict.fromkeys(sources + targets):
        graph.add_node(name, score=node_scores.get(name, float("nan")))
    for i, s in enumerate(sources):
        for j, t in enumerate(targets):
            value = values[i, j]
            if s == t or np.isnan(value):
                continue
            weight = max(float(value), 0.0)
            if weight > threshold:
                graph.add_edge(s, t, weight=weight)
    return graph


def communities(
    graph: nx.Graph, resolution: float = 1.1, seed: int = 0, method: str = "networkx"
) -> dict[str, int]:
    """Louvain communities of ``graph`` as ``{node: community id}``.

    ``method="networkx"``: ``networkx.community.louvain_communities`` on the graph as given (directed
    modularity for a DiGraph), ``weight="weight"``. ``method="python-louvain"``:
    ``community.best_partition`` on the symmetrised undirected graph (``w(u,v) = w(u->v) + w(v->u)``).
    Both seeded with ``seed``. Ids are renumbered 0, 1, ... by community size (largest first), then by
    smallest member name. A graph with no edges puts every node in its own community.

    Raises ``ValueError`` for a non-networkx graph, an unknown method, a non-positive resolution, or
    negative edge weights.
    """
    if not isinstance(graph, nx.Graph):
        raise ValueError(f"graph must be a networkx graph; got {type(graph).__name__}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    if not np.isfinite(resolution) or resolution <= 0:
        raise ValueError(f"resolution must be a positive finite number; got {resolution!r}")
    weights = [w for _, _, w in graph.edges(data="weight", default=1.0)]
    if any(not np.isfinite(w) or w < 0 for w in weights):
        raise ValueError("edge weights must be finite and >= 0 for Louvain")
    if graph.number_of_nodes() == 0:
        return {}
    if graph.number_of_edges() == 0 or sum(weights) == 0:
        return _renumber([{str(n)} for n in graph.nodes])
    if method == "networkx":
        groups = nx.community.louvain_communities(graph, weight="weight", resolution=resolution, seed=seed)
        return _renumber([{str(n) for n in g} for g in groups])
    und = _symmetrised(graph) if graph.is_directed() else graph
    partition = community_louvain.best_partition(
        und, weight="weight", resolution=resolution, random_state=seed
    )
    by_id: dict[int, set[str]] = {}
    for node, cid in partition.items():
        by_id.setdefault(cid, set()).add(str(node))
    return _renumber(list(by_id.values()))


def graph_layout(graph: nx.Graph, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Seeded, weighted spring layout: ``{node: (x, y)}``, coordinates in about [-1, 1].

    Raises ``ValueError`` for a non-networkx graph.
    """
    if not isinstance(graph, nx.Graph):
        raise ValueError(f"graph must be a networkx graph; got {type(graph).__name__}")
    if graph.number_of_nodes() == 0:
        return {}
    pos = nx.spring_layout(graph, weight="weight", seed=seed)
    return {str(n): (float(p[0]), float(p[1])) for n, p in pos.items()}


def graph_frames(
    graph: nx.Graph, communities: dict[str, int], layout: dict[str, tuple[float, float]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Plot-ready tables of the graph.

    Returns ``(nodes, edges)``: ``nodes`` has one row per node with columns
    ``name, x, y, score, community`` (score NaN when the node has none); ``edges`` one row per edge
    with ``source, target, weight, x0, y0, x1, y1`` (segment from source to target).

    Raises ``ValueError`` when a node is missing from ``communities`` or ``layout``.
    """
    if not isinstance(graph, nx.Graph):
        raise ValueError(f"graph must be a networkx graph; got {type(graph).__name__}")
    names = [str(n) for n in graph.nodes]
    for what, mapping in (("communities", communities), ("layout", layout)):
        missing = [n for n in names if n not in mapping]
        if missing:
            raise ValueError(f"{what} has no entry for nodes {missing}")
    nodes = pd.DataFrame(
        [
            {
                "name": str(n),
                "x": float(layout[str(n)][0]),
                "y": float(layout[str(n)][1]),
                "score": float(data.get("score", np.nan)),
                "community": int(communities[str(n)]),
            }
            for n, data in graph.nodes(data=True)
        ],
        columns=NODE_COLUMNS,
    )
    edges = pd.DataFrame(
        [
            {
                "source": str(u),
                "target": str(v),
                "weight": float(w),
                "x0": float(layout[str(u)][0]),
                "y0": float(layout[str(u)][1]),
                "x1": float(layout[str(v)][0]),
                "y1": float(layout[str(v)][1]),
            }
            for u, v, w in graph.edges(data="weight", default=1.0)
        ],
        columns=EDGE_COLUMNS,
    )
    return nodes, edges


ORDERS = ("score", "community", "name")


def model_order(
    models: Sequence[str], scores: pd.Series, groups: Mapping[str, int], by: str = "score"
) -> list[str]:
    """``models`` in the order a heatmap shows them.

    ``by="score"``: the scored models by decreasing score, then the unscored ones (references) as
    given; ``"community"``: by community id, then name (a model without a community last);
    ``"name"``: alphabetical.
    """
    check_choice(by, "by", ORDERS)
    models = list(models)
    if by == "score":
        ranked = list(scores.sort_values(ascending=False).index)
        return ranked + [m for m in models if m not in scores]
    if by == "community":
        return sorted(models, key=lambda m: (groups.get(m, 99), m))
    return sorted(models)
