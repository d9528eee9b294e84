"""The docs site's pictures come from the top-level ``assets/`` folder, the one copy the README and the
dashboard show too: each file there joins the site as ``assets/<name>``, so a page in ``docs/`` links it as
``assets/<name>`` and ``mkdocs build --strict`` checks the link like any other."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ASSETS = Path(__file__).resolve().parent / "assets"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every file of :data:`ASSETS` to the site, under ``assets/`` (a file of the same name under
    ``docs/assets/`` would be a second copy: the build stops on it)."""
    for path in sorted(p for p in ASSETS.rglob("*") if p.is_file()):
        uri = "assets/" + path.relative_to(ASSETS).as_posix()
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} duplicates {path}: keep the one copy in assets/")
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
