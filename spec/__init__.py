"""Executable specification: Markdown documents with doctests, the estimator catalogue, the
weight tables, tolerances and golden vectors that ``reference/``, ``fast/`` and the tests share."""
