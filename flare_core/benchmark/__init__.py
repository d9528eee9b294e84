"""The validity benchmark: the product's own runs on labelled public corpora, judged by their labels.

:mod:`~flare_core.benchmark.suite` makes and judges the runs, :mod:`~flare_core.benchmark.pools` rejudges
smaller pools from the same runs, :mod:`~flare_core.benchmark.label_draws` draws few labels and
:mod:`~flare_core.benchmark.answer_tables` judges the answer's grounds on them, and
:mod:`~flare_core.benchmark.report` writes the tables of the docs' benchmark page and the Validation page's
table. ``benchmark_results.json`` is the benchmark that ships with this version (read by
:mod:`flare_core.answer.shipped`). The layer above the pipeline (:mod:`flare_core.run`).
"""
