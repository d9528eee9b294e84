"""Damaged token stores left in the cache's scratch folder: found, named and removed (``flare doctor``)."""

from __future__ import annotations

import numpy as np
import pytest

from flare_core.encoders import random_init_transformer, write_token_states
from flare_core.encoders.token_store import META_FILE, OFFSETS_FILE, TOKENS_FILE
from flare_core.run.token_stages import check_scratch, remove_scratch

CONFIG = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128}  # fmt: skip


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    encoder = random_init_transformer(CONFIG, seed=0, device="cpu")
    return write_token_states(
        encoder, ["a first text", "and a second one", "third"], tmp_path_factory.mktemp("s") / "store"
    )


@pytest.mark.parametrize("name", [TOKENS_FILE, OFFSETS_FILE, META_FILE])
def test_a_damaged_store_is_named_and_removed_and_a_sound_one_kept(sound, tmp_path, name):
    import shutil

    scratch = tmp_path / "scratch"
    victim, neighbour = scratch / "tokens-a" / "store", scratch / "tokens-b" / "store"
    shutil.copytree(sound.directory, victim)
    shutil.copytree(sound.directory, neighbour)
    assert check_scratch(scratch) == []
    (victim / name).write_bytes((victim / name).read_bytes()[: (victim / name).stat().st_size // 2])
    findings = check_scratch(scratch)
    assert [(f.file, f.kind, f.recomputable) for f in findings] == [(str(victim / name), "damaged", True)]
    assert (
        findings[0].message.startswith(f"{victim / name} ") and "flare doctor --repair" in findings[0].message
    )
    assert remove_scratch(findings) == [f"removed the damaged token store {victim}"]
    assert not (scratch / "tokens-a").exists() and check_scratch(scratch) == []
    assert np.array_equal(np.load(neighbour / TOKENS_FILE), np.asarray(sound.rows))


def test_a_store_being_written_is_left_alone(sound, tmp_path):
    import shutil

    scratch = tmp_path / "scratch"
    partial = scratch / "tokens-a" / ".tmp-store-1"
    shutil.copytree(sound.directory, partial)
    (partial / TOKENS_FILE).write_bytes(b"\x93NUMPY")
    assert check_scratch(scratch) == []


def test_collapse_reports_its_work_in_prior_seconds_of_each_model():
    from flare_core.run.token_stages import _CollapseWork

    calls = []
    # three models' (reading, pairs) prior seconds: the second costs 3 s to read and 4 s of pairs
    work = _CollapseWork(
        lambda *args, **kw: calls.append((args[1], kw["work_done"], kw["work_total"])),
        [(1, 1), (3, 4), (0, 10)],
    )
    assert work.total == 190  # 19 s in tenths of a second
    for done in (0, 100, 101, 200):  # 101 texts finish no new 20th of 200: not reported again
        work.reading(1, "m", done, 200)
    for done in (8, 10, 30, 31, 200):
        work.pairs(1, "m", done, 200)
    # the first model's 2 s, then the second's reading (half of 3 s, all 3 s), then its pairs (4 s)
    assert calls == [
        (1, 20, 190),
        (1, 35, 190),
        (1, 50, 190),
        (1, 52, 190),
        (1, 52, 190),
        (1, 56, 190),
        (1, 90, 190),
    ]
