"""Choosing a model with labels: the supervised oracle, probes and scores from a few labelled texts, the
few-label posterior and what a probe on k labels can show, which texts to ask for next, when the labels
settle the choice, search judged by trec_eval's code, the label-free rules and how the benchmark judges
them, quality against cost, and the validity benchmark's arithmetic.

Pure functions of arrays and tables; none reads or writes the run store. They build on the seeds'
analyses (:mod:`flare_core.analyses`: correlations, the bootstrap, geometry), never the other way round.
"""
