"""The package's layers: each folder of flare_core (a room) is its own layer, imports only point down,
nothing imports in a circle, flare_core never imports Streamlit, the dashboard, the app or the benches,
every module of flare_core is reached from the product (not only from ``bench/`` or the tests), and the
dashboard pages use only the layers meant for them.

Every ``import`` statement counts, including those inside functions (an import deferred for speed is
still a dependency). The checks read a tree of sources (module name → text), so each is also shown to
catch a violation planted in a copy of the real tree.
"""

from __future__ import annotations

import ast
import functools
import re
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
    ("choosing", ["flare_core.choosing"]),  # choosing with labels, over the seeds' analyses
    ("answer", ["flare_core.answer"]),  # labels kept with a run, what they say, the verdict and its trust
    ("run", ["flare_core.run"]),  # the pipeline: params, create, stages, jobs; writes the answer
    ("benchmark", ["flare_core.benchmark"]),  # the validity benchmark: runs of the pipeline on public corpora
    ("view", ["flare_core.view"]),
    ("cli", ["flare_core.cli"]),
    ("api", ["flare_core"]),  # flare_core/__init__.py: the public names, imported on first use
]
PAGE_LAYERS = {"base", "store", "answer", "run", "benchmark", "view"}
#: What flare_core never imports: the UI toolkit, the pages and the app above it, the benches and tests.
FORBIDDEN = ("streamlit", "dashboard", "app", "app_server", "bench", "tests")

#: A tree of sources: module name → (its text, whether it is a package's ``__init__``).
Tree = dict[str, tuple[str, bool]]


def _tree(root: Path, folders: tuple[str, ...], files: tuple[str, ...] = ()) -> Tree:
    """The ``.py`` files of ``folders`` (recursively) and ``files`` under ``root``, by module name."""
    paths = [p for folder in folders for p in sorted((root / folder).rglob("*.py"))] + [
        root / f for f in files
    ]
    found = {}
    for path in paths:
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path.read_text(encoding="utf-8"), is_package)
    return found


MODULES = _tree(ROOT, ("flare_core",))
#: The product above flare_core: the dashboard's pages and the app that serves them.
PRODUCT = _tree(ROOT, ("dashboard",), ("app.py", "app_server.py"))


def _entry_points(root: Path = ROOT) -> set[str]:
    """The modules the product starts from: ``import flare_core`` (the public API), ``python -m
    flare_core.cli`` and the console scripts of pyproject.toml."""
    section = (root / "pyproject.toml").read_text(encoding="utf-8").split("[project.scripts]", 1)[1]
    section = section.split("\n[", 1)[0]
    scripts = re.findall(r'^[\w-]+ = "([\w.]+):\w+"', section, flags=re.MULTILINE)
    return {"flare_core", "flare_core.cli.__main__", *scripts}


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


@functools.cache
def _parse(text: str) -> ast.Module:
    """A source's syntax tree, parsed once (the checks of planted trees read the same sources again)."""
    return ast.parse(text)


def _imported(tree: ast.AST, module: str, is_package: bool, modules: Tree) -> Iterator[str]:
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
                yield full if full in modules else prefix


