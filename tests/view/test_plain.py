"""Untrusted text written into markdown (:func:`flare_core.view.plain.markdown_text`): hand-written cases,
what a CommonMark parser (markdown-it-py) shows of them, and the patterns Streamlit's renderer applies to
plain text after parsing (copied from Streamlit 1.67's frontend, ``StreamlitMarkdown``)."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from flare_core.view.plain import WORD_JOINER, markdown_text

J = WORD_JOINER
#: Hand-written cases: the text, and the markdown source it must become.
CASES = [
    ("plain words 123", "plain words 123"),
    ("back\\slash \\", "back\\\\slash \\\\"),
    ("<script>alert(1)</script>", "\\<script\\>alert\\(1\\)\\<\\/script\\>"),
    ("[x](y)", "\\[x\\]\\(y\\)"),
    ("![x](y)", "\\!\\[x\\]\\(y\\)"),
    ("*bold* **b** _it_ __u__", "\\*bold\\* \\*\\*b\\*\\* \\_it\\_ \\_\\_u\\_\\_"),
    ("`code`", "\\`code\\`"),
    ("$x^2$ and $$y$$", "\\$x\\^2\\$ and \\$\\$y\\$\\$"),
    (":smile: :material/home:", "\\:smile\\: \\:material\\/home\\:"),
    (":red[alert] :help[x]", "\\:red\\[alert\\] \\:help\\[x\\]"),
    ("&amp; &#65;", "\\&amp\\; \\&\\#65\\;"),
    ("# title\n> quote\n\n1. item", "\\# title \\> quote 1\\. item"),
    ("http://a.example/x", f"http\\:{J}\\/\\/a\\.example\\/x"),
    ("WWW.example.org", f"WWW{J}\\.example\\.org"),
    ("me@example.org", f"me{J}\\@example\\.org"),
    (":streamlit:", f"\\:{J}streamlit\\:"),
    ("a -> b <= c", f"a \\-{J}\\> b \\<{J}\\= c"),
    ("über — 文字", "über — 文字"),
]
#: A CommonMark parser with GFM's tables and strikethrough, as an independent reading of the source.
PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
#: Streamlit's plain-text transforms (the GFM autolink literal's two patterns, the Streamlit logo and the
#: typographic arrows), and its test of whether to load the emoji shortcodes at all.
AFTER_PARSING = [
    re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE | re.ASCII),
    re.compile(r"(?:(?<=^)|(?<=\s)|(?<=[^\w\s]))([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII),
    re.compile(r":streamlit:"),
    re.compile(r"(^|\s)(<->|->|<-|--|>=|<=|~=)(\s|$)"),
]
EMOJI_NEEDED = re.compile(r":(?!material/|streamlit:)[\w+-][\w_+-]*:")


def shown(text: str) -> str:
    """What a reader sees of the source ``text`` by CommonMark: one paragraph, its text; AssertionError when
    the source makes any element other than a paragraph."""
    rendered = PARSER.render(text).strip()
    if not rendered:
        return ""
    assert rendered.startswith("<p>") and rendered.endswith("</p>"), rendered
    inner = rendered[3:-4]
    assert "<" not in inner, f"{text!r} renders markup: {rendered}"
    return html.unescape(inner)


@pytest.mark.parametrize(("text", "source"), CASES)
def test_hand_written_cases(text, source):
    assert markdown_text(text) == source


@pytest.mark.parametrize(("text", "_"), CASES)
def test_shown_text_equals_the_input(text, _):
    """The reader sees the input (whitespace runs as one space), the word joiners aside, and nothing that
    Streamlit would turn into a link, an emoji, a logo or an arrow."""
    source = markdown_text(text)
    seen = shown(source)
    assert seen.replace(J, "") == re.sub(r"[\t\n\v\f\r ]+", " ", text).strip()
    for pattern in AFTER_PARSING:
        assert not pattern.search(seen), (pattern.pattern, seen)
    assert not EMOJI_NEEDED.search(source)


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FFF, blacklist_categories=("Cs",)),
        max_size=60,
    )
)
def test_any_text_stays_text(text):
    source = markdown_text(text)
    seen = shown(source)
    expected = re.sub(r"[\t\n\v\f\r ]+", " ", text).replace(J, "")
    assert seen.replace(J, "").strip() == expected.strip()  # a paragraph's ends lose their white space
    assert not EMOJI_NEEDED.search(source)
    assert not re.search(r"(?<!\\)(?:\\\\)*:", source), "an unescaped colon could open a directive"


def test_values_other_than_text():
    assert markdown_text(None) == ""
    assert markdown_text(3.5) == "3\\.5"
    with pytest.raises(ValueError, match="needs text, not bytes"):
        markdown_text(b"name")
