"""The provisional, label-free choice of a model: which rule makes it, what it picks on this run, and how
often such a pick was right on the validity benchmark.

The rule depends on what the embeddings are for (``use``): search is judged on the benchmark's retrieval
corpora by nDCG@10 over their queries (a benchmark without them falls back on nearest-neighbour accuracy
of class labels and on pair similarity), grouping by k-means V-measure, a trained classifier by
logistic-regression accuracy; "not sure" by all three. For each use the benchmark's corpora are *cases*;
the product follows the rule :func:`~flare_core.choosing.label_free_rules.leave_one_corpus_out` chooses on
every case, and reports the odds that procedure earned when each corpus was left out in turn.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flare_core.answer.shipped import shipped_answer_results, shipped_results
from flare_core.answer.stored import LabelFreeGround
from flare_core.choosing.accuracy_posterior import AccuracyPrior, prior_by_rank
from flare_core.choosing.label_free_rules import (
    RULES,
    SHORT_LIST,
    cannot_read,
    leave_one_corpus_out,
    ranked_by,
    rule_table,
)
from flare_core.choosing.probe_reading import ProbeReading
from flare_core.choosing.stopping import MIN_SETTLED_QUERIES
from flare_core.data.language import READ_SHARE, Writing
from flare_core.store.atomic import write_text
from flare_core.store.cache_folder import cache_root

#: What a person can say the embeddings are for (New run, ``flare run --use``), in words.
USE_WORDS = {
    "search": "search (finding similar texts)",
    "grouping": "grouping texts (clustering)",
    "classifier": "a trained classifier",
    "unsure": "any use (you did not say which)",
}
#: Each use's oracle column in a benchmark record's table, by the record's oracle (``accuracy``:
#: classification corpora, ``sts_spearman``: similarity, ``ndcg_at_10``: retrieval).
_ORACLES = {
    "search": {"ndcg_at_10": "oracle", "accuracy": "oracle_knn", "sts_spearman": "oracle"},
    "grouping": {"accuracy": "oracle_vmeasure"},
    "classifier": {"accuracy": "oracle"},
}
#: A use judged on corpora of its own task where the benchmark has them, the others' proxies otherwise.
_OWN_TASK = {"search": "ndcg_at_10"}


def benchmark_cases(records: list[dict[str, Any]], use: str) -> list[dict[str, Any]]:
    """The benchmark's corpora as cases of ``use`` (see the module docstring): each with its label-free
    ``table`` (index: model), the use's ``oracle`` and the trained ``models``. Search is judged on the
    retrieval corpora alone when the benchmark has one, by the proxies of the other corpora otherwise;
    grouping on the corpora whose texts group by class (a record's ``groups_by_class``) when the records
    say which. "unsure" gives every case of every use, and the similarity corpora's scored pairs."""
    if use == "unsure":  # with the scored pairs of the similarity corpora, which judge no single use
        similar = [record for record in records if record.get("oracle") == "sts_spearman"]
        return [case for u in _ORACLES for case in benchmark_cases(records, u)] + [
            case for case in _cases(similar, "similarity", "oracle")
        ]
    own = _OWN_TASK.get(use)
    if own is not None and any(record.get("oracle") == own for record in records):
        records = [record for record in records if record.get("oracle") == own]
    if use == "grouping" and any("groups_by_class" in record for record in records):
        records = [record for record in records if record.get("groups_by_class")]
    cases = []
    for record in records:
        column = _ORACLES[use].get(record.get("oracle", "accuracy"))
        if column is not None:
            cases += _cases([record], use, column)
    return cases


def _cases(records: list[dict[str, Any]], use: str, column: str) -> list[dict[str, Any]]:
    """Each record as a case of ``use`` judged by its table's ``column`` (none where it has no values)."""
    cases = []
    for record in records:
        table = pd.DataFrame(record["table"]).set_index("model")
        if column not in table or table[column].isna().all():
            continue
        cases.append(
            {
                "case": f"{record['corpus']} ({use})",
                "table": table,
                "oracle": table[column].astype(float),
                "models": list(record["candidates"]),
            }
        )
    return cases


@functools.lru_cache(maxsize=8)
def _judged(use: str, shipped: str) -> dict[str, Any]:
    """:func:`_judge`, kept in the cache folder (``judged/<key>.json``): the same for every run of this code
    on this shipped benchmark, and seconds of work for each process that writes a verdict. The key is a
    digest of ``use``, the shipped benchmark and every source file of ``flare_core``."""
    path = cache_root() / "judged" / f"{_judged_key(use, shipped)}.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text(encoding="utf-8"))
    judged = _judge(use, shipped)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs time, not the answer
        write_text(path, json.dumps(judged))
    return judged


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """sha256 of every source file of ``flare_core`` (path and bytes)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _judged_key(use: str, shipped: str) -> str:
    return hashlib.sha256(f"{_source_digest()}\n{use}\n{shipped}".encode()).hexdigest()[:32]


def _judge(use: str, shipped: str) -> dict[str, Any]:
    """Every label-free rule judged on the shipped benchmark's cases of ``use`` (see :func:`rule_for`)."""
    records = json.loads(shipped)["corpora"]
    cases = benchmark_cases(records, use)
    if not cases:
        return {}
    loco = leave_one_corpus_out(cases)
    singles = rule_table(cases)
    return {
        "use": use,
        "rule": loco["final"],
        "mean_lost": loco["mean_lost"],
        "worst_lost": loco["worst_lost"],
        "short_list_within_1": loco["short_list_within_1"],
        "cases": loco["cases"],
        "corpora": len({r["corpus"] for r in records}),
        "per_case": loco["rows"],
        "rules": singles.to_dict(orient="records"),
    }


def rules_benchmark() -> dict[str, Any] | None:
    """The shipped benchmark the label-free rules are chosen on: the answer benchmark (every corpus of
    every use, the geometric scores), or the map benchmark's runs where it is not shipped."""
    return shipped_answer_results() or shipped_results()


def rule_for(use: str) -> dict[str, Any]:
    """The rule the product follows for ``use`` and its benchmark odds (empty without a shipped benchmark):
    ``rule``, ``mean_lost``, ``worst_lost`` (points, leave one corpus out), ``short_list_within_1``,
    ``cases``, ``corpora``, ``per_case`` and ``rules`` (every rule judged on every case)."""
    if use not in USE_WORDS:
        raise ValueError(f"unknown use {use!r}: choose from {list(USE_WORDS)}")
    shipped = rules_benchmark()
    if not shipped:
        return {}
    judged = _judged(use, json.dumps(shipped, sort_keys=True))
    if not judged and use != "unsure":  # the shipped benchmark did not judge this use: fall back
        return {**rule_for("unsure"), "asked_use": use}
    return judged


def provisional_choice(scores: pd.DataFrame, use: str) -> LabelFreeGround | None:
    """The label-free pick of one run: ``scores`` has one row per candidate (index: model) and the
    label-free columns the rules read (``dim``, ``flow``, ``effective_rank``…). Returns ``choice``,
    ``short_list`` (at most three, best first), ``rule`` and its words, ``use`` and the benchmark ``odds``;
    None when no rule can score the candidates."""
    odds = rule_for(use)
    rule, order = rule_order(scores, use)
    if not order:
        return None
    chosen = odds.get("rule") or "dim"
    cannot = _cannot_read(scores)
    writing = scores.attrs.get("writing")
    languages = writing.words() if isinstance(writing, Writing) else ""
    return {
        "use": use,
        "use_words": USE_WORDS[use],
        "rule": rule,
        "rule_words": RULES[rule][0]
        + (
            ", among the models that can read your texts (the others read fewer than "
            f"{READ_SHARE:.0%} of them: they were trained on other languages or scripts)"
            if cannot
            else ""
        ),
        # the rule the benchmark chose for this use, named one way, and the one that ranks for it until
        # its scores are in ("" when it ranks itself)
        "chosen_words": RULES[chosen][0] if chosen in RULES else RULES[rule][0],
        "stand_in": RULES[rule][0] if chosen in RULES and chosen != rule else "",
        "cannot_read": cannot,
        "languages": languages,
        "choice": order[0],
        "short_list": order[:SHORT_LIST],
        "odds": {k: v for k, v in odds.items() if k not in ("per_case", "rules")},
    }


def _cannot_read(scores: pd.DataFrame) -> list[str]:
    """The candidates that cannot read the corpus's writing, when some can (the rules rank them last)."""
    flags = cannot_read(scores)
    cannot = flags.index[flags].tolist()
    return cannot if len(cannot) < len(flags) else []


def rule_order(scores: pd.DataFrame, use: str) -> tuple[str, list[str]]:
    """The rule the product follows for ``use`` and the candidates it scores, best first (the width when
    that rule scores none of them)."""
    rule = rule_for(use).get("rule") or "dim"
    order = [m for m in ranked_by(scores, rule) if np.isfinite(_score(scores, rule, m))]
    if not order:
        rule, order = "dim", [m for m in ranked_by(scores, "dim") if np.isfinite(_score(scores, "dim", m))]
    return rule, order


def prior_cases() -> list[list[dict[str, Any]]]:
    """The classification corpora the few-label prior may learn from, in order of preference: the shipped
    answer benchmark's (every corpus, every candidate, the geometric scores), then the shipped benchmark's
    (fewer corpora, but information sufficiency too)."""
    out = []
    for shipped in (shipped_answer_results(), shipped_results()):
        cases = benchmark_cases(shipped.get("corpora", []), "classifier") if shipped else []
        if cases:
            out.append(cases)
    return out


def few_label_prior(scores: pd.DataFrame, use: str) -> AccuracyPrior:
    """What the product knows of the candidates (``scores``' index) before the first label: the shipped
    benchmarks' record, in classifier accuracy, of the candidate at each place of the rule the provisional
    choice follows (:func:`~flare_core.choosing.accuracy_posterior.prior_by_rank`; the first of
    :func:`prior_cases` that scores that rule), so that with no label the posterior names the provisional
    choice. Candidates the rule cannot score come last. Every model alike (:meth:`AccuracyPrior.flat`)
    without a record of the rule. The labels are read with :func:`shipped_reading`."""
    rule, order = rule_order(scores, use)
    order += [m for m in scores.index if m not in order]
    words = RULES[rule][0] if rule in RULES else f"the rule {rule}"
    reading = shipped_reading()
    for cases in prior_cases():
        try:
            prior = prior_by_rank(
                cases, rule, order, words=f"the record of {words} on {len(cases)} public corpora"
            )
        except ValueError:  # these corpora have no score of this rule
            continue
        return prior.read_with(reading)
    return AccuracyPrior.flat(order).read_with(reading)


def shipped_reading() -> ProbeReading | None:
    """What k labels can show of each model (:class:`~flare_core.choosing.probe_reading.ProbeReading`), as
    the shipped answer benchmark learned it on its classification corpora; None without it."""
    data = ((shipped_answer_results() or {}).get("few_labels") or {}).get("reading")
    return ProbeReading.from_json(data) if data else None


def _score(scores: pd.DataFrame, rule: str, model: str) -> float:
    from flare_core.choosing.label_free_rules import rule_scores

    value = rule_scores(scores, rule).get(model)
    return float(value) if value is not None else float("nan")


def odds_sentence(odds: dict[str, Any]) -> str:
    """ "On 8 public corpora this choice lost 1.9 points on average against the best model, 10.6 at
    worst." (empty without odds)"""
    if not odds or odds.get("mean_lost") is None:
        return ""
    return (
        f"On {odds['corpora']} public corpora such a label-free choice lost {odds['mean_lost']:.1f} points "
        f"on average against the best model, {odds['worst_lost']:.1f} at worst (each corpus judged by a "
        "rule chosen on the others)."
    )


def few_label_record(k: int) -> dict[str, Any] | None:
    """What the shipped answer benchmark measured of the few-label answer after ``k`` random labels:
    ``corpora``, ``k``, ``within`` (share of draws whose pick was within the tolerance of the best),
    ``mean_lost``, ``label_free_within`` (the same share with no label), ``tolerance``; None without it."""
    shipped = shipped_answer_results() or {}
    record = shipped.get("few_labels")
    if not record:
        return None
    rows = [r for r in record.get("by_k", []) if r.get("method") == "posterior" and int(r.get("k", -1)) == k]
    if not rows:
        return None
    corpora = len({r.get("corpus") for r in record.get("per_corpus", [])})
    return {
        "corpora": corpora,
        "k": k,
        "within": float(rows[0]["within"]),
        "mean_lost": float(rows[0]["mean_lost"]),
        "label_free_within": float(record["label_free"]["within"]),
        "tolerance": float(record.get("tolerance", 2.0)),
    }


def check_sentence(k: int = 32, *, search: bool = False) -> str:
    """The invitation to label a few texts, with what the benchmark measured of it; for a search run
    (``search``), to judge a few queries (the benchmark's record is of labelled texts, so it is not
    quoted)."""
    if search:
        return (
            f"Check with a few judged queries: write or accept {MIN_SETTLED_QUERIES} search queries, mark "
            "the documents that answer each, and the answer will say how far to trust it."
        )
    record = few_label_record(k)
    if record is None:
        return "Check with a few labels: label 16 texts and the answer will say how far to trust it."
    return (
        f"Check with a few labels: on {record['corpora']} public corpora, {k} labelled texts put the answer "
        f"within {record['tolerance']:g} points of the best model in {record['within']:.0%} of trials "
        f"({record['label_free_within']:.0%} without labels)."
    )


def forecast_sentence(tolerance_points: float) -> str:
    """How often "n more labels would settle it" came true on the shipped answer benchmark, where it was
    checked at the same tolerance of "good enough" ("" without that record, or at another tolerance)."""
    record = (shipped_answer_results() or {}).get("few_labels") or {}
    forecast = record.get("forecast") or {}
    if not forecast.get("told") or forecast.get("came_true") is None:
        return ""
    if abs(float(record.get("tolerance", 0.0)) - float(tolerance_points)) > 1e-9:
        return ""
    return (
        f"On public corpora, that many more labels settled it in {forecast['came_true']:.0%} of the "
        f"{forecast['told']} trials told so."
    )
