"""Every column a table shows, in words: its heading and its help (where the symbol or the field's own name
is kept). The pages and the HTML report read these through :mod:`flare_core.view.tables`."""

from __future__ import annotations

import re

from flare_core.view.glossary import GLOSSARY, LABELS

#: A column's heading and its help: the heading in words, the help with the symbol (or the stored name).
COLUMNS: dict[str, tuple[str, str]] = {
    # one pair of models (Information sufficiency; its columns source and target are the page's own)
    "d_source": ("dimensions of the first model", "d_U: the known model's width after whitening."),
    "d_target": ("dimensions of the second model", "d_V: the predicted model's width after whitening."),
    "nll_marg_train": (
        "fit alone, training texts (nats)",
        "nll_marg_train: how poorly the second model's embeddings are fitted on their own (negative "
        "log-likelihood of the marginal density), on the texts it was trained on. Lower is a closer fit.",
    ),
    "nll_marg_val": (
        "fit alone, held-out texts (nats)",
        "nll_marg_val: the same fit on the held-out texts.",
    ),
    "nll_cond_train": (
        "fit given the first model, training texts (nats)",
        "nll_cond_train: how poorly the second model's embeddings are fitted when the first model's are "
        "known (negative log-likelihood of the conditional density), on the training texts.",
    ),
    "nll_cond_val": (
        "fit given the first model, held-out texts (nats)",
        "nll_cond_val: the same fit on the held-out texts.",
    ),
    "is_nats": ("information (nats)", f"IS(U→V), is_nats: nll_marg_val − nll_cond_val. {GLOSSARY['is']}"),
    "is_per_dim": ("information per dimension (nats)", f"IS/d, is_per_dim. {GLOSSARY['is_per_dim']}"),
    "is_raw_nats": ("information before the floor at 0 (nats)", GLOSSARY["is_raw"]),
    "is_raw_per_dim": (
        "information per dimension before the floor at 0 (nats)",
        f"is_raw_per_dim: the raw figure divided by the target's dimension. {GLOSSARY['is_raw']}",
    ),
    "delta_emp_marg": (
        "overfitting of the fit alone (nats)",
        "Δ_emp of the marginal, delta_emp_marg: |held-out fit − training fit| of the second model alone. "
        + GLOSSARY["delta_emp"],
    ),
    "delta_emp_cond": (
        "overfitting of the fit given the first model (nats)",
        "Δ_emp of the conditional, delta_emp_cond: |held-out fit − training fit| given the first model. "
        + GLOSSARY["delta_emp"],
    ),
    "epochs": ("training rounds", "epochs: passes over the training texts before training stopped."),
    "seconds": ("seconds", "Seconds of computing time."),
    # scores of one estimator
    "score": ("score", GLOSSARY["flow_score"]),
    "ci_low": ("likely from", f"ci_low: the low end of the 95% interval. {GLOSSARY['ci']}"),
    "ci_high": ("likely to", f"ci_high: the high end of the 95% interval. {GLOSSARY['ci']}"),
    "rank": ("place", "rank: 1 is the best score."),
    "n_targets": ("other models it was compared with", "n_targets: the targets V the score aggregates."),
    # the per-model summary
    "model": ("model", "The model's name."),
    "role": ("role", "candidate: ranked; control: built to know nothing; reference: a target only."),
    "dim": ("dimensions", "d: the width of the model's embeddings."),
    # the embeddings (Corpus)
    "status": ("status", "Whether the model embedded the texts."),
    "error": ("error", "Why the model could not embed the texts."),
    "mean norm": ("average length of its vectors", "mean ‖x‖: the average L2 norm of the model's vectors."),
    "std norm": ("spread of the lengths", "std ‖x‖: the standard deviation of the vectors' L2 norms."),
    "zero rows": (
        "texts with empty vectors",
        "zero rows: texts the model gave an all-zero vector, because it knew none of their words.",
    ),
    # correlations (Validation)
    "label_free": ("label-free score", "label_free: the score computed without labels."),
    "downstream": ("score on the labels", "downstream: the score the labels give each model."),
    "n_models": ("models", "n_models: the number of models whose two scores are compared."),
    "spearman_rho": ("rank agreement (Spearman)", "Spearman's ρ: 1 = the same order, 0 = unrelated."),
    "spearman_p": ("chance of this by luck (Spearman)", "p-value of Spearman's ρ."),
    "pearson_r": ("linear agreement (Pearson)", "Pearson's r: 1 = a perfect straight line."),
    "pearson_p": ("chance of this by luck (Pearson)", "p-value of Pearson's r."),
    "kendall_tau": ("pairwise agreement (Kendall)", "Kendall's τ: the share of pairs in the same order."),
    "kendall_p": ("chance of this by luck (Kendall)", "p-value of Kendall's τ."),
    "spearman_ci_low": ("rank agreement, likely from", "Low end of the 95% bootstrap interval of ρ."),
    "spearman_ci_high": ("rank agreement, likely to", "High end of the 95% bootstrap interval of ρ."),
    "n_boot_valid": ("resamples used", "n_boot_valid: bootstrap resamples with a correlation."),
    # the stability studies
    "aggregation": (
        "how the targets are combined",
        "aggregation: median (the default), mean or trimmed mean.",
    ),
    "rank_agreement_with_median": (
        "agreement with the median's order",
        "Spearman's ρ between this aggregation's order and the median's.",
    ),
    "rho_downstream": ("agreement with the labels (ρ)", "ρ between the score's order and the labels' order."),
    "rank_agreement": ("rank agreement", GLOSSARY["rank_agreement"]),
    "delta_rho": ("change in agreement with the labels", GLOSSARY["delta_rho"]),
    "alpha": ("share of the held-out texts", "α: the fraction of the validation texts used."),
    "repeat": ("repeat", "The draw's number."),
    "n_val": ("held-out texts", "n_val: validation texts used."),
    "pool_size": ("models in the pool", "The number of models ranked together."),
    "p": ("share of pairs shuffled", "p: the fraction of text pairings shuffled."),
    "mean_is_per_dim": ("average information per dimension (nats)", GLOSSARY["is_per_dim"]),
    # collapse
    "n_pairs": ("pairs of texts", "n_pairs: the pairs of texts compared."),
    "n_texts": ("texts", "n_texts: the texts the pairs were drawn from."),
    "socm": ("collapse score", GLOSSARY["socm"]),
    "d_mu": ("distance between the means", GLOSSARY["d_mu"]),
    "d_sigma": ("distance between the spreads", GLOSSARY["d_sigma"]),
    "row_i": ("row of text A", "row_i: the row of the first text in your corpus."),
    "row_j": ("row of text B", "row_j: the row of the second text in your corpus."),
    "socm_same_label_mean": (
        "average collapse, texts of the same label",
        "Mean SOCM over pairs whose two texts share a label.",
    ),
    "socm_different_label_mean": (
        "average collapse, texts of different labels",
        "Mean SOCM over pairs whose texts have different labels.",
    ),
    # runs and share links
    "id": ("full id", "The run's full id, as the flare command takes it."),
    "run": ("id", "The end of the run's full id: enough to tell two runs of the same name apart."),
    "created": ("created", "When it was created (UTC)."),
    "started": ("started", "When the run was created (UTC)."),
    "expires": ("expires", "When the link stops working (UTC)."),
    "prefix": ("link", "The start of the link's token, to tell links apart (the token is shown once)."),
}

