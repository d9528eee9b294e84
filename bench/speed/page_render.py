"""Time every dashboard page on a stored run: first load and cached reloads (Streamlit AppTest, no browser).

.venv/bin/python bench/speed/page_render.py --runs-dir runs --run demo-bbc-news
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dashboard.page_list import STORED_RUN_PAGES as PAGES  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--run", default="demo-bbc-openings")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["FLARE_RUNS_DIR"] = str(args.runs_dir)
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[2] / "app.py")
    at = AppTest.from_file(app, default_timeout=300)
    at.query_params["run"] = args.run
    at.run()
    print(f"{'page':<24} {'first (s)':>10} {'reload median (s)':>18} {'ratio':>7}")
    for page in PAGES:
        started = time.perf_counter()
        at.switch_page(page)
        at.run()
        first = time.perf_counter() - started
        assert not at.exception, [e.value for e in at.exception]
        reloads = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            at.run()
            reloads.append(time.perf_counter() - started)
        median = statistics.median(reloads)
        print(f"{page:<24} {first:>10.3f} {median:>18.3f} {first / median:>7.1f}")


if __name__ == "__main__":
    main()
