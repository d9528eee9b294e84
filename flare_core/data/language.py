"""Which languages and scripts a corpus is written in, read text by text: what decides whether a model
trained on English only, or one that splits texts at spaces, can read it.

:func:`read_writing` reads a seeded sample of :data:`SAMPLE` texts spread over the whole corpus (not its
first rows, so a file sorted by language is judged whole). Each text gets

- its *script*: the Unicode script of most of its letters (Latin, Cyrillic, Han, Khmer, …);
- its *language*: told by py3langid (a naive Bayes model of byte n-grams, shipped in its wheel), limited
  to the 97 languages of langid.py (:data:`LANGUAGES`), for a text of at least :data:`MIN_WORDS` words or
  :data:`MIN_UNSPACED` letters of a script written without spaces; a shorter text (a single word) is not
  told.

The corpus's :class:`Writing` is the share of each language among the texts told and of each script
among the texts with letters. A model reads a *text* as :func:`reads_text` says (one trained on English:
a text told as English, or not in Latin letters when untold; one fitted on the corpus's words: a text in
a script written with spaces; a multilingual one: every text), and reads the *corpus* when it reads at
least :data:`READ_SHARE` of the texts whose reading is known (:func:`read_share`, :func:`reads`).

Measured by ``bench/studies/language_id.py``: on 66 short English ticket subjects, product titles and
headlines 0.970 are told English (a count of common English words read 0.048 of their words as such,
under its threshold of 0.10); 0.97 to 1.00 of the texts of the benchmark's English tweets, text messages,
questions and news titles; 0.965 to 1.00 of its Slovenian, Portuguese, Swedish and Chinese texts get
their own language. 2,000 texts take 0.3 to 1.9 s on one core of a shared machine (Chinese headlines to
newsgroup posts, read to :data:`MAX_CHARS`), after a 1.2 s load once per process.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The texts read: a seeded sample of at most this many, spread over the whole corpus.
SAMPLE = 2000
SEED = 0
#: The characters of a text read (its opening): enough to tell a language, and a long text costs no more
#: (2,000 newsgroup posts: 0.8 s at 200, 3.0 s at 1,000, the same shares).
MAX_CHARS = 200
#: A text is told by its language from this many words (a script written with spaces) …: two-word texts
#: (names, "A gyroscope.") are often told wrong, 0.873 of the chatbot questions told English at 2, 0.971 at 3.
MIN_WORDS = 3
#: … or this many letters of a script written without spaces.
MIN_UNSPACED = 2
#: A model reads a corpus when it reads at least this share of its texts (those whose reading is known).
#: An English-only model reads 0.955 to 1.00 of the texts of the benchmark's English corpora (a short
#: text is now and then told as another language) and half of a half-English corpus.
READ_SHARE = 0.8
#: The languages told: those of langid.py (Lui & Baldwin, ACL 2012), ISO 639-1. Allowing every one of
#: py3langid's 140 read short English as Nigerian Pidgin or Scots and Chinese headlines as Wu Chinese:
#: 0.953 right on the study's texts against 0.971.
_LANGID_PY = (
    "af am an ar as az be bg bn br bs ca cs cy da de dz el en eo es et eu fa fi fo fr ga gl gu he hi hr ht "
    "hu hy id is it ja jv ka kk km kn ko ku ky la lb lo lt lv mg mk ml mn mr ms mt ne nl nn no oc or pa pl "
    "ps pt qu ro ru rw se si sk sl sq sr sv sw ta te th tl tr ug uk ur vi vo wa xh zh zu"
)
LANGUAGES = tuple(_LANGID_PY.split())
#: Scripts written without spaces between words: a model that splits texts at spaces cannot read them.
UNSPACED_SCRIPTS = frozenset({"Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan"})
#: Words of the one-word summary of a corpus's writing (:attr:`Writing.kind`), as earlier records hold it.
WRITINGS = ("english", "spaced", "unspaced")
#: Unicode name prefixes that are not a script.
_WIDTH = ("FULLWIDTH", "HALFWIDTH")


@dataclass(frozen=True)
class Writing:
    """What a corpus is written in: ``languages`` (ISO 639-1 code → share of the texts told, largest
    first), ``scripts`` (script → share of the texts with letters), ``english`` (share of the texts with a
    known reading that an English-only model reads), ``spaced`` (share of the texts with letters written
    with spaces between words), ``texts`` (texts with letters read) and ``told`` (texts whose language was
    told)."""

    languages: dict[str, float] = field(default_factory=dict)
    scripts: dict[str, float] = field(default_factory=dict)
    english: float | None = None
    spaced: float | None = None
    texts: int = 0
    told: int = 0

    @property
    def kind(self) -> str | None:
        """The one-word summary: ``"english"`` (an English-only model reads it), ``"unspaced"`` (a model
        that splits at spaces does not), ``"spaced"`` (anything else), None (nothing to tell from)."""
        if self.spaced is None:
            return None
        if self.spaced < READ_SHARE:
            return "unspaced"
        if self.english is None:
            return None
        return "english" if self.english >= READ_SHARE else "spaced"

    def words(self) -> str:
        """The languages in plain words, e.g. "English 52%, German 48%" (those under 5% left out; the
        scripts when no text was told, "" when there is nothing to name)."""
        shares = self.languages or self.scripts
        named = [f"{language_name(k)} {v:.0%}" for k, v in shares.items() if v >= 0.05]
        return ", ".join(named)

    def record(self) -> dict[str, object]:
        """The writing as JSON-ready fields (shares to 3 figures)."""
        return {
            "kind": self.kind,
            "languages": {k: round(v, 3) for k, v in self.languages.items()},
            "scripts": {k: round(v, 3) for k, v in self.scripts.items()},
            "english": None if self.english is None else round(self.english, 3),
            "spaced": None if self.spaced is None else round(self.spaced, 3),
            "texts": self.texts,
            "told": self.told,
        }


@functools.lru_cache(maxsize=1)
def _identifier() -> Any:
    """py3langid's identifier limited to :data:`LANGUAGES` (loaded, about 1 s, when a corpus is first
    read)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    identifier.set_languages(LANGUAGES)
    return identifier


