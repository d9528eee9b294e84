"""Study: choosing a model for search from a few judged queries, judged on the benchmark's retrieval corpora.

For each retrieval corpus of a benchmark store (``flare benchmark --corpora chatbot-questions …``) a
simulated person judges k = 5, 10, 20 and 40 queries of the corpus, in 30 seeded draws, and the product's
own few-judgement answer picks a model:

- the person judges perfectly: each query's judgements are the corpus's relevance judgements restricted
  to the query's pool, exactly as the product pools (the union of every candidate's top
  :data:`~flare_core.answer.few_judgements.POOL_DEPTH` documents by cosine; a pooled document without a
  judgement is judged not relevant, a relevant document outside the pool stays unjudged). A query with no
  relevant document in its pool is judged but does not count, as in the product;
- each candidate ranks the run's stored document embeddings for its own embedding of each query (each
  candidate's encoder embeds the corpus's queries as the run's downstream stage did; the embeddings are
  cached, and checked against the run's stored per-query nDCG@10 before anything is drawn);
- the answer is the product's: :func:`~flare_core.choosing.retrieval_eval.per_query_scores` on the pooled
  judgements, :func:`~flare_core.choosing.retrieval_eval.few_judgement_estimates` (seeded by the run's
  seed) and :func:`~flare_core.choosing.stopping.search_stopping_advice`.

Queries are chosen two ways: *random* (a seeded permutation of the corpus's queries, the first k, as
the product's drafts from documents drawn at random), and *suggested*, the disagreement-first rule: drafting
known-item queries (a document's first sentence) first from the documents whose neighbours the candidates
disagree on most among :data:`DRAFT_SAMPLE` drawn with the seed. A benchmark corpus has its own queries,
so the rule is simulated as the corpus's queries whose relevant documents it would draft from first (the
draw's seed, one draft of 40), each document bringing the queries it is relevant to. The product does not
draft by it: it does not beat random queries here.

The oracle is each candidate's mean nDCG@10 over all the corpus's queries, read from the per-query
scores the benchmark run stored (never from its answer). Reported per corpus, way and k: the share of
draws whose pick is within 2 nDCG@10 points (× 100) of the oracle's best candidate, the mean points
lost, the share the advice calls settled and, of those, the share within 2 points; then the advice's
floor of judged queries (5, 10 or 20) and what each does to the settled draws, chosen leave one corpus
out when the store holds more than one corpus.

Usage::

    .venv/bin/python bench/studies/few_judgements.py --runs-dir RUNS [--corpora chatbot-questions,...]
        [--draws 30] [--cache-dir RUNS-CACHE] [--json out.json]

Reads the store only; query embeddings go to ``--cache-dir`` (``runs/.few-judgement-cache`` by default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.answer.few_judgements import MIN_KNOWN_ITEM_WORDS, POOL_DEPTH  # noqa: E402
from flare_core.answer.from_judgements import first_sentence  # noqa: E402
from flare_core.choosing import stopping  # noqa: E402
from flare_core.choosing.retrieval_eval import few_judgement_estimates, per_query_scores, top_k_rows  # noqa: E402

#: Documents the disagreement-first rule looks at, drawn with the seed.
DRAFT_SAMPLE = 400
from flare_core.answer.from_labels import candidate_ids  # noqa: E402
from flare_core.answer.search_labels import QUERY_SCORES  # noqa: E402
from flare_core.benchmark.label_draws import WITHIN_POINTS  # noqa: E402
from flare_core.data.judgements import JUDGEMENTS  # noqa: E402
from flare_core.store.runs import Run, safe_name  # noqa: E402

KS = (5, 10, 20, 40)
FLOORS = (5, 10, 20)
WAYS = ("random", "suggested")
#: A floor is kept for a held-out corpus when the settled draws of every other corpus are at least this
#: often within 2 points (the lowest such floor: it settles most often); else the floor with the best
#: worst corpus.
CALIBRATED = 0.9


def retrieval_runs(runs_dir: Path) -> dict[str, str]:
    """Corpus → run id of the store's finished retrieval corpora (its ``benchmark/benchmark.json``)."""
    path = runs_dir / "benchmark" / "benchmark.json"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run `flare benchmark --runs-dir {runs_dir}` first")
    records = json.loads(path.read_text())["corpora"]
    return {r["corpus"]: r["run_id"] for r in records if r.get("oracle") == "ndcg_at_10"}


