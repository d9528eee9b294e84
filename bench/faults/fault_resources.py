"""Faults of resources and inputs (``bench/faults/faults.py``): a full disk (``disk``), a huge or large CSV
(``big``) and a corpus holding one 10 MB text (``long``)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.faults.fault_support import MODELS, Reference, Row, cli, flare
from flare_core.data.corpus import load_corpus
from flare_core.run import jobs
from flare_core.run.create import create_run
from flare_core.store import doctor
from flare_core.store.runs import RunStore

# -- full disk ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def small_filesystem(path: Path, size_mib: int = 16):
    """A size-limited tmpfs mounted at ``path`` (needs root); yields False when it cannot be made."""
    path.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)], capture_output=True
    )
    try:
        yield made.returncode == 0
    finally:
        if made.returncode == 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write a file into ``folder`` until its file system is full; return it (delete it to free space)."""
    filler = folder / "filler.bin"
    block = b"\xff" * (1 << 16)
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(block)
                fh.flush()
        except OSError:
            pass
    return filler


def disk_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("disk full during embeddings / IS")
    with small_filesystem(work / "small-disk") as mounted:
        if not mounted:
            row.notes.append("no tmpfs could be mounted here (not root): skipped; tests/run/test_faults.py "
                             "simulates ENOSPC in the store's writes instead")  # fmt: skip
            return row
        stages = ["embeddings", "sufficiency_gmm"] * (1 if short else 2)
        for k, stage in enumerate(stages):
            store = RunStore(work / "small-disk" / f"store-{k}")
            run = ref.new_run(store)
            pid = jobs.start(store, run.id)
            filler = None
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and filler is None:
                progress = run.manifest.get("progress") or {}
                if progress.get("stage") == stage or run.status in ("done", "failed"):
                    filler = fill(store.root)
                time.sleep(0.005)
            final = jobs.wait(store, run.id, timeout=300, poll=0.05)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            error = run.manifest.get("error") or ""
            words = error.startswith(f"the disk is full: free space and run `flare resume {run.id}`")
            half = [f.message for f in doctor.check_run(run.path) if f.kind == "damaged"]
            half += [str(p) for p in run.path.rglob(".tmp-*")]
            filler.unlink()
            proc, seconds = cli("resume", run.id, "--json", runs_dir=store.root, inprocess=short)
            resumed = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
            differ = ref.same(run) if resumed else ["(not resumed)"]
            row.add(
                final == "failed" and words and not half and resumed and not differ,
                bool(differ or half),
                seconds,
                f"full during {stage}: status {final}, error {error[:160]!r}, half-written {half[:3]}, "
                f"resume rc {proc.returncode} {proc.stderr[-200:]!r}, differ {differ[:3]}",
            )
    return row


# -- big inputs ---------------------------------------------------------------------------------------------

# peak memory of the child itself: VmHWM belongs to the process's address space, which exec replaces
# (ru_maxrss would keep the peak of the process that started it, such as a 1 GB pytest)
_PEAK = (
    "import sys, json\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) / 1024\n"
    "from flare_core.data.corpus import load_corpus\n"
    "out = {'base_mib': peak()}\n"
    "try:\n"
    "    c = load_corpus(sys.argv[1], text_column='text', label_column=None, max_rows=int(sys.argv[2]) or None)\n"
    "    out['rows'] = len(c)\n"
    "    out['max_chars'] = int(max(len(t) for t in c.texts))\n"
    "except Exception as exc:\n"
    "    out['error'] = f'{type(exc).__name__}: {exc}'\n"
    "out['peak_mib'] = peak()\n"
    "print(json.dumps(out))\n"
)


def _load_in_child(path: Path, max_rows: int = 0) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path), str(max_rows)], capture_output=True, text=True
    )
    return (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.stdout.strip()
        else {"error": proc.stderr[-300:]}
    )


