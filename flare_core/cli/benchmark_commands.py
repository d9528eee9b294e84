"""``flare benchmark --stage answer``: the answer benchmark from the command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def answer_benchmark(
    store: Any, corpora: Sequence[str], models: Sequence[str], *, rejudge: bool, table_only: bool
) -> dict[str, Any]:
    """Every corpus (all without ``corpora``) embedded with ``models`` (the pool and its controls without
    them; kept vectors reused) and judged, kept in ``<runs>/benchmark/answer_benchmark.json``; with
    ``table_only`` that file read back."""
    from flare_core.benchmark import answer_suite
    from flare_core.benchmark.suite import benchmark_dir, default_models
    from flare_core.data.benchmark_corpora import BENCHMARK_CORPORA
    from flare_core.encoders import is_available, list_models
    from flare_core.store import atomic

    path = benchmark_dir(store) / "answer_benchmark.json"
    if table_only:
        if not path.is_file():
            raise FileNotFoundError(
                f"no answer benchmark in {path}; run `flare benchmark --stage answer` first"
            )
        return json.loads(path.read_text(encoding="utf-8"))
    controls = [s.id for s in list_models() if s.role == "control" and is_available(s.id)]
    result = answer_suite.run_answer_benchmark(
        benchmark_dir(store) / "embeddings",
        list(corpora) or list(BENCHMARK_CORPORA),
        list(models) or default_models() + controls,
        rejudge=rejudge,
        log=lambda message: print(message, file=sys.stderr),
    )
    atomic.write_json(path, result)
    return result


def kept_map_benchmark(store: Any, args: Any, log: Any) -> dict[str, Any]:
    """``flare benchmark --stage map --kept``: the map of the kept corpora (``--corpora``; default every
    one the answer stage judged) estimated at ``--flow-preset`` and judged, kept in
    ``<runs>/benchmark/map_kept.json``; with ``--table-only`` that file read back, with ``--rejudge`` the
    finished estimates judged again (nothing estimated)."""
    from flare_core.benchmark.map_suite import run_kept_map
    from flare_core.benchmark.suite import benchmark_dir

    if args.stage != "map":
        raise ValueError("--kept is an option of --stage map")
    folder = benchmark_dir(store)
    if args.table_only:
        path = folder / "map_kept.json"
        if not path.is_file():
            raise FileNotFoundError(f"no kept map in {path}; run `flare benchmark --stage map --kept` first")
        return json.loads(path.read_text(encoding="utf-8"))
    corpora = [m.strip() for m in (args.corpora or "").split(",") if m.strip()]
    return run_kept_map(
        folder / "embeddings",
        folder / "map",
        corpora or None,
        preset=args.flow_preset,
        estimate=not args.rejudge,
        add=args.add,
        log=log,
    )


def kept_map_command(store: Any, args: Any, log: Any) -> int:
    """:func:`kept_map_benchmark`, its tables written into ``--docs`` and printed (``--json``: the record)."""
    from flare_core.benchmark.map_suite import markdown_tables, update_docs
    from flare_core.store.atomic import to_json

    result = kept_map_benchmark(store, args, log)
    if args.docs is not None:
        update_docs(args.docs, result)
    print(to_json(result) if args.json else markdown_tables(result))
    return 0
