"""The embedded synthetic task: multi-digit addition with exact-answer rewards.

Prompts look like ``"47+385="`` and the answer is the decimal sum (``"432"``). Problems are a pure
function of ``(seed, index)``, so any process can regenerate any prompt: the data position of a
run is a single integer, and a held-out split is a disjoint index range.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

ALPHABET = "0123456789+="
"""Every character the task uses; the embedded tokenizer has one token per character."""

HELD_OUT_OFFSET = 10**9
"""Held-out problems are indices from here on; training draws indices below it."""


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str


def problem(seed: int, index: int, digits: int = 2) -> Problem:
    """The index-th problem of a seed: a + b with a, b uniform on [0, 10**digits)."""
    rng = random.Random(f"advest-add/{seed}/{index}")
    a, b = rng.randrange(10**digits), rng.randrange(10**digits)
    return Problem(f"{a}+{b}=", str(a + b))


def held_out(seed: int, n: int, digits: int = 2) -> list[Problem]:
    """n problems disjoint from every training index of the same seed."""
    return [problem(seed, HELD_OUT_OFFSET + i, digits) for i in range(n)]
