"""The help pages draw their one text from docs/ (how to read your answer, the glossary): every picture from
assets/, links to the other help page kept in the app, links to the rest of the docs named by file."""

from __future__ import annotations

import pytest

from dashboard.help import ASSETS, HELP_DOCS, doc_blocks, doc_title
from dashboard.page_list import HELP_PAGES, url_path


def test_how_to_read_draws_its_title_words_and_annotated_picture():
    blocks = doc_blocks("reading.md")
    assert blocks[0] == ("title", "How to read your answer")
    images = [value for kind, value in blocks if kind == "image"]
    assert images == ["overview-annotated.png"] and (ASSETS / images[0]).is_file()
    caption = blocks[[kind for kind, _ in blocks].index("image") + 1]
    assert caption[0] == "caption" and "numbered callouts" in caption[1]
    words = "\n".join(value for kind, value in blocks if kind == "markdown")
    assert "](" not in words, "no link of the docs site is left to break in the app"
    assert "**glossary**" in words and "the answer and how far to trust it (docs/answer.md)" in words
    assert "1. **What the answer stands on.**" in words and "9. **Help.**" in words


def test_the_glossary_page_holds_every_entry_of_the_docs_page():
    blocks = doc_blocks("glossary.md")
    assert blocks[0] == ("title", "Glossary") and not [kind for kind, _ in blocks if kind == "image"]
    words = "\n".join(value for _, value in blocks[1:])
    assert "### Chance of being the best" in words and "### Normalizing flows" in words
    assert "**How to read your answer**" in words


def test_only_the_help_docs_are_drawn_and_each_has_its_page():
    with pytest.raises(ValueError, match="not a help page"):
        doc_blocks("../README.md")
    assert [spec.path for spec in HELP_PAGES] == list(HELP_DOCS.values())
    assert [spec.title for spec in HELP_PAGES] == [doc_title(name) for name in HELP_DOCS]
    assert [url_path(spec.path) for spec in HELP_PAGES] == ["how_to_read", "glossary"]