def _graph(modules: Tree = MODULES) -> dict[str, set[str]]:
    """Each module of ``modules`` → the modules of ``modules`` it imports."""
    graph = {}
    for module, (text, is_package) in modules.items():
        targets = set(_imported(_parse(text), module, is_package, modules))
        graph[module] = {t for t in targets if t in modules and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``, each as the path that closes it."""
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
    return cycles


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer (a back arrow), in words."""
    return [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for module, targets in graph.items()
        for target in targets
        if _layer(target) > _layer(module)
    ]


def _references(module: str, text: str, is_package: bool, modules: Tree) -> set[str]:
    """The modules of ``modules`` that ``module`` imports or names for a deferred import: a string holding a
    module's name (``importlib`` targets, ``"package.module"`` or ``"package.module:Name"``) and, in a
    package's ``__init__``, the name of one of its modules (the table of names imported on first use)."""
    tree = _parse(text)
    found = {t for t in _imported(tree, module, is_package, modules) if t in modules}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.partition(":")[0]
            if name in modules:
                found.add(name)
            elif is_package and f"{module}.{name}" in modules:
                found.add(f"{module}.{name}")
    return found - {module}


def _unreached(modules: Tree, product: Tree, entries: set[str]) -> list[str]:
    """The modules of flare_core that nothing of the product reaches: not the pages, the app, the entry
    points, nor any module they reach (a module reached reaches its packages too)."""
    edges = {m: _references(m, text, pkg, modules) for m, (text, pkg) in modules.items()}
    todo = set(entries) | {
        r for m, (text, pkg) in product.items() for r in _references(m, text, pkg, modules)
    }
    reached: set[str] = set()
    while todo:
        module = todo.pop()
        if module in reached or module not in modules:
            continue
        reached.add(module)
        parts = module.split(".")
        todo |= edges[module] | {".".join(parts[:i]) for i in range(1, len(parts))}
    return sorted(set(modules) - reached)


def _forbidden_imports(modules: Tree) -> dict[str, list[str]]:
    """Each module of ``modules`` that imports something of :data:`FORBIDDEN`, with what it imports."""
    offenders = {}
    for module, (text, _) in modules.items():
        names = _all_imports(text)
        wrong = sorted(n for n in names if n.split(".")[0] in FORBIDDEN)
        if wrong:
            offenders[module] = wrong
    return offenders


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_only_point_down():
    assert _upward(_graph()) == []


def test_no_import_circle():
    assert _cycles(_graph()) == []


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


def _all_imports(text: str) -> set[str]:
    names = set()
    for node in ast.walk(_parse(text)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_flare_core_never_imports_streamlit_the_pages_the_app_or_the_benches():
    assert _forbidden_imports(MODULES) == {}


def test_every_module_of_flare_core_is_reached_from_the_product():
    """A module that only ``bench/`` or the tests import belongs with them (``bench/studies/``)."""
    entries = _entry_points()
    assert entries <= set(MODULES) and "flare_core.cli.process_exit" in entries
    assert len(PRODUCT) >= 10 and "app" in PRODUCT
    assert _unreached(MODULES, PRODUCT, entries) == []


def _planted(module: str, line: str) -> Tree:
    """A copy of flare_core's tree with ``line`` added to ``module`` (a new module when there is none)."""
    tree = dict(MODULES)
    text, is_package = tree.get(module, ("", False))
    tree[module] = (text + "\n" + line + "\n", is_package)
    return tree


def test_each_check_catches_a_violation_planted_in_the_real_tree():
    entries = _entry_points()
    # a module only a study imports
    orphan = _planted("flare_core.benchmark.orphan_draws", "from flare_core.benchmark import suite")
    assert _unreached(orphan, PRODUCT, entries) == ["flare_core.benchmark.orphan_draws"]
    # a module reached only through another that nothing reaches
    chain = _planted("flare_core.benchmark.orphan_draws", "from flare_core.benchmark import orphan_parts")
    chain["flare_core.benchmark.orphan_parts"] = ("import numpy\n", False)
    assert _unreached(chain, PRODUCT, entries) == [
        "flare_core.benchmark.orphan_draws",
        "flare_core.benchmark.orphan_parts",
    ]
    # a module reached only by a deferred import named in a string is reached
    deferred = _planted("flare_core.benchmark.orphan_draws", "import numpy")
    deferred = {
        **deferred,
        "flare_core.benchmark.suite": (
            deferred["flare_core.benchmark.suite"][0]
            + '\nTARGET = "flare_core.benchmark.orphan_draws:run"\n',
            False,
        ),
    }
    assert _unreached(deferred, PRODUCT, entries) == []
    # a circle, a back arrow, and the imports flare_core never makes
    circle = _planted("flare_core.store.atomic", "from flare_core.store import runs")
    assert any(c[0] == c[-1] and "flare_core.store.atomic" in c for c in _cycles(_graph(circle)))
    back = _planted("flare_core.store.atomic", "from flare_core.view import tables")
    assert _upward(_graph(back)) == ["flare_core.store.atomic (store) imports flare_core.view.tables (view)"]
    for line in (
        "import streamlit as st",
        "from dashboard.common import run_picker",
        "import app",
        "from bench.studies.draws import search_draws",
    ):
        planted = _planted("flare_core.answer.decide", f"def _late():\n    {line}")
        assert list(_forbidden_imports(planted)) == ["flare_core.answer.decide"], line


def test_pages_use_only_the_layers_meant_for_them():
    pages = sorted((ROOT / "dashboard").glob("*.py")) + [ROOT / "app.py"]
    assert len(pages) >= 9
    offenders = {}
    for page in pages:
        used = {
            n
            for n in _all_imports(page.read_text(encoding="utf-8"))
            if n.startswith("flare_core") and n in MODULES
        }
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
    for module, (text, _) in MODULES.items():
        if len(text.splitlines()) > 500 and module not in LONG_MODULES:
            long_modules.append(f"{module}: {len(text.splitlines())} lines")
        for node in ast.walk(_parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{module}.{node.name}"
                length = node.end_lineno - node.lineno + 1
                if length > 80 and name not in LONG_FUNCTIONS:
                    long_functions.append(f"{name}: {length} lines")
    assert long_modules == [] and long_functions == []


#: The longest line ruff format lays out (pyproject.toml's ``[tool.ruff] line-length``).
LINE_LENGTH = int(
    re.search(
        r"^\[tool\.ruff\]\n(?:[^\[].*\n)*?line-length = (\d+)$",
        (ROOT / "pyproject.toml").read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    ).group(1)
)
#: A comment that tells ruff format to leave a statement (or a block) as written.
FORMAT_OFF = re.compile(r"#\s*fmt:\s*(skip|off)\b")
#: Lines allowed above :data:`LINE_LENGTH` ("module:line number" → why; none today).
LONG_LINES: dict[str, str] = {}


def _packed(modules: Tree) -> list[str]:
    """Every line of ``modules`` that ruff format is told to skip or that runs past :data:`LINE_LENGTH`
    characters: a module kept under the size limit by packing statements onto long lines instead of
    splitting it by concept."""
    found = []
    for module, (text, _) in modules.items():
        for number, line in enumerate(text.splitlines(), 1):
            if FORMAT_OFF.search(line):
                found.append(f"{module}:{number}: {FORMAT_OFF.search(line).group(0)}")
            elif len(line) > LINE_LENGTH and f"{module}:{number}" not in LONG_LINES:
                found.append(f"{module}:{number}: {len(line)} characters")
    return found


def test_no_module_is_packed_onto_long_lines():
    """Ruff format lays out every module of flare_core and the dashboard: no ``# fmt: skip`` (nor ``fmt:
    off``) and no line over the line length, so a module stays under 500 lines only by splitting concepts."""
    assert LINE_LENGTH == 110
    assert _packed({**MODULES, **_tree(ROOT, ("dashboard",))}) == []


def test_the_packing_check_catches_a_skip_and_a_long_line_planted_in_the_real_tree():
    skipped = _planted("flare_core.answer.decide", "X = {'a': 1,  'b': 2}  # fmt: skip")
    assert [line.split(": ", 1)[1] for line in _packed(skipped)] == ["# fmt: skip"]
    off = _planted("flare_core.answer.decide", "# fmt: off")
    assert [line.split(": ", 1)[1] for line in _packed(off)] == ["# fmt: off"]
    long = _planted("flare_core.answer.decide", "X = " + "1 + " * 27 + "1")  # 4 + 108 + 1 characters
    assert [line.split(": ", 1)[1] for line in _packed(long)] == ["113 characters"]
    fits = _planted("flare_core.answer.decide", "X = " + "1 + " * 26 + "1")  # 109 characters
    assert _packed(fits) == []
