"""Runs: parameters, creation, the stages that compute a run (embeddings, sufficiency, baselines, the
labels' comparison, validation studies, token stages), their outcomes, progress and time left, background
jobs and the summary, which writes the answer (:mod:`flare_core.answer`). Everything here reads and writes
through :mod:`flare_core.store`."""
