"""The docs hold what the README leaves out: every page is in the navigation, every page the project
promises exists with its sections, the Layout names every module, and the site builds with ``--strict``
(no broken link or anchor)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

#: Each page the docs promise, with headings (or markers) it must hold.
PAGES = {
    "index.md": ["## The pages"],
    "install.md": ["## Setup and launch", "## Tests", "## These docs"],
    "cli.md": ["# Command line"],
    "answer.md": ["## The answer: which model to use", "## How far to trust it"],
    "benchmark.md": [
        "## The tables",
        "<!-- benchmark:start -->",
        "<!-- benchmark-retrieval:start -->",
        "## The larger pool",
        "## Search, judged by search",
        "## Other label-free scores",
    ],
    "methods.md": [
        "## Information sufficiency",
        "## Mean-pooling collapse",
        "## Information sufficiency against known truth",
        "## Estimator presets",
    ],
    "sharing.md": ["# Sharing safely", "<!-- sharing-table -->", "<!-- /sharing-table -->"],
    "large-studies.md": ["**Measured on a GPU**", "## On a Ray cluster"],
    "reliability.md": ["# Reliability", "**Resume.**"],
    "models.md": ["# Models and costs", "## What each model costs", "## A run of the whole pool"],
    "configuration.md": ["# Configuration", "`FLARE_RUNS_DIR`"],
    "contributing.md": ["## Layout", "## To change X, open Y", "## Conventions"],
    "reading.md": [
        "# How to read your answer",
        "## The Overview, number by number",
        "## How far to trust it",
    ],
    "glossary.md": ["# Glossary", "## The answer", "## Your labels and judgements"],
}


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _block(tag: str, text: str) -> str:
    """The command between ``<!-- tag -->`` and ``<!-- /tag -->`` (as ``.ci/run`` reads it)."""
    body = text.split(f"<!-- {tag} -->", 1)[1].split(f"<!-- /{tag} -->", 1)[0]
    return "\n".join(line for line in body.splitlines() if line.strip() and not line.startswith("```"))


def test_the_navigation_lists_every_page_once_and_only_pages_that_exist():
    nav = _nav_pages(CONFIG["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages and len(nav) == len(set(nav))
    assert CONFIG["theme"]["name"] == "material" and CONFIG["strict"] is True


def test_every_promised_page_holds_its_sections():
    missing = {
        page: [h for h in headings if h not in (DOCS / page).read_text(encoding="utf-8")]
        for page, headings in PAGES.items()
    }
    assert not {page: m for page, m in missing.items() if m}


def test_the_install_page_shows_the_readme_commands_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = (DOCS / "install.md").read_text(encoding="utf-8")
    for tag in ("install", "test"):
        assert _block(tag, readme) in install, tag
    assert "mkdocs build --strict" in _block("test", readme)


def _layout_lists() -> dict[str, set[str]]:
    """The Layout section of docs/contributing.md: each ``### `folder/` `` heading and the modules its
    bullets name (``- `name`: …``)."""
    text = (DOCS / "contributing.md").read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    lists = {}
    for part in re.split(r"^### ", layout, flags=re.MULTILINE)[1:]:
        heading, body = part.split("\n", 1)
        folder = re.fullmatch(r"`([\w/]+)/`", heading.strip())
        if folder:
            lists[folder.group(1)] = set(re.findall(r"^- `(\w+)`:", body, flags=re.MULTILINE))
    return lists


def _modules() -> dict[str, set[str]]:
    """The modules of ``flare_core/`` (each folder), ``dashboard/`` and ``bench/`` that git tracks (files
    on disk where there is no git checkout), by folder."""
    listed = subprocess.run(
        ["git", "ls-files", "--", "flare_core", "dashboard", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode == 0 and listed.stdout.strip():
        paths = [Path(line) for line in listed.stdout.splitlines()]
    else:
        paths = [
            p.relative_to(ROOT) for d in ("flare_core", "dashboard", "bench") for p in (ROOT / d).rglob("*")
        ]
    modules: dict[str, set[str]] = {}
    for path in paths:
        if path.suffix == ".py" and "__pycache__" not in path.parts and (ROOT / path).is_file():
            modules.setdefault(path.parent.as_posix(), set()).add(path.stem)
    return {folder: names - {"__init__"} for folder, names in modules.items()}


def test_the_layout_names_every_module_of_the_library_the_pages_and_the_benches():
    lists = _layout_lists()
    modules = _modules()
    assert {
        "flare_core",
        "flare_core/answer",
        "dashboard",
        "bench/studies",
        "bench/speed",
        "bench/faults",
    } <= set(modules)
    for folder, names in sorted(modules.items()):
        assert folder in lists, f"docs/contributing.md, Layout: add a section ### `{folder}/`"
        assert lists[folder] == names, (
            f"docs/contributing.md, Layout, `{folder}/`: name {sorted(names - lists[folder])}, "
            f"drop {sorted(lists[folder] - names)}"
        )


def test_contributing_points_to_the_one_layout():
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "docs/contributing.md" in contributing and "## Layout" not in contributing
    assert "## Layout" not in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_docs_build_with_strict_links(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "benchmark" / "index.html").is_file()
    # system fonts (theme.font: false): no page loads anything from another host (Google Fonts before)
    pages = sorted((tmp_path / "site").rglob("*.html"))
    external = re.compile(r"<(?:link|script|img|iframe)\b[^>]*\b(?:href|src)=\"(?:https?:)?//[^\"]*\"")
    loads = {str(p.relative_to(tmp_path)): external.findall(p.read_text(encoding="utf-8")) for p in pages}
    assert len(pages) >= 14 and {page: found for page, found in loads.items() if found} == {}


#: The terms a person meets on the pages (the answer, New run, the labelling page, the analysis pages), each
#: of which the glossary explains.
TERMS = [
    "Accuracy", "Points", "nDCG@10", "Behind the best", "Tied", "Good enough", "Tolerance",
    "Cheapest model that is good enough", "Chance of being the best", "Chance of being good enough",
    "Provisional", "Settled", "Label-free ranking", "Label-free rule", "Trust", "Agreement", "Benchmark",
    "Label", "Category", "Batch", "Skipped", "Query", "Judgement", "Relevant", "Pooling", "Embedding",
    "Model", "Candidate", "Controls", "Reference model", "Dimensions", "Effective rank", "Token",
    "Mean pooling", "TF-IDF", "Speed", "Peak memory", "Storage", "Information sufficiency",
    "Nats per dimension", "FLARE score", "EMIR score", "Normalizing flows", "Gaussian mixtures",
    "Likely between", "IS graph", "Communities", "Embedding map", "Mean-pooling collapse",
    "Layer-wise concentration", "Uniformity", "IsoScore", "Silhouette", "Supervised oracle", "Macro-F1",
    "Stability", "Run", "Share link", "Report", "Bundle",
]  # fmt: skip
#: Words of the statistics page that the plain page leaves to it.
STATISTICS = ["Nadeau", "Bengio", "ridge", "Jeffreys", "Brier", "posterior", "bootstrap", "nats", "t-test"]
PICTURE = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")


def _prose_words(text: str) -> int:
    """The words a person reads: a link's target and a picture's address are not read."""
    return len(re.sub(r"\]\([^)]*\)", "]", text).split())


def test_how_to_read_your_answer_is_short_plain_and_shows_the_annotated_overview():
    text = (DOCS / "reading.md").read_text(encoding="utf-8")
    assert _prose_words(text) <= 800
    assert "](assets/overview-annotated.png)" in text
    callouts = re.findall(r"^(\d+)\. \*\*", text, flags=re.MULTILINE)
    assert callouts == [str(n) for n in range(1, 10)], "one item per numbered callout of the picture, 1 to 9"
    assert not [word for word in STATISTICS if word.lower() in text.lower()]
    assert "](answer.md)" in text and "](glossary.md)" in text, "the details and the terms are a link away"


def test_the_glossary_explains_every_term_in_one_or_two_sentences():
    text = (DOCS / "glossary.md").read_text(encoding="utf-8")
    entries = dict(re.findall(r"^### ([^\n]+)\n\n(.+?)(?=\n\n|\Z)", text, flags=re.MULTILINE | re.DOTALL))
    assert not [term for term in TERMS if term not in entries], "terms the glossary does not explain"
    long = {term: body for term, body in entries.items() if len(re.findall(r"[.!?](?:\s|$)", body)) > 2}
    assert not long, long
    assert all(len(body.split()) <= 60 for body in entries.values())


def test_the_pictures_are_kept_once_in_the_top_level_assets_folder():
    assert not (DOCS / "assets").exists(), "the pictures live in assets/ at the top, once"
    assert not [p for p in DOCS.rglob("*") if p.suffix.lower() in PICTURE]
    texts = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    texts |= {f"docs/{p.name}": p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")}
    linked = {
        (name, path) for name, text in texts.items() for path in re.findall(r"\]\((assets/[^)\s]+)\)", text)
    }
    assert {
        ("README.md", "assets/overview.png"),
        ("docs/reading.md", "assets/overview-annotated.png"),
    } <= linked
    assert not [(name, path) for name, path in linked if not (ROOT / path).is_file()]
    kept = {f"assets/{p.name}" for p in (ROOT / "assets").iterdir()}
    assert {path for _, path in linked} == kept, "every picture of assets/ is shown somewhere"
    assert "mkdocs_hooks.py" in CONFIG["hooks"] and "assets" in CONFIG["watch"]
