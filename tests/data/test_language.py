"""Which writing a corpus is in, from its texts: hand-made texts of each kind."""

from __future__ import annotations

import pytest

from flare_core.data.language import corpus_writing, reads

ENGLISH = ["The cat sat on the mat and it was happy.", "A dog is not a cat, but they are friends."] * 5
SLOVENIAN = ["Vlada je sprejela nov zakon o davkih.", "Ljudje so bili zelo nezadovoljni z odločitvijo."] * 5
SWEDISH = ["Bygglov krävs för att bygga ett nytt hus.", "Kommunen prövar ansökan om bygglov."] * 5
CHINESE = ["今天天气很好，我们去公园散步。", "这家餐厅的菜很好吃，服务也不错。"] * 5
RUSSIAN_WORDS = ["кошка", "собака", "дом", "машина"] * 5
ENGLISH_WORDS = ["cat", "dog", "house", "car"] * 5


@pytest.mark.parametrize(
    ("texts", "writing"),
    [(ENGLISH, "english"), (SLOVENIAN, "spaced"), (SWEDISH, "spaced"), (CHINESE, "unspaced"),
     (RUSSIAN_WORDS, "spaced"), (ENGLISH_WORDS, None), (["", "123"], None)],
)  # fmt: skip
def test_the_writing_of_hand_made_texts(texts, writing):
    assert corpus_writing(texts) == writing


def test_which_models_read_which_writing():
    assert [reads("english", w) for w in ("english", "spaced", "unspaced")] == [True, False, False]
    assert [reads("spaced", w) for w in ("english", "spaced", "unspaced")] == [True, True, False]
    assert [reads("many", w) for w in ("english", "spaced", "unspaced")] == [True, True, True]
    assert reads("english", None) is None  # a writing not known says nothing
