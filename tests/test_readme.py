"""The README's links inside the repository lead somewhere: its images and files exist, its anchors name
a heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINKS = re.findall(r"\]\(([^)\s]+)\)", README)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_image_and_file_the_readme_links_exists():
    local = [link for link in LINKS if not link.startswith(("http://", "https://", "#", "mailto:"))]
    assert any(link.endswith(".png") for link in local), "the README shows the Overview"
    missing = [link for link in local if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


def test_every_anchor_the_readme_links_names_one_of_its_headings():
    headings = {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", README, flags=re.MULTILINE)}
    assert (
        _anchor("Information sufficiency against known truth")
        == "information-sufficiency-against-known-truth"
    )
    broken = [link for link in LINKS if link.startswith("#") and link[1:] not in headings]
    assert not broken, broken
