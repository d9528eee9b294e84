"""The answer of a run: which model to use, from the labels when there are some, from a few labels the
person gives when there are none, and provisionally from the label-free analysis, each with how far to
trust it. The layer below the pipeline (:mod:`flare_core.run`), which calls
:func:`~flare_core.answer.write.write_verdict` after its stages; the dashboard and the CLI call it after
each batch of labels."""
