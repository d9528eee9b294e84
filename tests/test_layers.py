"""The package's layers: each folder of flare_core (a room) is its own layer, imports only point down,
nothing imports in a circle, flare_core never imports Streamlit, and the dashboard pages use only the
layers meant for them.

Every ``import`` statement counts, including those inside functions (an import deferred for speed is
still a dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flare_core"

# Bottom to top. A module may import modules of its own layer and of the layers below it, never above.
LAYERS = [
    ("base", ["flare_core.errors", "flare_core.checks", "flare_core.device", "flare_core.edge"]),
    ("compute", ["flare_core.compute"]),  # executors and the scheduler: the matrix's units run on them
    ("store", ["flare_core.store"]),
    ("data", ["flare_core.data"]),
    ("encoders", ["flare_core.encoders"]),
    ("analyses", ["flare_core.analyses"]),
    ("answer", ["flare_core.answer"]),  # labels kept with a run, what they say, the verdict and its trust
    ("run", ["flare_core.run"]),  # the pipeline: params, create, stages, jobs; writes the answer
    ("benchmark", ["flare_core.benchmark"]),  # the validity benchmark: runs of the pipeline on public corpora
    ("view", ["flare_core.view"]),
    ("cli", ["flare_core.cli"]),
    ("api", ["flare_core"]),  # flare_core/__init__.py: the public names, imported on first use
]
PAGE_LAYERS = {"base", "store", "answer", "run", "benchmark", "view"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _layer(module: str) -> int:
    """Index in LAYERS of the layer ``module`` belongs to (the longest matching prefix wins)."""
    matches = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    assert matches, f"{module} belongs to no layer: add its folder to LAYERS"
    return max(matches)[1]


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every module name ``module`` imports (``from a.b import c`` is ``a.b.c`` when that is a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                yield full if full in MODULES else prefix


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set(_imported(tree, module, path.name == "__init__.py"))
        graph[module] = {t for t in targets if t in MODULES and t != module}
    return graph


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_only_point_down():
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_no_import_circle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_layer_graph_has_a_depth():
    """The longest chain of layers a module reaches through imports (reported in the docs)."""
    graph = _graph()
    depth: dict[str, int] = {}

    def chain(module: str) -> int:
        if module not in depth:
            below = [chain(t) + (_layer(t) != _layer(module)) for t in graph[module]]
            depth[module] = max(below, default=0)
        return depth[module]

    deepest = max(chain(m) for m in graph)
    assert 1 <= deepest < len(LAYERS)


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_flare_core_never_imports_streamlit():
    offenders = [
        module
        for module, path in MODULES.items()
        if any(n == "streamlit" or n.startswith("streamlit.") for n in _all_imports(path))
    ]
    assert offenders == []


def test_pages_use_only_the_layers_meant_for_them():
    pages = sorted((ROOT / "dashboard").glob("*.py")) + [ROOT / "app.py"]
    assert len(pages) >= 9
    offenders = {}
    for page in pages:
        used = {n for n in _all_imports(page) if n.startswith("flare_core") and n in MODULES}
        wrong = sorted(n for n in used if LAYERS[_layer(n)][0] not in PAGE_LAYERS)
        if wrong:
            offenders[page.name] = wrong
    assert offenders == {}


# Modules and functions allowed above the limits, with the reason (none today).
LONG_MODULES: dict[str, str] = {}
LONG_FUNCTIONS: dict[str, str] = {}


def test_modules_and_functions_stay_small():
    """No module above 500 lines and no function above 80 (docstring included)."""
    long_modules, long_functions = [], []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 500 and module not in LONG_MODULES:
            long_modules.append(f"{module}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{module}.{node.name}"
                length = node.end_lineno - node.lineno + 1
                if length > 80 and name not in LONG_FUNCTIONS:
                    long_functions.append(f"{name}: {length} lines")
    assert long_modules == [] and long_functions == []
