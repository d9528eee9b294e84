"""Untrusted text (corpus texts, run, model and category names, queries, file names) written into markdown
so that it reads as exactly that text: no image, link, emphasis, heading, HTML, math, colour or icon.

Every place of the dashboard that writes such text into ``st.markdown``, a caption, an alert, a widget's
label, a toast or a help text passes it through :func:`markdown_text`. Two things are done:

1. Every ASCII punctuation character is preceded by a backslash (CommonMark: "any ASCII punctuation
   character may be backslash-escaped" and then stands for itself). That stops images, links, emphasis,
   code, headings, lists, block quotes, tables, HTML, character references (``&amp;``), autolinks in angle
   brackets, ``$`` math, and Streamlit's directives (``:red[...]``, ``:material/...:``, ``:help[...]``);
   Streamlit loads its emoji shortcodes only when the source holds ``:name:`` with no backslash in it.
   Runs of spaces, tabs and line breaks become one space: the text stays one line of a paragraph.
2. Streamlit's renderer changes some plain text *after* parsing, where backslashes no longer count: GFM's
   literal autolinks (``http://…``, ``www.…``, ``name@host.org``), its ``:streamlit:`` logo and its
   typographic arrows (`` -> `` becomes →). A word joiner (U+2060, invisible and zero-width) is put
   inside each of these so that they stay text.

The displayed text therefore equals the input with its whitespace runs shown as one space and, only in
the patterns of step 2, an invisible word joiner.
"""

from __future__ import annotations

import re
import string

#: U+2060 WORD JOINER: no width, no glyph, no line break; not a word or space character to any regex.
WORD_JOINER = "\u2060"
_PUNCTUATION = frozenset(string.punctuation)  # the 32 ASCII punctuation characters CommonMark escapes
_WHITESPACE = re.compile(r"[\t\n\v\f\r ]+")
_AUTO_LINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=[-.+A-Za-z0-9_])(?=@)")
_LOGO = re.compile(r"(?<=:)(?=streamlit:)")
_ARROW = re.compile(r"(?:(?<=\s)|^)(?:<->|->|<-|--|>=|<=|~=)(?=\s|$)")


def markdown_text(value: object) -> str:
    """Markdown source that Streamlit shows as the text ``str(value)`` (None: ``""``): see the module's
    docstring. Raises ValueError for bytes, whose ``str`` would be their Python spelling."""
    if isinstance(value, bytes | bytearray | memoryview):
        raise ValueError(f"markdown_text needs text, not {type(value).__name__}: decode it first")
    text = "" if value is None else str(value)
    text = _WHITESPACE.sub(" ", text)
    text = _AUTO_LINK.sub(WORD_JOINER, text)
    text = _LOGO.sub(WORD_JOINER, text)
    text = _ARROW.sub(lambda m: m.group(0)[0] + WORD_JOINER + m.group(0)[1:], text)
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)
