"""Files on disk: atomic writes, the run store, run bundles, CSV exports and the shared cache folder.

Nothing here computes an analysis; every layer above reads and writes through these modules.
"""
