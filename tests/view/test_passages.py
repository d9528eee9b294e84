"""The passage of a document around a query's words."""

from __future__ import annotations

from flare_core.view.passages import passage, query_words


def test_the_passage_holds_the_query_words_and_says_where_it_was_cut():
    words = [f"w{i}" for i in range(200)]
    text = " ".join([*words, "How", "to", "reset", "the", "password,", "quickly", *words])
    shown, cut = passage(text, "Reset my password?")
    assert cut and shown.startswith("… ") and shown.endswith(" …")
    assert "reset the password," in shown and len(shown.split()) == 45 + 2
    assert shown.split()[1:7] == ["w197", "w198", "w199", "How", "to", "reset"]  # five words before it


def test_a_short_text_is_whole_and_no_match_opens_at_the_start():
    assert passage("a short\ntext", "anything") == ("a short text", False)
    shown, cut = passage(" ".join(f"w{i}" for i in range(100)), "nothing here")
    assert cut and shown.startswith("w0 w1") and shown.endswith("w44 …")
    assert query_words("How do I reset my password") == {"reset", "password"}
    assert passage("x " * 30 + "resetting the router " + "y " * 60, "reset")[0].split()[6] == "resetting"
