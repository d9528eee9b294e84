"""The help pages of the dashboard (how to read your answer, the glossary): the docs pages of the same
names, drawn from their one text in ``docs/`` with their pictures from ``assets/``. A link to another help
page becomes a link to its page of the dashboard; a link to the rest of the docs names its file."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ASSETS = ROOT / "assets"
#: Each docs page the dashboard shows, with the page script that shows it.
HELP_DOCS = {"reading.md": "dashboard/how_to_read.py", "glossary.md": "dashboard/glossary.py"}

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(assets/([\w./-]+)\)\s*$")
_LINK = re.compile(r"\[([^\]]+)\]\(([\w-]+\.md)(#[\w-]+)?\)")


def _link(match: re.Match[str]) -> str:
    """A Markdown link to a docs page, as the dashboard shows it: the help page's words in bold (the page
    itself is linked below the text), another page's words with its file named."""
    text, page = match.group(1), match.group(2)
    return f"**{text}**" if page in HELP_DOCS else f"{text} (docs/{page})"


def doc_blocks(name: str) -> list[tuple[str, str]]:
    """The docs page ``name`` as the dashboard draws it, in order: ``("title", words)`` for its first
    heading, ``("markdown", text)`` for the text between pictures and ``("image", file name)`` then
    ``("caption", words)`` for each picture of ``assets/``."""
    if name not in HELP_DOCS:
        raise ValueError(f"not a help page of the dashboard: {name!r}")
    lines = (DOCS / name).read_text(encoding="utf-8").splitlines()
    blocks: list[tuple[str, str]] = []
    text: list[str] = []
    for line in lines:
        image = _IMAGE.match(line)
        if line.startswith("# ") and not blocks and not any(t.strip() for t in text):
            blocks.append(("title", line[2:].strip()))
        elif image:
            blocks.append(("markdown", "\n".join(text)))
            blocks += [("image", image.group(2)), ("caption", image.group(1))]
            text = []
        else:
            text.append(_LINK.sub(_link, line))
    blocks.append(("markdown", "\n".join(text)))
    return [(kind, value) for kind, value in blocks if kind != "markdown" or value.strip()]


def show_doc(name: str) -> None:
    """Draw the docs page ``name`` (a key of :data:`HELP_DOCS`), then a link to each other help page."""
    for kind, value in doc_blocks(name):
        if kind == "title":
            st.title(value)
        elif kind == "image":
            st.image(str(ASSETS / value))
        elif kind == "caption":
            st.caption(value)
        else:
            st.markdown(value)
    st.divider()
    for other, page in HELP_DOCS.items():
        if other != name:
            st.page_link(page, label=doc_title(other), icon=":material/arrow_forward:")


def doc_title(name: str) -> str:
    """The first heading of the docs page ``name``."""
    first = (DOCS / name).read_text(encoding="utf-8").split("\n", 1)[0]
    return first.removeprefix("# ").strip()