#: Statistics a column name ends with, in words.
_STATISTICS = {
    "mean": "average",
    "std": "spread (standard deviation)",
    "min": "lowest",
    "max": "highest",
    "median": "median",
    "q05": "5th percentile",
    "q25": "25th percentile",
    "q75": "75th percentile",
    "q95": "95th percentile",
    "trim10": "trimmed mean (10%)",
}
_ESTIMATORS = {"flow": "FLARE", "gmm": "EMIR"}
#: Score variants (all_scores): what is aggregated, how, and whether per dimension.
_VARIANT = re.compile(r"(is|cond_only)_(median|mean|trim10)_(norm|raw)")
_ESTIMATOR_COLUMN = re.compile(r"(flow|gmm)_(score|ci_low|ci_high|rank)")
_STATISTIC_COLUMN = re.compile(r"(socm|d_mu|d_sigma)_(" + "|".join(_STATISTICS) + ")")


def column_words(name: str) -> tuple[str, str]:
    """``(heading, help)`` of the column ``name``: its words, and a help that keeps its symbol (or the
    stored name). A name not known here reads as itself, with spaces for underscores."""
    if not isinstance(name, str):
        raise ValueError(f"a column name is a string, got {type(name).__name__}")
    if name in COLUMNS:
        return COLUMNS[name]
    if name in LABELS:
        return LABELS[name], f"{name}: {GLOSSARY.get(name, '')}".strip().rstrip(":")
    match = _ESTIMATOR_COLUMN.fullmatch(name)
    if match:
        label, part = _ESTIMATORS[match[1]], match[2]
        help_text = GLOSSARY[f"{match[1]}_score"]
        heading = {
            "score": f"{label} score",
            "ci_low": f"{label} score, likely from",
            "ci_high": f"{label} score, likely to",
            "rank": f"{label} place",
        }[part]
        return heading, f"{name}: {help_text}" + (f" {GLOSSARY['ci']}" if part.startswith("ci") else "")
    match = _VARIANT.fullmatch(name)
    if match:
        what = "information" if match[1] == "is" else "fit given the other model only"
        unit = "per dimension (nats)" if match[3] == "norm" else "(nats)"
        return f"{_STATISTICS[match[2]]} {what} {unit}", f"{name}: {GLOSSARY['is']}"
    match = _STATISTIC_COLUMN.fullmatch(name)
    if match:
        base, base_help = COLUMNS[match[1]]
        return f"{base}, {_STATISTICS[match[2]]}", f"{name}: {base_help}"
    return name.replace("_", " "), GLOSSARY.get(name, "")


def known_column(name: str) -> bool:
    """Whether ``name`` has words of its own here, or is words already (no underscore in it)."""
    patterns = (_ESTIMATOR_COLUMN, _VARIANT, _STATISTIC_COLUMN)
    return "_" not in name or name in COLUMNS or name in LABELS or any(p.fullmatch(name) for p in patterns)
