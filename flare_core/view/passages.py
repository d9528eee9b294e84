"""The passage of a document around a query's words, so that a person judging search results reads the
part that matters first (the whole document stays one click away)."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
#: Words of a query too common to point at a passage.
_COMMON = frozenset(
    _WORD.findall(
        "a an and are as at be by can do does for from how i in is it its my of on or the to was what when "
        "where which who why with you your"
    )
)


def query_words(query: str) -> set[str]:
    """The words of ``query`` that a passage is chosen by: lower case, common words left out."""
    return {w for w in _WORD.findall(query.lower()) if w not in _COMMON and (len(w) > 1 or w.isdigit())}


def _hits(word: str, wanted: set[str]) -> bool:
    """Whether a document's word is one of the query's, or shares its first five letters with a long one
    ("resetting" for "reset")."""
    word = word.lower()
    return word in wanted or any(len(w) >= 5 and word[:5] == w[:5] for w in wanted)


def passage(text: str, query: str, words: int = 45) -> tuple[str, bool]:
    """The ``words``-word stretch of ``text`` that holds most of the query's words (the opening when none
    is found), with "…" where it was cut; and whether it is shorter than the whole text."""
    tokens = text.split()
    if len(tokens) <= words:
        return " ".join(tokens), False
    wanted = query_words(query)
    hits = [i for i, t in enumerate(tokens) if _hits(t.strip(".,;:!?\"'()[]"), wanted)]
    start = 0
    if hits:  # the stretch that opens a few words before a match and holds the most matches
        first = max(hits, key=lambda i: (sum(i <= j < i + words - 5 for j in hits), -i))
        start = min(max(0, first - 5), len(tokens) - words)
    shown = " ".join(tokens[start : start + words])
    return ("… " if start else "") + shown + (" …" if start + words < len(tokens) else ""), True
