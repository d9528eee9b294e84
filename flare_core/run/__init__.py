"""Runs: parameters, creation, the stages that compute a run, background jobs, the summary and verdict,
and the validation studies. Everything here reads and writes through :mod:`flare_core.store`."""
