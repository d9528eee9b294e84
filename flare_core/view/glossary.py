"""One-line, plain-language explanations of every figure the dashboard and the report show."""

from __future__ import annotations

GLOSSARY: dict[str, str] = {
    "flow_score": "FLARE score: how much, on average, this model's embeddings tell you about the other "
    "models' embeddings (median information sufficiency per target dimension, estimated with normalizing "
    "flows). Higher is better.",
    "gmm_score": "EMIR score: the same idea as the FLARE score, estimated with Gaussian mixtures (faster, "
    "rougher).",
    "ci": "95% bootstrap interval over the held-out texts: two models whose intervals overlap cannot be "
    "told apart here.",
    "is": "Information sufficiency IS(U→V): how much knowing embedding U reduces the uncertainty about "
    "embedding V, in nats.",
    "is_per_dim": "IS divided by the target's dimension, so that targets of different sizes weigh the same.",
    "is_raw": "Raw IS (is_raw_nats): the estimator's own figure before it is held at 0. A flow's "
    "conditional starts as the target's own density; when no trained version fits the held-out texts "
    "better, IS is shown as 0 and the raw figure, below 0, tells how far the estimator strays when there is "
    "nothing to find.",
    "delta_emp": "Generalisation gap: how much worse the flows fit held-out texts than the texts they were "
    "trained on (Δ_emp = |validation NLL − training NLL|, marginal plus conditional, in nats). Small next "
    "to the information measured means the estimate holds on new texts; as large or larger means it is "
    "partly overfitted.",
    "nats": "Nats: the unit of information of the natural logarithm (1 nat ≈ 1.44 bits). A score of 0.25 "
    "nats per dimension means that knowing one model's embedding of a text narrows the range of plausible "
    "values of each dimension of another model's embedding by a factor of about e^0.25 ≈ 1.3. 0 means it "
    "tells nothing.",
    "community": "Louvain community of the IS graph: models that are mutually informative end up in the "
    "same group.",
    "socm_mean": "Average second-order collapse by mean pooling: how often texts with different token "
    "distributions get nearly the same mean-pooled embedding. Lower is better.",
    "d_mu": "d_μ: distance between the mean-pooled embeddings of two texts (0 = identical means).",
    "d_sigma": "d_Σ: distance between the token covariances of two texts (Bures–Wasserstein, 0 = identical "
    "spreads).",
    "socm": "SOCM = (1 − d_μ)·d_Σ: high when two texts have close means but different token spreads.",
    "uniformity": "Uniformity (Wang & Isola): how evenly embeddings spread over the sphere; more negative "
    "is more uniform.",
    "isoscore": "IsoScore: 1 when the embedding space uses all directions equally, 0 when everything lies "
    "on one line.",
    "effective_rank": "Effective rank: the number of directions the embeddings really use.",
    "silhouette": "Silhouette: how well texts group into their labels (or into k-means clusters without "
    "labels), from −1 to 1.",
    "accuracy": "Classification accuracy of a logistic regression on the embeddings (5-fold "
    "cross-validation).",
    "f1": "Macro-F1 of the same classifier: accuracy that weighs every label equally.",
    "v_measure": "V-measure of k-means clusters against the labels: 1 = clusters match the labels exactly.",
    "cosine_spearman": "STS: Spearman correlation between embedding cosine similarity and the human "
    "similarity scores.",
    "lambda": "λ: how strongly a layer's attention pulls tokens together (per head, averaged).",
    "r": "r: spread of the tokens entering the layer relative to the size of their mean.",
    "C": "C: how much the layer's feed-forward part and normalisation change the token concentration.",
    "concentration": "S(X)/‖μ(X)‖²: token spread relative to the mean; small values mean tokens crowd "
    "around their mean.",
    "z_spread_ratio": "S(Z)/S(H): spread of the attention branch's output relative to the spread of the "
    "layer's input, the measured counterpart of λ.",
    "mean_cos": "Average cosine between the tokens of a text: close to 1 when all tokens point the same way.",
    "rank_agreement": "Spearman agreement of a re-computed ranking with the full one: 1 = identical order.",
    "delta_rho": "Δρ: change in the correlation with the downstream scores when only part of the data is "
    "used.",
}


# the same figures under the names of the tables they come from
GLOSSARY["lambda_mean"] = GLOSSARY["lambda"]
GLOSSARY["flow_is_median_norm"] = GLOSSARY["flow_score"]
GLOSSARY["gmm_is_median_norm"] = GLOSSARY["gmm_score"]

#: Short names in words for chart axes, titles and table headers (the symbols stay in :data:`GLOSSARY`).
LABELS: dict[str, str] = {
    "flow_score": "FLARE score",
    "gmm_score": "EMIR score",
    "flow_is_median_norm": "FLARE score",
    "gmm_is_median_norm": "EMIR score",
    "socm_mean": "average collapse by mean pooling",
    "uniformity": "uniformity",
    "isoscore": "IsoScore",
    "effective_rank": "effective rank",
    "silhouette": "silhouette",
    "dim": "number of dimensions",
    "accuracy": "classification accuracy",
    "f1": "classification macro-F1",
    "v_measure": "clustering agreement with the labels",
    "cosine_spearman": "similarity-rating agreement",
    "cosine_pearson": "similarity-rating agreement (linear)",
    "ndcg_at_10": "search quality (top 10)",
    "map_at_10": "search precision (top 10)",
    "recall_at_10": "search recall (top 10)",
    "spearman_rho": "Spearman rank correlation",
    "pearson_r": "Pearson correlation",
    "kendall_tau": "Kendall rank correlation",
    "mean_cos": "How alike the tokens of a text are",
    "concentration": "How tightly tokens crowd around their mean",
    "lambda_mean": "How strongly attention pulls tokens together",
    "z_spread_ratio": "Spread added by attention, relative to the layer's input",
    "r": "Spread of the incoming tokens, relative to their mean",
    "C": "Change in crowding by the feed-forward part",
}

#: The y-axis of each layer curve, in words.
LAYER_AXES: dict[str, str] = {
    "mean_cos": "average cosine between tokens",
    "concentration": "spread around the mean (lower = more crowded)",
    "lambda_mean": "attention pull",
    "z_spread_ratio": "attention output spread / input spread",
    "r": "input spread / size of the mean",
    "C": "crowding after / before the feed-forward part",
}


def label(key: str) -> str:
    """A short name of ``key`` in words, for axes, titles and headers (``key`` itself, with spaces for
    underscores, when there is none)."""
    return LABELS.get(key) or key.replace("_", " ")


def explain(key: str) -> str:
    """The explanation of ``key`` (empty when there is none)."""
    return GLOSSARY.get(key, "")
