"""Faults of a process or a file (``bench/faults/faults.py``): a run's workers killed at seeded moments then
resumed (``kill``), and stored files truncated or filled with garbage, a token store's included
(``corrupt``)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

from bench.faults.fault_support import Reference, Row, cli, finished_unit, kill_group, mtimes, result_files
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.run.outcomes import problem_sentences, problems
from flare_core.run.params import RunParams
from flare_core.store import doctor
from flare_core.store.runs import Run, RunStore, safe_name

# -- kills --------------------------------------------------------------------------------------------------


def kill_trials(ref: Reference, work: Path, n: int, seed: int, short: bool = False) -> Row:
    """``n`` runs whose worker is killed at seeded moments, each then finished by ``flare resume`` (in this
    process in the short form: the killed worker is a process of its own either way)."""
    row = Row("kill -9 of the worker + flare resume")
    rng = random.Random(seed)
    store = RunStore(work / "kills")
    stages = ref.stages
    for k in range(n):
        stage = stages[k % len(stages)]
        fraction = rng.random()
        run = ref.new_run(store)
        pid = jobs.start(store, run.id)
        before_stage = stages[: stages.index(stage)]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            manifest = run.manifest
            if manifest.get("status") in ("done", "failed") or (
                manifest.get("status") == "running"
                and all(s in manifest.get("timings", {}) for s in before_stage)
            ):
                break
            time.sleep(0.01)
        time.sleep(fraction * ref.timings[stage])
        kill_group(pid)
        killed_in = (run.manifest.get("progress") or {}).get("stage", "?")
        status_after_kill = run.status
        done_stages = set(run.manifest.get("timings", {}))
        before = mtimes(run)
        proc, seconds = cli("resume", run.id, "--json", runs_dir=store.root, inprocess=short)
        ok = proc.returncode == 0 and json.loads(proc.stdout or "{}").get("status") == "done"
        differ = ref.same(run) if ok else ["(not finished)"]
        after = mtimes(run)
        redone = sorted(
            f
            for f in before
            if f not in ref.rewritten
            and f in after
            and after[f] != before[f]
            and finished_unit(f, before, done_stages)
        )
        finished_before = status_after_kill == "done"
        note = (
            f"trial {k} (target {stage}+{fraction:.2f}, killed in {killed_in}): rc {proc.returncode}, "
            f"differ {differ[:3]}, recomputed {redone[:3]} {proc.stderr[-300:]}"
        )
        row.add(ok and not differ, bool(differ or redone), seconds, note)
        if os.environ.get("FAULTS_VERBOSE"):
            print(
                f"kill {k}: at {stage} + {fraction:.0%} ({killed_in}"
                f"{', the run had finished' if finished_before else ''}), {len(before)} files kept, "
                f"resumed in {seconds:.1f} s, identical {not differ}, recomputed {redone}",
                file=sys.stderr,
            )
    return row


# -- corruption ---------------------------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(max(64, path.stat().st_size)))


def corruption_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("damaged file in a stored run")
    first_unit = sorted((ref.run.path / "sufficiency" / "gmm" / "pairs").rglob("s*_t*.json"))[0]
    unit = first_unit.relative_to(ref.run.path).as_posix()
    embedding = f"embeddings/{safe_name(ref.params.models[0])}.npy"
    cases = [
        ("manifest.json", _truncate, False),
        (embedding, _truncate, True),
        ("sufficiency/gmm/scores.parquet", _garbage, True),
        (unit, _garbage, True),
    ]
    if not short:
        cases += [
            ("corpus.parquet", _garbage, False),
            ("manifest.json", _garbage, False),
            ("corpus.parquet", _truncate, False),
            (embedding, _garbage, True),
            ("sufficiency/gmm/result/is_matrix.npy", _truncate, True),
            ("summary.parquet", _truncate, True),
        ]
    for k, (file, damage, recomputable) in enumerate(cases):
        store = RunStore(work / f"corrupt-{k}")
        shutil.copytree(ref.run.path, store.root / "victim")
        shutil.copytree(ref.run.path, store.root / "neighbour")
        for name in ("victim", "neighbour"):
            path = store.root / name / "manifest.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), "id": name}))
        victim = Run(store.root / "victim")
        damage(victim.path / file)
        check, _ = cli("doctor", "--json", runs_dir=store.root, inprocess=short)
        report = json.loads(check.stdout)
        named = [(f["run_id"], f["file"], f["recomputable"]) for f in report["findings"]]
        named_ok = named == [("victim", file, recomputable)] and check.returncode == 1
        proc, seconds = cli("resume", "victim", "--json", runs_dir=store.root, inprocess=short)
        if recomputable:
            resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
            differ = ref.same(victim) if resumed else ["(not resumed)"]
            survived = named_ok and resumed and not differ and doctor.check_run(victim.path) == []
        else:
            resumed = proc.returncode == 4 and f"{file} of run victim is damaged" in proc.stderr
            differ = []
            survived = named_ok and resumed and (victim.path / file).exists()
            seconds = None
        shown, _ = cli("show", "neighbour", runs_dir=store.root, inprocess=short)
        neighbour_ok = shown.returncode == 0 and Run(store.root / "neighbour").manifest["id"] == "neighbour"
        lost = bool(differ) or not neighbour_ok or doctor.check_run(store.root / "neighbour") != []
        row.add(
            survived and neighbour_ok,
            lost,
            seconds,
            f"{damage.__name__[1:]} {file}: doctor said {named}, resume rc {proc.returncode} "
            f"{proc.stderr[-200:]!r}, differ {differ[:3]}",
        )
    token_store_trials(row, ref, work, short)
    collapse_token_trial(row, ref, work)
    return row


@contextlib.contextmanager
def environment(**values: str):
    """``os.environ`` with ``values`` set, restored afterwards."""
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def token_store_trials(row: Row, ref: Reference, work: Path, short: bool) -> None:
    """Damaged token stores, the temporary token states a collapse stage keeps in the cache's scratch folder
    (a stopped process leaves them there): opening one must name exactly the damaged file, ``flare doctor``
    must report that file, ``flare doctor --repair`` must remove that store, and a sound store beside it must
    stay as it was. A collapse stage that meets such a store fails naming the file and ``flare resume``."""
    import numpy as np

    from flare_core.encoders import random_init_transformer, token_store, write_token_states

    config = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 64, "vocab_size": 30522, "max_position_embeddings": 128}  # fmt: skip
    sound = write_token_states(random_init_transformer(config, seed=0, device="cpu"), ref.corpus.texts[:8],
                               work / "token-store")  # fmt: skip
    tokens, offsets, meta = token_store.TOKENS_FILE, token_store.OFFSETS_FILE, token_store.META_FILE
    cases = [(tokens, _truncate), (offsets, _garbage)]
    if not short:
        cases += [(tokens, _garbage), (offsets, _truncate), (meta, _truncate), (meta, _garbage)]
    for k, (name, damage) in enumerate(cases):
        cache = (work / f"token-cache-{k}").resolve()
        victim, neighbour = (
            cache / "scratch" / "tokens-victim" / "store",
            cache / "scratch" / "tokens-neighbour" / "store",
        )
        shutil.copytree(sound.directory, victim)
        shutil.copytree(sound.directory, neighbour)
        damage(victim / name)
        try:
            token_store.TokenStates.open(victim)
            opened = "opened without complaint"
        except token_store.DamagedTokenStore as exc:
            opened = exc.path
        with environment(FLARE_CACHE_DIR=str(cache)):
            check, _ = cli("doctor", "--json", runs_dir=work / f"token-runs-{k}", inprocess=short)
            named = [f["file"] for f in json.loads(check.stdout)["scratch"]]
            repair, seconds = cli("doctor", "--repair", runs_dir=work / f"token-runs-{k}", inprocess=short)
        kept = token_store.TokenStates.open(neighbour)
        same = np.array_equal(kept.rows, sound.rows) and np.array_equal(kept.offsets, sound.offsets)
        row.add(
            opened == victim / name
            and named == [str(victim / name)]
            and check.returncode == 1
            and repair.returncode == 0
            and not victim.exists(),
            not same,
            seconds,
            f"{damage.__name__[1:]} token store {name}: open named {opened}, doctor said {named} "
            f"(rc {check.returncode}), repair rc {repair.returncode} {repair.stdout[-200:]!r}, neighbour same {same}",
        )


def collapse_token_trial(row: Row, ref: Reference, work: Path) -> None:
    """A token store damaged on disk while a real collapse stage runs (all-MiniLM-L6-v2 on 12 texts): the
    collapse stage (or the run) must fail naming the damaged file and ``flare resume``; ``flare resume`` must then finish it with the
    collapse results of an uninterrupted run and without embedding again."""
    from unittest import mock

    from flare_core import encoders
    from flare_core.encoders import token_store

    params = RunParams(
        models=["all-MiniLM-L6-v2"], estimators=[], controls=[], geometry=False, maps=False, downstream=False,
        validation=[], collapse=True, collapse_texts=12, concentration=False,
    )  # fmt: skip
    store = RunStore(work / "token-collapse")
    reference = create_run(store, ref.corpus, params)
    assert jobs.run_in_process(reference) == "done", reference.manifest.get("traceback")
    victim = create_run(store, ref.corpus, params)
    write = encoders.write_token_states
    damaged: list[Path] = []

    def write_then_damage(*args, **kwargs):
        states = write(*args, **kwargs)
        damaged.append(states.directory / token_store.TOKENS_FILE)
        _truncate(damaged[-1])
        return token_store.TokenStates.open(states.directory)  # what the stage does when it reads them back

    with mock.patch.object(encoders, "write_token_states", write_then_damage):
        status = jobs.run_in_process(victim)
    # The collapse stage fails alone (the run ends "done, with problems") or, before stage isolation, the run.
    error = victim.manifest.get("error") or " ".join(problem_sentences(victim.manifest))
    said = bool(damaged) and damaged[0].name in error and f"flare resume {victim.id}" in error
    stopped = status == "failed" or bool(problems(victim.manifest))
    embedded = mtimes(victim)
    proc, seconds = cli("resume", victim.id, "--json", runs_dir=store.root, inprocess=True)
    resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
    files, expected = result_files(victim), result_files(reference)
    differ = sorted(
        f for f in set(files) | set(expected) if f.startswith("collapse/") and files.get(f) != expected.get(f)
    )
    again = [f for f in embedded if f.startswith("embeddings/") and mtimes(victim).get(f) != embedded[f]]
    row.add(
        stopped and said and resumed and not differ and not again,
        bool(differ),
        seconds,
        f"token store damaged during collapse: status {status}, error {error[:200]!r}, resume rc {proc.returncode}, "
        f"collapse files differ {differ[:3]}, embedded again {again}",
    )
