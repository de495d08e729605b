"""Exact reference estimators: literal transcriptions of the papers' definitions.

Arithmetic is exact (:class:`fractions.Fraction`); the functions enumerate subsets and are slow
on purpose. ``fast/`` is checked against them.
"""
