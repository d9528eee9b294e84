"""Which kind of writing a corpus is in, read from its texts alone: what decides whether a model trained
on English only, or one that splits texts at spaces, can read it.

:func:`corpus_writing` returns

- ``"english"``: the texts read as English;
- ``"spaced"``: another language written with spaces between words (Slovenian, Swedish, Russian, …);
- ``"unspaced"``: mostly Chinese, Japanese or Thai characters, written without spaces between words;
- ``None``: it cannot tell (too few words per text, e.g. a list of single English words).

English is told by its most common words: in English prose a fifth to two fifths of the words are
among :data:`ENGLISH_WORDS`. On the benchmark's corpora that share is 0.20 to 0.39 for the 21 English
ones with at least 3 words a text (tweets, questions, reviews, news, speeches) and 0.00 to 0.045 for the
Slovenian, Spanish and Swedish ones; :data:`ENGLISH_SHARE` sits between them, a factor of two from
each side.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The commonest English words (articles, prepositions, pronouns, forms of "be" and "have").
ENGLISH_WORDS = frozenset({
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "on", "was", "with", "as", "be", "by",
    "this", "are", "at", "not", "from", "or", "have", "an", "but", "you", "i", "he", "they", "we", "his",
    "her", "she", "their",
})  # fmt: skip
#: A corpus whose words are at least this share of :data:`ENGLISH_WORDS` reads as English.
ENGLISH_SHARE = 0.10
#: Fewer words than this per text on average (word lists, tags) cannot tell English from another
#: language written in Latin letters.
MIN_WORDS_PER_TEXT = 3.0
#: At least this share of the letters from scripts written without spaces makes a corpus "unspaced";
#: at least this share of letters outside ASCII makes it not English (Cyrillic, Greek, Arabic, …).
UNSPACED_SHARE = 0.3
NON_ASCII_SHARE = 0.5
#: The texts read: the first this many (enough to tell, cheap for any corpus).
MAX_TEXTS = 2000

_WORD = re.compile(r"\w+")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f]")
WRITINGS = ("english", "spaced", "unspaced")


def corpus_writing(texts: Sequence[str]) -> str | None:
    """``"english"``, ``"spaced"``, ``"unspaced"`` or None (see the module docstring) for ``texts`` (N,)."""
    sample = [str(t) for t in list(texts)[:MAX_TEXTS]]
    letters = [c for t in sample for c in t if c.isalpha()]
    if not letters:
        return None
    if sum(bool(_UNSPACED.match(c)) for c in letters) >= UNSPACED_SHARE * len(letters):
        return "unspaced"
    if sum(not c.isascii() for c in letters) >= NON_ASCII_SHARE * len(letters):
        return "spaced"
    words = [w for t in sample for w in _WORD.findall(t.lower())]
    if len(words) < MIN_WORDS_PER_TEXT * len(sample):
        return None
    share = sum(w in ENGLISH_WORDS for w in words) / len(words)
    return "english" if share >= ENGLISH_SHARE else "spaced"


def reads(model_reads: str, writing: str | None) -> bool | None:
    """Whether a model that reads ``model_reads`` (``"english"``: English only; ``"spaced"``: any
    language written with spaces, as a model fitted on the corpus's words; ``"many"``: many languages and
    scripts) can read a corpus of ``writing``; None when the writing is not known."""
    if writing is None:
        return None
    if model_reads == "english":
        return writing == "english"
    if model_reads == "spaced":
        return writing != "unspaced"
    return True
