"""The reward scoring a run calls: ``Scorer``, the weighted sum of a run's verifiers (each also
kept on its own), every call bounded by a timeout. Calls run in worker processes (``Pool``) that
run ``rewards.py`` by path, so that one slow or hanging call costs its own timeout and no more:
a worker past its deadline is killed and replaced. With no workers, ``rewards.Guarded`` bounds
each call in this process with ``SIGALRM``. Either way an exception or a timeout is counted by
kind and warned about once per kind, never killing the run, and scores the ``Scorer``'s
``failed`` value: 0, or NaN for a reward that never arrived (the trainer's default).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import time
import weakref
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from . import rewards
from .rewards import RAW_ANSWER, Call, Guarded, Result, _finite, plain_answer, record, resolve

_BOOT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("advest_reward_worker", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
module._worker_main(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
"""
"""A worker runs ``rewards.py`` by path, not ``advest.training.rewards`` by name: importing the
``advest`` package imports torch (seconds), which a verifier does not need, and which would make
replacing a hung worker slow. That module imports only the standard
library."""


@dataclass(eq=False)  # identity: a key of the busy map
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    started: float
    ready: bool = False


STARTUP_S = 300.0
"""Seconds a worker may take to import the verifiers' modules before the pool gives up."""


class Pool:
    """``workers`` processes that each resolve ``specs`` once and run one call at a time. A call
    gets ``timeout_s`` from when a worker takes it; past that its worker is killed and replaced,
    so a hanging verifier holds one worker for one timeout and the other calls go on. A worker
    takes calls only once it has imported the verifiers (its start-up is no call's time).

    Workers are fresh interpreters (``subprocess``), not forks: they never inherit the trainer's
    threads or CUDA state, and unlike ``multiprocessing``'s spawn and forkserver they do not
    re-run the user's main script (a script that calls ``train`` with no ``__main__`` guard).
    They start in the working directory, with the trainer's ``sys.path``."""

    def __init__(self, specs: Sequence[str], workers: int, timeout_s: float) -> None:
        self.specs, self.timeout_s = list(specs), timeout_s
        self.cwd = os.getcwd()
        self.workers = [self._start() for _ in range(workers)]
        self.replaced = 0

    def _start(self) -> _Worker:
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        worker = rewards.__file__  # the verifiers and the worker loop, stdlib only
        argv = [sys.executable, "-c", _BOOT, worker, str(fd), json.dumps(sys.path), *self.specs]
        process = subprocess.Popen(argv, cwd=self.cwd, pass_fds=[fd], stdin=subprocess.DEVNULL)
        theirs.close()
        return _Worker(process, Connection(ours.detach()), time.monotonic())

    def _replace(self, worker: _Worker) -> None:
        worker.process.kill()
        worker.process.wait()
        worker.conn.close()
        self.workers[self.workers.index(worker)] = self._start()
        self.replaced += 1

    def _started(self, worker: _Worker) -> None:
        """Read a starting worker's first message: ready, or why it could not start."""
        try:
            kind, message = worker.conn.recv()
        except (EOFError, OSError):
            kind, message = "crash", f"exited with {worker.process.wait()}"
        if kind != "ready":
            raise RuntimeError(f"a reward worker could not start: {kind}: {message}")
        worker.ready = True

    def run(self, calls: Sequence[Call]) -> list[Result]:
        """Every call's result, in order."""
        results: list[Result] = [("missing", "")] * len(calls)
        todo = deque(range(len(calls)))
        busy: dict[_Worker, tuple[int, float]] = {}  # worker → (call, deadline)
        while todo or busy:
            for worker in self.workers:
                if not todo:
                    break
                if worker.ready and worker not in busy:
                    index = todo.popleft()
                    try:
                        worker.conn.send(calls[index])
                    except OSError:  # it died between calls: a fresh one will take the call
                        todo.appendleft(index)
                        self._replace(worker)
                        continue
                    busy[worker] = (index, time.monotonic() + self.timeout_s)
            now = time.monotonic()
            waiting = [w for w in self.workers if w in busy or not w.ready]
            deadlines = [d for _, d in busy.values()] + [
                w.started + STARTUP_S for w in waiting if not w.ready
            ]
            for conn in wait([w.conn for w in waiting], max(min(deadlines) - now, 0)):
                worker = next(w for w in self.workers if w.conn is conn)
                if not worker.ready:
                    self._started(worker)
                    continue
                index, _ = busy.pop(worker)
                try:
                    results[index] = worker.conn.recv()
                except (EOFError, OSError):  # the verifier took its process down
                    code = worker.process.wait()
                    results[index] = ("crash", f"the worker exited with {code}")
                    self._replace(worker)
            now = time.monotonic()
            for worker in list(self.workers):
                if worker in busy and busy[worker][1] <= now:
                    index, _ = busy.pop(worker)
                    results[index] = ("timeout", f"reward call exceeded {self.timeout_s} s")
                    self._replace(worker)
                elif not worker.ready and worker.started + STARTUP_S <= now:
                    raise RuntimeError(f"a reward worker did not start within {STARTUP_S} s")
        return results

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(OSError):  # already gone
                worker.conn.send(None)
        for worker in self.workers:
            try:
                worker.process.wait(timeout=1)
            except subprocess.TimeoutExpired:  # inside a call that does not end
                worker.process.kill()
                worker.process.wait()
            worker.conn.close()
        self.workers = []


