"""Which languages and scripts a corpus is written in, read text by text: real short texts written for
the tests (``tests/data/language_texts.py``) and hand-made corpora of each kind."""

from __future__ import annotations

import pytest

from flare_core.data.language import (
    READ_SHARE,
    SAMPLE,
    corpus_writing,
    read_share,
    read_writing,
    reads,
    sample_positions,
    text_language,
    text_script,
)
from tests.data.language_texts import HEADLINES, PRODUCTS, SHORT_ENGLISH, TICKETS, WRITTEN

ENGLISH = ["The cat sat on the mat and it was happy.", "A dog is not a cat, but they are friends."] * 5
SLOVENIAN = ["Vlada je sprejela nov zakon o davkih.", "Ljudje so bili zelo nezadovoljni z odločitvijo."] * 5
SWEDISH = ["Bygglov krävs för att bygga ett nytt hus.", "Kommunen prövar ansökan om bygglov."] * 5
CHINESE = ["今天天气很好，我们去公园散步。", "这家餐厅的菜很好吃，服务也不错。"] * 5
RUSSIAN_WORDS = ["кошка", "собака", "дом", "машина"] * 5
ENGLISH_WORDS = ["cat", "dog", "house", "car"] * 5
LAO = ["ຂ້ອຍຢາກໄປຕະຫຼາດມື້ອື່ນ", "ລັດຖະບານປະກາດມາດຕະການໃໝ່"]
BURMESE = ["ကျွန်တော်မနက်ဖြန်ဈေးကိုသွားမယ်", "မိုးအရမ်းရွာနေတယ်"]


@pytest.mark.parametrize(
    ("texts", "writing"),
    [(ENGLISH, "english"), (SLOVENIAN, "spaced"), (SWEDISH, "spaced"), (CHINESE, "unspaced"),
     (RUSSIAN_WORDS, "spaced"), (ENGLISH_WORDS, None), (["", "123"], None)],
)  # fmt: skip
def test_the_writing_of_hand_made_texts(texts, writing):
    assert corpus_writing(texts) == writing


@pytest.mark.parametrize("texts", [TICKETS, PRODUCTS, HEADLINES])
def test_short_english_texts_read_as_english(texts):
    # ticket subjects, product titles and headlines hold few of English's commonest words: a count of them
    # read 0.048 of these texts' words as such, under its threshold of 0.10, and set every English model aside
    writing = read_writing(texts)
    assert writing.kind == "english" and reads("english", writing) is True
    assert writing.english >= 0.9 and next(iter(writing.languages)) == "en"
    assert writing.words().startswith("English ")


def test_every_short_english_text_but_two_is_told_english():
    told = [text_language(t) for t in SHORT_ENGLISH]
    assert len(told) == 66 and sum(t == "en" for t in told) >= 64


@pytest.mark.parametrize("code", ["pt", "nl", "it", "af", "de"])
def test_other_languages_written_in_latin_letters_are_not_english(code):
    # Portuguese (0.113) and Afrikaans (0.128) had enough English-looking words to pass for English
    writing = read_writing(WRITTEN[code])
    assert writing.languages == {code: 1.0} and writing.scripts == {"Latin": 1.0}
    assert writing.kind == "spaced" and writing.english == 0.0
    assert reads("english", writing) is False and reads("spaced", writing) is True and reads("many", writing)


def test_a_half_english_half_german_corpus_reports_both_languages():
    german = list(WRITTEN["de"]) * 8  # 64 German, 66 English
    writing = read_writing([*SHORT_ENGLISH, *german])
    assert set(writing.languages) >= {"en", "de"}
    assert 0.45 <= writing.languages["de"] <= 0.52 and 0.45 <= writing.languages["en"] <= 0.52
    assert "English" in writing.words() and "German" in writing.words()
    # an English-only model reads half the texts: under the share a model must read, so not the corpus
    assert 0.45 <= read_share("english", writing) <= 0.52 < READ_SHARE
    assert reads("english", writing) is False and writing.kind == "spaced"


def test_a_file_sorted_by_language_is_judged_across_the_whole_file():
    english = [f"{t} ({i})" for i in range(50) for t in SHORT_ENGLISH][:3000]
    german = [f"{t} ({i})" for i in range(400) for t in WRITTEN["de"]][:3000]
    texts = english + german  # the first 2,000 (and 3,000) are all English
    positions = sample_positions(len(texts))
    assert len(positions) == SAMPLE and positions.max() >= 5900 and (positions >= 3000).sum() > 900
    writing = read_writing(texts)
    assert writing.texts == SAMPLE and 0.4 < writing.languages["de"] < 0.6
    assert reads("english", writing) is False
    assert read_writing(texts) == writing  # the sample is seeded


@pytest.mark.parametrize(("texts", "script"), [(WRITTEN["km"], "Khmer"), (LAO, "Lao"), (BURMESE, "Myanmar")])
def test_khmer_lao_and_burmese_are_written_without_spaces(texts, script):
    # a model fitted on the corpus's words splits at spaces: these scripts leave whole phrases unsplit
    assert {text_script(t) for t in texts} == {script}
    writing = read_writing(texts)
    assert writing.kind == "unspaced" and writing.spaced == 0.0 and writing.scripts == {script: 1.0}
    assert reads("spaced", writing) is False and reads("english", writing) is False
    assert reads("many", writing) is True


def test_khmer_is_told_khmer():
    assert {text_language(t) for t in WRITTEN["km"]} == {"km"}
    assert read_writing(WRITTEN["km"]).words() == "Khmer 100%"


def test_single_words_are_not_told_but_their_script_is():
    # too short to tell a language: an English word list says nothing; Russian words are not English
    english, russian = read_writing(ENGLISH_WORDS), read_writing(RUSSIAN_WORDS)
    assert english.told == 0 and english.english is None and reads("english", english) is None
    assert english.words() == "Latin 100%"
    assert russian.english == 0.0 and reads("english", russian) is False and russian.kind == "spaced"


def test_which_models_read_an_earlier_records_one_word():
    assert [reads("english", w) for w in ("english", "spaced", "unspaced")] == [True, False, False]
    assert [reads("spaced", w) for w in ("english", "spaced", "unspaced")] == [True, True, False]
    assert [reads("many", w) for w in ("english", "spaced", "unspaced")] == [True, True, True]
    assert reads("english", None) is None  # a writing not known says nothing
    assert read_share("unknown", "english") is None


def test_nothing_to_read_tells_nothing():
    writing = read_writing([])
    assert writing.kind is None and writing.texts == 0 and writing.words() == ""
    assert reads("many", writing) is None
