"""Plaudit's judge library: backends, prompt templates and verdict parsing.

Importing ``judges`` is light (no torch); the transformers backend lives in
:mod:`judges.backends.local` and imports torch when imported.
"""

__all__: list[str] = []
