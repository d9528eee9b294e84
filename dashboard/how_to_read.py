"""How to read your answer: the Overview, part by part, on its annotated picture (the text of
docs/reading.md)."""

from __future__ import annotations

from dashboard.help import show_doc

show_doc("reading.md")