def _queries(run: Run) -> tuple[list[str], dict[str, dict[int, int]]]:
    """The run's query texts and judgements, numbered as the run's stored per-query scores name them."""
    judged = run.load_frame(JUDGEMENTS)
    firsts = judged.drop_duplicates("query_id")
    number = {str(q): str(i) for i, q in enumerate(firsts["query_id"])}
    qrels: dict[str, dict[int, int]] = {}
    for query, row, grade in judged[["query_id", "doc_row", "relevance"]].itertuples(index=False):
        qrels.setdefault(number[str(query)], {})[int(row)] = int(grade)
    return firsts["query_text"].astype(str).tolist(), qrels


def query_embeddings(
    run: Run, texts: list[str], models: Sequence[str], cache_dir: Path
) -> dict[str, np.ndarray]:
    """Each model's encoder's embedding of ``texts``, as the run's downstream stage embedded them (cached)."""
    from flare_core import encoders

    folder = cache_dir / run.id
    folder.mkdir(parents=True, exist_ok=True)
    params = run.manifest["params"]
    out = {}
    for model in models:
        path = folder / f"{safe_name(model)}.npy"
        if not path.is_file():
            encoder = encoders.load_encoder(
                model, device=params.get("device"), corpus_texts=run.corpus_frame()["text"].tolist()
            )
            batch_size = int(params.get("batch_size") or 32)
            np.save(path, np.asarray(encoders.encode_queries(encoder, texts, batch_size=batch_size)))
        out[model] = np.load(path)
    return out


def disagreement(docs: dict[str, np.ndarray]) -> np.ndarray:
    """Per document: how many distinct documents the candidates' top :data:`POOL_DEPTH` neighbours hold
    together (``draft_queries``' measure of what the candidates disagree on)."""
    from sklearn.preprocessing import normalize

    n = next(iter(docs.values())).shape[0]
    found: list[set[int]] = [set() for _ in range(n)]
    for x in docs.values():
        xn = normalize(np.asarray(x, dtype=np.float64))
        sims = xn @ xn.T
        top = np.argpartition(-sims, min(POOL_DEPTH, n - 1), axis=1)[:, :POOL_DEPTH]
        for i, near in enumerate(top):
            found[i].update(int(r) for r in near)
    return np.array([len(f) for f in found])


def drafting_order(texts: Sequence[str], spread: np.ndarray, seed: int) -> list[int]:
    """The documents the disagreement-first rule drafts from, first to last, seeded with ``seed`` and no
    query asked yet: :data:`DRAFT_SAMPLE` documents of a seeded permutation with a first sentence of at
    least :data:`MIN_KNOWN_ITEM_WORDS` words (each sentence once), by disagreement, ties by that order."""
    rng = np.random.default_rng([seed, 0])
    seen: set[str] = set()
    rows: list[int] = []
    for row in rng.permutation(len(texts)):
        query = first_sentence(texts[row])
        key = " ".join(query.lower().split())
        if len(query.split()) < MIN_KNOWN_ITEM_WORDS or key in seen:
            continue
        seen.add(key)
        rows.append(int(row))
        if len(rows) >= DRAFT_SAMPLE:
            break
    order = np.argsort(-spread[rows], kind="stable")
    return [rows[i] for i in order]


def suggested_queries(order: Sequence[int], relevant_to: dict[int, list[str]], n: int) -> list[str]:
    """The queries the drafted documents of ``order`` answer, in that order, each once; at most ``n``."""
    out: list[str] = []
    for row in order:
        for query in relevant_to.get(row, []):
            if query not in out:
                out.append(query)
        if len(out) >= n:
            break
    return out[:n]


def _largest_difference_to_stored(run: Run, queries, docs, qrels, stored: pd.DataFrame) -> float:
    """The cached query embeddings must give the run's own per-query nDCG@10 with every judgement: the
    largest difference (a missing query counts as infinite); stops the study above 1e-6."""
    rows_of = {q: int(q) for q in qrels}
    check = 0.0
    for model, emb in queries.items():
        full = per_query_scores(emb, docs[model], qrels, rows_of).set_index("query")["ndcg_at_10"]
        mine = stored[stored["model"] == model].set_index("query")["ndcg_at_10"].reindex(full.index)
        check = max(check, float((full - mine).abs().fillna(np.inf).max()))
    if check > 1e-6:
        raise SystemExit(
            f"{run.id}: the query embeddings give other nDCG@10 than the run stored ({check:.3g})"
        )
    return check