@functools.lru_cache(maxsize=4096)
def _script_of(char: str) -> str:
    name = unicodedata.name(char, "").split(" ")
    word = name[1] if name[0] in _WIDTH and len(name) > 1 else name[0]
    return {"CJK": "Han"}.get(word, word.title())


def text_script(text: str) -> str | None:
    """The script of most of the letters of ``text``'s opening (``"Latin"``, ``"Cyrillic"``, ``"Han"``,
    ``"Khmer"``…); None without letters."""
    counts = Counter(_script_of(c) for c in str(text)[:MAX_CHARS] if c.isalpha())
    return counts.most_common(1)[0][0] if counts else None


def text_language(text: str, script: str | None = None) -> str | None:
    """The language (ISO 639-1) of ``text``, or None when it is too short to tell (fewer than
    :data:`MIN_WORDS` words, or :data:`MIN_UNSPACED` letters of a script written without spaces)."""
    opening = str(text)[:MAX_CHARS]
    script = text_script(opening) if script is None else script
    if script is None:
        return None
    if script in UNSPACED_SCRIPTS:
        if sum(c.isalpha() for c in opening) < MIN_UNSPACED:
            return None
    elif sum(any(c.isalpha() for c in w) for w in opening.split()) < MIN_WORDS:
        return None
    return str(_identifier().classify(opening)[0])


def reads_text(model_reads: str, language: str | None, script: str | None) -> bool | None:
    """Whether a model that reads ``model_reads`` (``"english"``, ``"spaced"``, ``"many"``; see
    :data:`flare_core.encoders.base.READS`) reads one text of ``language`` in ``script``; None when that
    is not known (an English-only model, a Latin text too short to tell; a model that does not say)."""
    if script is None or model_reads not in ("english", "spaced", "many"):
        return None
    if model_reads == "english":
        return language == "en" if language is not None else (False if script != "Latin" else None)
    if model_reads == "spaced":
        return script not in UNSPACED_SCRIPTS
    return True


def sample_positions(n: int, size: int = SAMPLE, seed: int = SEED) -> np.ndarray:
    """The positions (sorted) of a seeded sample of at most ``size`` of ``n`` texts, spread over all."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size, replace=False))


def read_texts(texts: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """(language, script) of each text of the seeded sample of ``texts`` (see :func:`sample_positions`)."""
    items = list(texts)
    out = []
    for position in sample_positions(len(items)):
        text = "" if items[position] is None else str(items[position])
        script = text_script(text)
        out.append((text_language(text, script), script))
    return out


def read_writing(texts: Sequence[str]) -> Writing:
    """The :class:`Writing` of ``texts`` (N,), read from a seeded sample of at most :data:`SAMPLE`."""
    read = [(language, script) for language, script in read_texts(texts) if script is not None]
    if not read:
        return Writing()
    told = [language for language, _ in read if language is not None]
    return Writing(
        languages=_shares(told),
        scripts=_shares([script for _, script in read]),
        english=_share_read("english", read),
        spaced=_share_read("spaced", read),
        texts=len(read),
        told=len(told),
    )


def _shares(values: list[str]) -> dict[str, float]:
    return {k: n / len(values) for k, n in Counter(values).most_common()} if values else {}


def _share_read(model_reads: str, read: list[tuple[str | None, str | None]]) -> float | None:
    known = [r for r in (reads_text(model_reads, lang, script) for lang, script in read) if r is not None]
    return sum(known) / len(known) if known else None


def corpus_writing(texts: Sequence[str]) -> str | None:
    """The one-word summary (:attr:`Writing.kind`) of ``texts``' writing: ``"english"``, ``"spaced"``,
    ``"unspaced"`` or None."""
    return read_writing(texts).kind


def read_share(model_reads: str, writing: Writing | str | None) -> float | None:
    """The share of the corpus's texts (those whose reading is known) that a model reading
    ``model_reads`` reads; None when it is not known. ``writing`` may be an earlier record's one word
    (:data:`WRITINGS`): then the share is 1 or 0."""
    if writing is None or model_reads not in ("english", "spaced", "many"):
        return None
    if isinstance(writing, str):
        can = {"english": writing == "english", "spaced": writing != "unspaced", "many": True}[model_reads]
        return float(can)
    if model_reads == "many":
        return 1.0 if writing.texts else None
    return writing.english if model_reads == "english" else writing.spaced


def reads(model_reads: str, writing: Writing | str | None) -> bool | None:
    """Whether a model that reads ``model_reads`` can read a corpus of ``writing``: at least
    :data:`READ_SHARE` of its texts (see :func:`read_share`); None when that is not known."""
    share = read_share(model_reads, writing)
    return None if share is None else share >= READ_SHARE


def language_name(code: str) -> str:
    """The English name of a language (ISO 639-1) or script code: "de" → "German"."""
    from babel import Locale

    return str(Locale("en").languages.get(code) or code)
