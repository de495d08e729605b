"""Verifiers: ``reward(completion, answer) -> float``, how a run names them, and the guards that
keep a run alive.

``exact``: 1 when the stripped completion equals the answer (the embedded task).
``digits``: partial credit per matching character (dense; for tiny or untrained models).
``math``: 1 when ``math-verify`` finds the completion's final answer equal to the gold one.
``reasoning_gym``: the task's own ``score_answer`` (rows of ``--data reasoning_gym:TASK``).
``module:function``: a user's verifier, imported from the working directory (``resolve``).

What a run calls is ``training.scoring.Scorer``: the weighted sum of its verifiers, each also
kept on its own, with every call bounded by a timeout. Calls run in worker processes
(``scoring.Pool``), so that one slow or hanging call costs its own timeout and no more: a worker
past its deadline is killed and replaced. With no workers, ``Guarded`` bounds each call in this
process with ``SIGALRM``. Either way an exception, a timeout or a non-finite value is counted by
kind and warned about once per kind, never killing the run; the call scores 0, or, in training
(unless ``--failed_reward`` says otherwise), NaN: a reward that never arrived, whose sample the
trainer leaves out of its group (``advest.fast.absent``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import logging
import os
import re
import signal
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import FrameType
from typing import Any

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
    are disabled here because the ``Scorer`` enforces one for every verifier."""
    from math_verify import parse, verify

    # it warns on every call that its timeouts are off; ours is on (Scorer)
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    gold = parse(answer if "$" in answer else f"${answer}$", parsing_timeout=None)
    pred = parse(completion, parsing_timeout=None)
    return float(verify(gold, pred, timeout_seconds=None))


TASK_RECORD = "reasoning_gym:"
"""An answer that starts with this is a reasoning-gym entry, ``{"task": name, "entry": {...}}``
as JSON after the tag (``training/tasks.py`` writes them)."""


def plain_answer(answer: str) -> str:
    """The gold answer as text: a reasoning-gym record's ``entry["answer"]``, else as given."""
    if answer.startswith(TASK_RECORD):
        return str(json.loads(answer[len(TASK_RECORD) :])["entry"]["answer"])
    return answer


def answer_candidates(completion: str) -> list[str]:
    """What a completion answers, the reasoning-gym way: the last ``<answer>...</answer>``
    (the tasks' own format) when there is one; otherwise, for models that answer in plain text,
    the last non-empty line, the text after its last ``=``, and its last word (a trailing
    period dropped). The reward is the best score over these few candidates."""
    tagged = re.findall(r"<answer>(.*?)</answer>", completion, re.DOTALL)
    if tagged:
        return [tagged[-1].strip()]
    lines = [line.strip() for line in completion.strip().splitlines() if line.strip()]
    if not lines:
        return [""]
    last = lines[-1].rstrip(".").strip()
    words = last.split()
    return list(dict.fromkeys([last, last.rsplit("=", 1)[-1].strip(), words[-1] if words else ""]))


@functools.cache
def _task_scorer(task: str) -> Callable[[str, dict[str, Any]], float]:
    from reasoning_gym import get_score_answer_fn

    fn: Callable[[str, dict[str, Any]], float] = get_score_answer_fn(task)
    return fn


def reasoning_gym(completion: str, answer: str) -> float:
    """The task's own ``score_answer(answer, entry)`` on the best of ``answer_candidates``; the
    entry comes with the row (``--data reasoning_gym:TASK``)."""
    if not answer.startswith(TASK_RECORD):
        raise ValueError(
            "the reasoning_gym reward scores rows of --data reasoning_gym:TASK; this row's "
            "answer is plain text"
        )
    record = json.loads(answer[len(TASK_RECORD) :])
    score = _task_scorer(record["task"])
    return max(float(score(c, record["entry"]) or 0.0) for c in answer_candidates(completion))


VERIFIERS: dict[str, Reward] = {
    "exact": exact,
    "digits": digits,
    "math": math,
    "reasoning_gym": reasoning_gym,
}

RAW_ANSWER = frozenset({"reasoning_gym"})
"""Verifiers that read a reasoning-gym record whole; every other one gets ``plain_answer``."""

USER_FORM = (
    "module:function, a function (completion: str, answer: str) -> float in a module "
    "importable from the working directory"
)


class RewardSpecError(ValueError):
    """A reward name that names no verifier; the message says why."""


