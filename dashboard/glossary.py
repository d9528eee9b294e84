"""Glossary: every term the pages use, in one or two plain sentences (the text of docs/glossary.md)."""

from __future__ import annotations

from dashboard.help import show_doc

show_doc("glossary.md")
