"""Corpus loading speed: a large CSV whole vs as a seeded sample, very long texts through GloVe, and a file
over the size limit refused without being read.

Run: ``python bench/speed/corpus_load.py [--rows 200000] [--long-chars 100000]``

Prints, in one run on one machine: rows/second loading the whole file and the time of a 1,000-row
sample (the sample still reads and checks every row; the ratio shows what sampling saves after that);
characters/second embedding five long texts with GloVe; and the time to refuse a 512 MiB sparse file
against a 1 MiB limit next to the time to read a 1 MiB file (refusal must not depend on the file size).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.data.corpus import load_corpus  # noqa: E402
from flare_core.errors import CorpusError  # noqa: E402


def _timed(fn, *args, **kwargs) -> tuple[object, float]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def large_csv(folder: Path, rows: int) -> dict[str, float]:
    path = folder / "big.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("text,label\n")
        fh.writelines(f"row {i} about topic {i % 7} and a few more words,t{i % 7}\n" for i in range(rows))
    full, full_s = _timed(load_corpus, path, text_column="text", label_column="label")
    _, sample_s = _timed(load_corpus, path, text_column="text", label_column="label", max_rows=1000, seed=3)
    assert len(full) == rows
    return {"rows": rows, "mib": path.stat().st_size / 2**20, "full_s": full_s, "sample_s": sample_s}


def long_texts(folder: Path, chars: int) -> dict[str, float]:
    from flare_core import encoders

    words = ["market", "economy", "football", "election", "film"]
    texts = [(" ".join([w] * (chars // 3)))[:chars].strip() + "." for w in words]
    path = folder / "long.csv"
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    corpus, load_s = _timed(load_corpus, path)
    encoder = encoders.load_encoder("glove-6b-50d")
    _, embed_s = _timed(
        encoders.embed, encoder, corpus.texts, corpus_hash=corpus.content_hash, cache_dir=None
    )
    return {"texts": len(texts), "chars": sum(map(len, texts)), "load_s": load_s, "embed_s": embed_s}


def refusal(folder: Path) -> dict[str, float]:
    large = folder / "large.csv"
    with open(large, "wb") as fh:
        fh.write(b"text\n")
        fh.truncate(512 * 1024**2)  # sparse: no disk space, 512 MiB to read
    start = time.perf_counter()
    with contextlib.suppress(CorpusError):
        load_corpus(large, max_bytes=1024**2)
    refuse_s = time.perf_counter() - start
    small = folder / "one-mib.csv"
    small.write_text("text\n" + "a short line of text\n" * (2**20 // 21), encoding="utf-8")
    _, read_s = _timed(load_corpus, small, max_bytes=2 * 1024**2)
    return {"refuse_s": refuse_s, "read_1mib_s": read_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--long-chars", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flare-bench-") as tmp:
        folder = Path(tmp)
        big = large_csv(folder, args.rows)
        long = long_texts(folder, args.long_chars)
        refused = refusal(folder)
    print(
        f"{big['rows']:,} rows ({big['mib']:.1f} MiB): whole file {big['full_s']:.2f} s "
        f"({big['rows'] / big['full_s']:,.0f} rows/s); 1,000-row sample {big['sample_s']:.2f} s "
        f"(sample/whole {big['sample_s'] / big['full_s']:.2f})"
    )
    print(
        f"{long['texts']} texts of {args.long_chars:,} characters: load {long['load_s']:.2f} s, GloVe "
        f"{long['embed_s']:.2f} s ({long['chars'] / long['embed_s']:,.0f} characters/s)"
    )
    print(
        f"512 MiB file refused against a 1 MiB limit in {refused['refuse_s'] * 1000:.1f} ms; reading a 1 MiB "
        f"file takes {refused['read_1mib_s'] * 1000:.0f} ms (refusal/read {refused['refuse_s'] / refused['read_1mib_s']:.3f})"
    )


if __name__ == "__main__":
    main()