def resolve(spec: str) -> Reward:
    """The verifier a run names: a built-in (``exact``, ``digits``, ``math``) or ``module:function``
    (a dotted attribute path after the colon), the module imported with the working directory on
    ``sys.path``. Raises ``RewardSpecError`` saying what is wrong."""
    if ":" not in spec:
        if spec in VERIFIERS:
            return VERIFIERS[spec]
        raise RewardSpecError(
            f"unknown reward {spec!r}; valid: {', '.join(sorted(VERIFIERS))}, or {USER_FORM}"
        )
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise RewardSpecError(f"{spec!r} is not module:function; write {USER_FORM}")
    cwd = os.getcwd()
    if cwd not in sys.path:  # a user's module beside the run, as `python -m` would find it
        sys.path.insert(0, cwd)
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            raise RewardSpecError(
                f"{spec!r}: no module {module_name!r} importable from {cwd} or sys.path"
            ) from None
        raise RewardSpecError(f"{spec!r}: importing {module_name!r} failed: {error}") from None
    except Exception as error:  # the user's module raised while importing
        raise RewardSpecError(
            f"{spec!r}: importing {module_name!r} raised {type(error).__name__}: {error}"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise RewardSpecError(f"{spec!r}: module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise RewardSpecError(f"{spec!r} is a {type(target).__name__}, not a function")
    try:
        inspect.signature(target).bind("completion", "answer")
    except TypeError:
        raise RewardSpecError(f"{spec!r} does not take (completion, answer)") from None
    except ValueError:  # no signature to inspect (some builtins): let the call decide
        pass
    fn: Reward = target
    return fn


# ----------------------------------------------------------------------------- failures
def record(failures: Counter[str], kind: str, message: str, score: float = 0.0) -> float:
    """Count a failed call by kind, warn the first time a kind occurs; the call scores
    ``score``: 0, or NaN for a reward that never arrived (the trainer leaves its sample out of
    its group: ``--failed_reward``)."""
    if kind not in failures:
        then = "its sample is left out of its group" if score != score else f"scoring {score:g}"
        warnings.warn(f"reward failed ({kind}): {message}; {then}", stacklevel=3)
    failures[kind] += 1
    return score


FLOAT32_MAX = 3.4028234663852886e38
"""Rewards become float32 tensors: a larger magnitude would turn into inf there."""


def _finite(value: float, failures: Counter[str], name: str, failed: float = 0.0) -> float:
    """A reward is a finite number within float32's range, else a failure that names it (and
    scores ``failed``)."""
    if value != value or value in (float("inf"), float("-inf")):
        return record(failures, "non-finite", f"{name} returned {value}", failed)
    if abs(value) > FLOAT32_MAX:
        return record(
            failures, "out of range", f"{name} returned {value}, beyond float32's ±3.4e38", failed
        )
    return value


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


class Guarded:
    """A verifier that cannot kill the run, called in this process. ``failures`` counts failed
    calls by kind (``"timeout"``, ``"non-finite"`` or the exception's type name); a failed call
    scores ``failed`` (NaN: the reward never arrived)."""

    def __init__(
        self,
        fn: Reward,
        timeout_s: float = 5.0,
        failures: Counter[str] | None = None,
        failed: float = 0.0,
    ) -> None:
        self.fn = fn
        self.timeout_s, self.failed = timeout_s, failed
        self.failures: Counter[str] = Counter() if failures is None else failures

    def __call__(self, completion: str, answer: str) -> float:
        failures, failed = self.failures, self.failed
        try:
            value = float(self._timed(completion, answer))
        except _Timeout:
            return record(failures, "timeout", f"reward call exceeded {self.timeout_s} s", failed)
        except (Exception, SystemExit) as error:  # any verifier bug costs one sample, not the run
            return record(failures, type(error).__name__, str(error), failed)
        return _finite(value, failures, "reward", failed)

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


# ----------------------------------------------------------------------------- worker pool
Call = tuple[int, str, str]
"""(index of the verifier in the run's list, completion, answer)."""

Result = tuple[str, Any]
"""``("ok", value)``, or a failure: ``(kind, message)``."""


def _serve(conn: Connection, specs: list[str]) -> None:
    """A worker: resolve the verifiers once, say so, then answer calls until told to stop."""
    try:
        fns = [resolve(s) for s in specs]
    except Exception as error:
        conn.send((type(error).__name__, str(error)))
        return
    conn.send(("ready", None))
    while True:
        try:
            call: Call | None = conn.recv()
        except (EOFError, OSError):  # the trainer is gone
            return
        if call is None:
            return
        index, completion, answer = call
        try:
            result: Result = ("ok", float(fns[index](completion, answer)))
        except (Exception, SystemExit) as error:  # reported by kind, like Guarded
            result = (type(error).__name__, str(error))
        conn.send(result)


def _worker_main(fd: int, paths: str, specs: list[str]) -> None:
    """A worker process's entry (``_BOOT``): the trainer's ``sys.path``, death with the trainer,
    then ``_serve`` on the socket ``fd``."""
    sys.path.extend(p for p in json.loads(paths) if p not in sys.path)
    # Ctrl-C reaches the whole process group: the trainer stops its workers itself, so they
    # must not die mid-call printing a traceback each
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # Linux: a killed trainer takes its workers along
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    _serve(Connection(fd), specs)