def _pooled_judgements(queries, docs, qrels) -> dict[str, dict[int, int]]:
    """Each query's pool (the union of every candidate's top ``POOL_DEPTH``) with its perfect judgements,
    the corpus's own restricted to the pool; only the queries with a relevant document in their pool."""
    tops = [top_k_rows(queries[m], docs[m], POOL_DEPTH) for m in queries]
    pooled = {}
    for q in qrels:
        pool = set(int(r) for t in tops for r in t[int(q)])
        pooled[q] = {r: qrels[q].get(r, 0) for r in sorted(pool)}
    return {q: j for q, j in pooled.items() if any(g > 0 for g in j.values())}


def corpus_draws(run: Run, cache_dir: Path, draws: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Every draw of one corpus's run: one row per (way, draw, k) with the pick, its loss and the advice
    at each floor; and the checks made on the way."""
    start = time.perf_counter()
    models = candidate_ids(run)
    texts, qrels = _queries(run)
    stored = run.load_frame(*QUERY_SCORES)
    stored = stored[stored["model"].isin(models)]
    oracle = stored.groupby("model")["ndcg_at_10"].mean().reindex(models)
    best = str(oracle.idxmax())
    docs = {m: np.asarray(run.load_embeddings(m), dtype=np.float64) for m in models}
    queries = query_embeddings(run, texts, models, cache_dir)
    rows_of = {q: int(q) for q in qrels}
    check = _largest_difference_to_stored(run, queries, docs, qrels, stored)
    counted = _pooled_judgements(queries, docs, qrels)
    tables = {m: per_query_scores(queries[m], docs[m], counted, rows_of).set_index("query") for m in models}
    # the disagreement-first drafting order
    corpus_texts = run.corpus_frame()["text"].astype(str).tolist()
    spread = disagreement(docs)
    seed = int(run.manifest.get("params", {}).get("seed", 0))
    relevant_to: dict[int, list[str]] = {}
    for q, judged in qrels.items():
        for row, grade in judged.items():
            if grade > 0:
                relevant_to.setdefault(row, []).append(q)
    ids = list(qrels)
    rows = []
    short = 0
    shipped_floor = stopping.MIN_SETTLED_QUERIES
    for draw in range(draws):
        orders = {
            "random": [ids[i] for i in np.random.default_rng([0, draw]).permutation(len(ids))[: max(KS)]],
            "suggested": suggested_queries(drafting_order(corpus_texts, spread, draw), relevant_to, max(KS)),
        }
        short += len(orders["suggested"]) < max(KS)
        for way, order in orders.items():
            for k in KS:
                chosen = [q for q in order[:k] if q in counted]
                row: dict[str, Any] = {"way": way, "draw": draw, "k": k, "n_counted": len(chosen)}
                if len(chosen) >= 1:
                    estimates = few_judgement_estimates(
                        {m: tables[m].loc[chosen].reset_index() for m in models}, seed=seed
                    )
                    pick = str(estimates["model"].iloc[0])
                    row.update(pick=pick, lost=100.0 * float(oracle[best] - oracle[pick]))
                    for floor in FLOORS:
                        stopping.MIN_SETTLED_QUERIES = floor
                        row[f"settled_{floor}"] = bool(
                            stopping.search_stopping_advice(estimates, len(chosen))["settled"]
                        )
                else:  # nothing to compare on: the product asks for a relevant document first
                    row.update(pick=None, lost=np.nan, **{f"settled_{f}": False for f in FLOORS})
                rows.append(row)
    stopping.MIN_SETTLED_QUERIES = shipped_floor
    frame = pd.DataFrame(rows)
    frame["within"] = frame["lost"] <= WITHIN_POINTS
    info = {
        "run_id": run.id,
        "documents": len(corpus_texts),
        "queries": len(qrels),
        "queries_with_a_pooled_relevant_document": len(counted),
        "best": best,
        "oracle": {m: round(float(v), 4) for m, v in oracle.items()},
        "max_ndcg_difference_to_stored": check,
        "suggested_draws_short_of_40": int(short),
        "seconds": round(time.perf_counter() - start, 1),
    }
    return frame, info


def _pct(values: pd.Series) -> str:
    return "–" if len(values) == 0 else f"{100 * float(values.mean()):.0f}%"


def draws_table(frames: dict[str, pd.DataFrame], floor: int = 10) -> str:
    lines = [
        "| corpus | queries chosen | k judged | counted (mean) | within 2 points | points lost (mean) | "
        "called settled | of them within 2 points |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for corpus, frame in frames.items():
        for way in WAYS:
            for k in KS:
                part = frame[(frame["way"] == way) & (frame["k"] == k)]
                settled = part[part[f"settled_{floor}"]]
                lines.append(
                    f"| {corpus} | {way} | {k} | {part['n_counted'].mean():.1f} | {_pct(part['within'])} | "
                    f"{part['lost'].mean():.1f} | {_pct(part[f'settled_{floor}'])} | "
                    f"{_pct(settled['within'])} ({len(settled)}) |"
                )
    return "\n".join(lines)


def floor_frame(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per corpus and floor: draws settled (every way and k) and the share of them within 2 points."""
    rows = []
    for corpus, frame in frames.items():
        for floor in FLOORS:
            settled = frame[frame[f"settled_{floor}"]]
            rows.append({"corpus": corpus, "floor": floor, "draws": len(frame), "settled": len(settled),
                         "within": float(settled["within"].mean()) if len(settled) else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def choose_floor(table: pd.DataFrame, corpora: Sequence[str]) -> int:
    """The floor for data of ``corpora``: the lowest whose settled draws are at least :data:`CALIBRATED`
    within 2 points on each of them (an unsettled corpus does not object); else the best worst corpus."""
    part = table[table["corpus"].isin(corpora)]
    worst = part.groupby("floor")["within"].min()
    calibrated = [f for f in FLOORS if not worst.get(f, np.nan) < CALIBRATED]
    if calibrated:
        return min(calibrated)
    return int(worst.fillna(-1).idxmax())


def floors_table(frames: dict[str, pd.DataFrame]) -> str:
    table = floor_frame(frames)
    lines = [
        "| corpus | "
        + " | ".join(f"floor {f}: settled / within 2" for f in FLOORS)
        + " | floor chosen on the other corpora |",
        "|---|" + "---|" * (len(FLOORS) + 1),
    ]
    for corpus in frames:
        cells = []
        for floor in FLOORS:
            row = table[(table["corpus"] == corpus) & (table["floor"] == floor)].iloc[0]
            within = "–" if np.isnan(row["within"]) else f"{100 * row['within']:.0f}%"
            cells.append(f"{row['settled']} of {row['draws']} / {within}")
        others = [c for c in frames if c != corpus]
        chosen = f"{choose_floor(table, others)}" if others else "– (one corpus)"
        lines.append(f"| {corpus} | " + " | ".join(cells) + f" | {chosen} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--corpora", default=None, help="comma-separated; every retrieval corpus by default")
    parser.add_argument("--draws", type=int, default=30)
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/.few-judgement-cache"))
    parser.add_argument("--json", type=Path, default=None, help="write every draw and check here")
    args = parser.parse_args(argv)
    runs = retrieval_runs(args.runs_dir)
    wanted = args.corpora.split(",") if args.corpora else list(runs)
    missing = [c for c in wanted if c not in runs]
    if missing:
        raise SystemExit(
            f"no finished retrieval run of {', '.join(missing)} in {args.runs_dir} ({', '.join(runs) or 'none'})"
        )
    frames, infos = {}, {}
    for corpus in wanted:
        frames[corpus], infos[corpus] = corpus_draws(
            Run(args.runs_dir / runs[corpus]), args.cache_dir, args.draws
        )
        print(f"{corpus}: {json.dumps(infos[corpus])}", file=sys.stderr)
    print(draws_table(frames))
    print()
    print(floors_table(frames))
    if args.json:
        out = {c: {"info": infos[c], "draws": frames[c].to_dict(orient="records")} for c in frames}
        args.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
