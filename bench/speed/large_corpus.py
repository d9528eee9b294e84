"""Benchmark: memory and time of embedding and IS estimation as the corpus grows (streamed from disk).

Usage::

    python bench/speed/large_corpus.py                 # N = 10k, 40k, 160k texts
    python bench/speed/large_corpus.py --sizes 20000 200000 --epochs 2

For each corpus size N, a fresh process embeds N synthetic texts (12 words drawn from GloVe's
vocabulary) with two static models (glove-6b-50d, tokenlearn-static-64d) into an embedding cache,
which streams each model's rows to disk in chunks, then estimates IS in both directions with flows
trained from the memory-mapped embeddings a mini-batch at a time (``stream=True``). It prints, per N,
the wall time of each phase and the growth of the process's anonymous memory (sampled every 5 ms)
over its size after loading the models and building the texts, with the ratio of the largest N to the
smallest: memory that does not grow with N stays near 1 while the data grows by the ratio of the sizes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading, time
    import numpy as np
    import torch
    from flare_core.encoders import embed, load_encoder
    from flare_core.analyses.sufficiency import FlowConfig, sufficiency_matrix

    def anon_kib():
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])

    peak, running = [0], [True]

    def sample():
        while running[0]:
            peak[0] = max(peak[0], anon_kib())
            time.sleep(0.005)

    torch.set_num_threads(1)
    n, epochs, cache = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    encoders = [load_encoder(m, device="cpu") for m in ("glove-6b-50d", "tokenlearn-static-64d")]
    vocab = encoders[0].vocab
    words = [w for w, i in sorted(vocab.items(), key=lambda kv: kv[1])[:5000] if w.isalpha()]
    rng = np.random.default_rng(0)
    texts = [" ".join(words[j] for j in rng.integers(0, len(words), 12)) for _ in range(n)]
    config = FlowConfig(n_transforms=2, hidden_features=32, rank=8, batch_size=1024,
                        max_epochs=epochs, max_epochs_conditional=epochs, patience=epochs)
    warm = {k: rng.standard_normal((64, 4)).astype(np.float32) for k in "ab"}
    sufficiency_matrix(warm, config=config)
    before = anon_kib()
    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    arrays = {
        enc.spec.id: embed(enc, texts, corpus_hash=f"bench-{n}", cache_dir=cache, batch_size=256)
        for enc in encoders
    }
    t1 = time.perf_counter()
    embed_peak = peak[0]
    result = sufficiency_matrix(arrays, config=config, stream=True)
    t2 = time.perf_counter()
    running[0] = False
    print(json.dumps({
        "n": n, "embed_s": t1 - t0, "flows_s": t2 - t1,
        "embed_growth_mib": (embed_peak - before) / 1024, "total_growth_mib": (peak[0] - before) / 1024,
        "data_mib": sum(a.nbytes for a in arrays.values()) / 2**20,
        "memmapped": all(isinstance(a, np.memmap) for a in arrays.values()),
        "is_per_dim": {f"{s}->{t}": r for s, t, r in result.records[["source", "target", "is_per_dim"]]
                       .itertuples(index=False)},
    }))
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000, 160_000])
    parser.add_argument("--epochs", type=int, default=1, help="flow epochs (marginal and conditional)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for n in args.sizes:
            done = subprocess.run(
                [sys.executable, "-c", _SCRIPT, str(n), str(args.epochs), cache],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
            )
            if done.returncode != 0:
                sys.exit(done.stderr[-3000:])
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(
                f"N={r['n']:>7,}  embed {r['embed_s']:6.1f} s  flows {r['flows_s']:6.1f} s  "
                f"data {r['data_mib']:6.1f} MiB  anon growth: embedding {r['embed_growth_mib']:5.1f} MiB, "
                f"whole {r['total_growth_mib']:5.1f} MiB  (memory-mapped: {r['memmapped']})",
                flush=True,
            )
    first, last = rows[0], rows[-1]
    print(
        f"N grows x{last['n'] / first['n']:.0f}; data x{last['data_mib'] / first['data_mib']:.0f}; "
        f"anonymous-memory growth x{last['total_growth_mib'] / max(first['total_growth_mib'], 1.0):.2f}"
    )


if __name__ == "__main__":
    main()