def big_input_trials(ref: Reference, work: Path, short: bool) -> Row:
    row = Row("big inputs")
    # a 2 GB sparse CSV: refused at the size limit before anything is read
    sparse = work / "huge.csv"
    with open(sparse, "wb") as fh:
        fh.write(b"text\n")
        fh.truncate(2 * 1024**3)
    started = time.perf_counter()
    out = _load_in_child(sparse)
    seconds = time.perf_counter() - started
    refused = "larger than the limit" in out.get("error", "") and out["peak_mib"] - out["base_mib"] < 64
    row.add(refused, False, None, f"2 GB file: {out}")
    row.notes.append(
        f"2 GB sparse CSV refused in {seconds:.1f} s; peak RSS {out['peak_mib']:.0f} MiB "
        f"({out['peak_mib'] - out['base_mib']:.0f} MiB above the {out['base_mib']:.0f} MiB after imports)"
    )
    sparse.unlink()
    # a file of many rows sampled to 20,000
    n = 100_000 if short else 1_000_000
    many = work / "many.csv"
    with open(many, "w", encoding="utf-8") as fh:
        fh.write("text\n")
        for i in range(n):
            fh.write(f"row {i} of a large corpus with a few words in it\n")
    out = _load_in_child(many, 20_000)
    row.add(out.get("rows") == 20_000, False, None, f"{n:,} rows: {out}")
    row.notes.append(
        f"{n:,}-row CSV ({many.stat().st_size / 2**20:.0f} MiB) sampled to {out.get('rows')} rows; peak RSS "
        f"{out['peak_mib']:.0f} MiB ({out['peak_mib'] - out['base_mib']:.0f} MiB above the imports)"
    )
    many.unlink()
    return row


# -- a 10 MB text -------------------------------------------------------------------------------------------


def long_text_trials(ref: Reference, work: Path, short: bool) -> Row:
    """The reference corpus with its first text replaced by a 10 MB one: the run must finish, the text be
    cut to ``MAX_TEXT_CHARS`` with the cut counted in the manifest, and every other text stay as it was.
    The full form also starts it with ``flare run``, which must say so in words."""
    import pandas as pd

    from flare_core.data.corpus import MAX_TEXT_CHARS

    row = Row("a 10 MB text in the corpus")
    frame = pd.read_csv(work / "corpus.csv")
    huge = ("word " * (2 * 1024**2))[: 10 * 1024**2]
    frame.loc[0, "text"] = huge
    frame.to_csv(work / "long.csv", index=False)
    store = RunStore(work / "long")
    started = time.perf_counter()
    corpus = load_corpus(work / "long.csv", text_column="text", label_column="label")
    run = create_run(store, corpus, ref.params)
    status = jobs.run_in_process(run)
    seconds = time.perf_counter() - started
    stored = run.corpus_frame()["text"].tolist()
    stats = run.manifest["corpus"]["stats"]
    kept_whole = stored[1:] == ref.corpus.texts[1:]
    cut = (
        stored[0] == huge[:MAX_TEXT_CHARS] and stats.get("n_truncated") == 1 and stats.get("truncation_note")
    )
    row.add(
        status == "done" and bool(cut) and kept_whole,
        not kept_whole,
        None,
        f"status {status}, stored length {len(stored[0]):,}, stats {stats.get('n_truncated')} "
        f"{stats.get('truncation_note')!r}, other texts unchanged {kept_whole}",
    )
    row.notes.append(
        f"run with a 10 MB text finished in {seconds:.1f} s ({status}); the text was stored with "
        f"{len(stored[0]):,} characters; the manifest says: {stats.get('truncation_note')}"
    )
    if short:
        return row
    proc, seconds = flare(
        "run", str(work / "long.csv"), "--models", MODELS[0] + "," + MODELS[1], "--estimator", "gmm",
        "--no-collapse", "--controls", "none", "--json", runs_dir=store.root,
    )  # fmt: skip
    done = proc.returncode == 0 and json.loads(proc.stdout)["status"] == "done"
    said = f"note: 1 of {len(frame)} texts longer than {MAX_TEXT_CHARS:,} characters was cut" in proc.stderr
    row.add(done and said, False, None, f"flare run: rc {proc.returncode} {proc.stderr[-300:]!r}")
    row.notes.append(f"`flare run` of the same file finished in {seconds:.1f} s and said it: {said}")
    return row