class Scorer:
    """The reward of a run: ``specs`` (names ``resolve`` accepts) with ``weights`` (default 1
    each); the total is the weighted sum. ``workers`` > 0 runs the calls in a ``Pool`` (started
    on first use), 0 in this process through ``Guarded``. ``failures`` counts failed calls by
    kind over every verifier. ``threshold``: the total becomes pass/fail, 1 where it is at
    least the threshold and 0 below (the per-verifier scores are kept as they are). ``failed``:
    the score of a failed call, and the total of a completion with one (None: NaN, a reward
    that never arrived)."""

    def __init__(
        self,
        specs: Sequence[str],
        weights: Sequence[float] | None = None,
        *,
        timeout_s: float = 5.0,
        workers: int = 0,
        threshold: float | None = None,
        failed: float | None = 0.0,
    ) -> None:
        self.specs, self.threshold = list(specs), threshold
        self.failed = float("nan") if failed is None else float(failed)
        self.weights = [1.0] * len(self.specs) if weights is None else [float(w) for w in weights]
        if len(self.weights) != len(self.specs):
            raise ValueError(f"{len(self.specs)} rewards but {len(self.weights)} weights")
        self.timeout_s, self.workers = timeout_s, workers
        self.failures: Counter[str] = Counter()
        self.guards = [
            Guarded(resolve(s), timeout_s, self.failures, self.failed) for s in self.specs
        ]
        self._pool: Pool | None = None

    def __call__(self, completions: Sequence[str], answers: Sequence[str]) -> list[list[float]]:
        """``[S][R]`` scores of S completions (with their answers) by each of the R verifiers."""
        plain = [plain_answer(a) for a in answers]
        calls = [
            (r, c, a if self.specs[r] in RAW_ANSWER else p)
            for c, a, p in zip(completions, answers, plain, strict=True)
            for r in range(len(self.specs))
        ]
        if self.workers > 0:
            values = self._in_pool(calls)
        else:
            values = [self.guards[r](c, a) for r, c, a in calls]
        R = len(self.specs)
        return [values[i * R : (i + 1) * R] for i in range(len(completions))]

    def total(self, parts: Sequence[float]) -> float:
        """The weighted sum of one completion's scores (a sum beyond float32's range is a
        failure, as a score would be). A completion with a reward that never arrived (NaN) has
        none either, and is counted once, as that call."""
        if any(v != v for v in parts):
            return math.nan
        total = sum(w * v for w, v in zip(self.weights, parts, strict=True))
        value = _finite(total, self.failures, "the weighted total of the rewards", self.failed)
        return value if self.threshold is None else float(value >= self.threshold)

    def start(self) -> None:
        """Start the worker processes now (they import the verifiers while the caller goes on);
        otherwise the first call starts them."""
        if self.workers > 0 and self._pool is None:
            self._pool = Pool(self.specs, self.workers, self.timeout_s)
            weakref.finalize(self, self._pool.close)

    def _in_pool(self, calls: list[Call]) -> list[float]:
        self.start()
        assert self._pool is not None
        values = []
        for (r, _, _), (kind, value) in zip(calls, self._pool.run(calls), strict=True):
            if kind == "ok":
                values.append(_finite(value, self.failures, self.specs[r], self.failed))
            else:
                message = f"{self.specs[r]}: {value}"
                values.append(record(self.failures, kind, message, self.failed))
        return values

    def close(self) -> None:
        """Stop the worker processes (a later call starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __getstate__(self) -> dict[str, Any]:
        # processes do not travel: a copy (a spawned DDP rank) starts its own pool
        return {**self.__dict__, "_pool": None}
