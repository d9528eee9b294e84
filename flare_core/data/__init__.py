"""Corpora: reading a table a person uploaded, choosing its columns, validating it, and the demo corpus."""
