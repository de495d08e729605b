"""Verifiers: ``reward(completion, answer) -> float``, and the guard that keeps a run alive.

``exact``: 1 when the stripped completion equals the answer (the embedded task).
``digits``: partial credit per matching character (dense; for tiny or untrained models).
``math``: 1 when ``math-verify`` finds the completion's final answer equal to the gold one.

``Guarded`` calls a verifier with a per-call timeout; an exception or a timeout gives reward 0,
is counted by kind, and is logged once per kind, never killing the run.
"""

from __future__ import annotations

import logging
import signal
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from types import FrameType

Reward = Callable[[str, str], float]


def exact(completion: str, answer: str) -> float:
    return float(completion.strip() == answer.strip())


def digits(completion: str, answer: str) -> float:
    """Partial credit: the fraction of the answer's characters matched position by position,
    scaled by 1/2 unless the whole answer is exact (a dense reward for the embedded task)."""
    got, want = completion.strip(), answer.strip()
    if got == want:
        return 1.0
    hits = sum(a == b for a, b in zip(got, want, strict=False))
    return 0.5 * hits / max(len(want), len(got), 1)


def math(completion: str, answer: str) -> float:
    """math-verify (HF), gold first: ``verify(parse(gold), parse(prediction))``. Its own timeouts
    are disabled here because ``Guarded`` enforces one for every verifier."""
    from math_verify import parse, verify

    # it warns on every call that its timeouts are off; ours is on (Guarded)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    gold = parse(answer if "$" in answer else f"${answer}$", parsing_timeout=None)
    pred = parse(completion, parsing_timeout=None)
    return float(verify(gold, pred, timeout_seconds=None))


VERIFIERS: dict[str, Reward] = {"exact": exact, "digits": digits, "math": math}


def get(name: str) -> Reward:
    try:
        return VERIFIERS[name]
    except KeyError:
        raise KeyError(f"unknown reward {name!r}; valid: {', '.join(sorted(VERIFIERS))}") from None


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


class Guarded:
    """A verifier that cannot kill the run. ``failures`` counts failed calls by kind
    (``"timeout"`` or the exception's type name)."""

    def __init__(self, fn: Reward, timeout_s: float = 5.0) -> None:
        self.fn = fn
        self.timeout_s = timeout_s
        self.failures: Counter[str] = Counter()

    def __call__(self, completion: str, answer: str) -> float:
        try:
            value = float(self._timed(completion, answer))
        except _Timeout:
            return self._fail("timeout", f"reward call exceeded {self.timeout_s} s")
        except Exception as error:  # any verifier bug costs one sample, not the run
            return self._fail(type(error).__name__, str(error))
        if value != value or value in (float("inf"), float("-inf")):
            return self._fail("non-finite", f"reward returned {value}")
        return value

    def _timed(self, completion: str, answer: str) -> float:
        # SIGALRM interrupts pure-Python loops and sympy; it exists only in the main thread
        if threading.current_thread() is not threading.main_thread() or self.timeout_s <= 0:
            return self.fn(completion, answer)
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            return self.fn(completion, answer)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _fail(self, kind: str, message: str) -> float:
        if kind not in self.failures:
            warnings.warn(f"reward failed ({kind}): {message}; scoring 0", stacklevel=3)
        self.failures[kind] += 1
        return 0.0
