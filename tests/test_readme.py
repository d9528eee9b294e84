"""The README is what a newcomer reads in five minutes: at most 250 lines, plain words on its first screen,
the install and test commands CI runs, and links that lead somewhere (its images and files exist, its
anchors name a heading, its docs links name a page and a heading of that page)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINKS = re.findall(r"\]\(([^)\s]+)\)", README)

#: Words that belong in the docs, not on the README's first screen (its first 40 lines).
JARGON = ["IS(U→V)", "normalizing flow", "normalising flow", "Louvain", "SOCM", "EMIR", "KNIFE", "nats"]


def _anchor(heading: str) -> str:
    """GitHub's (and MkDocs') anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(text: str) -> set[str]:
    body = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # a "# comment" is no heading
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", body, flags=re.MULTILINE)}


def test_the_readme_is_read_in_five_minutes():
    assert len(README.splitlines()) <= 250


def test_the_first_screen_speaks_plainly():
    first_screen = "\n".join(README.splitlines()[:40])
    assert not [word for word in JARGON if word in first_screen]
    assert "](assets/overview.png)" in first_screen, "the README shows the Overview first, from assets/"


def test_the_install_and_test_blocks_ci_runs_are_there():
    for tag in ("install", "test"):
        assert README.count(f"<!-- {tag} -->") == 1 and README.count(f"<!-- /{tag} -->") == 1, tag
    install = README.split("<!-- install -->", 1)[1].split("<!-- /install -->", 1)[0]
    test = README.split("<!-- test -->", 1)[1].split("<!-- /test -->", 1)[0]
    assert "bash install.sh" in install
    for step in ("ruff check .", "ruff format --check .", "mkdocs build --strict", "pytest"):
        assert step in test, step
    assert "mkdocs serve" in README, "the README says how to read the docs"


def test_every_image_and_file_the_readme_links_exists():
    local = [link for link in LINKS if not link.startswith(("http://", "https://", "#", "mailto:"))]
    assert any(link.endswith(".png") for link in local), "the README shows the Overview"
    missing = [link for link in local if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


def test_every_anchor_the_readme_links_names_a_heading():
    assert _anchor("The answer: which model to use") == "the-answer-which-model-to-use"
    broken = []
    for link in LINKS:
        if link.startswith(("http://", "https://")) or "#" not in link:
            continue
        path, anchor = link.split("#", 1)
        text = README if not path else (ROOT / path).read_text(encoding="utf-8")
        if anchor not in _headings(text):
            broken.append(link)
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")}
    linked = {link.split("#")[0] for link in LINKS}
    assert pages <= linked, sorted(pages - linked)


def test_the_demo_s_model_count_is_the_one_the_app_shows():
    from flare_core.run.demo import DEMO_MODELS
    from flare_core.view.verdict import models_chosen_words

    # the Overview's run line counts the candidates, not the two controls every run adds
    demo = {"models": [{"id": m, "role": "candidate"} for m in DEMO_MODELS]
            + [{"id": "random", "role": "control"}, {"id": "shuffled", "role": "control"}]}  # fmt: skip
    shown = models_chosen_words(demo)
    assert shown == f"{len(DEMO_MODELS)} models"
    assert f"demo run (250 BBC News articles, {shown})" in README
