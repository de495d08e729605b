"""Prompts by rollout step: the data position of a run is one integer.

Each process draws its own B prompts for step s; all G samples of a prompt are generated on that
process, so groups never straddle ranks (group integrity under data parallelism by
construction). Step s on rank r of W uses items (s·W + r)·B … (s·W + r + 1)·B − 1 of the stream.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset, Sampler

from . import tasks
from .rows import ROLES, DataError, Item, Message, Prompt, Row
from .task import problem

__all__ = ["ROLES", "DataError", "Item", "Message", "Prompt", "Row"]  # the rows' types, re-exported


def read_rows(path: str | Path, flag: str = "--data", show: int = 5) -> list[Row]:
    """Every row of a JSONL file of ``{"prompt": text or messages, "answer": text}``, checked in
    full before anything is trained: each problem (bytes that are not UTF-8, a line that is not
    JSON, a missing or mistyped field) is reported with its line number, the first ``show`` of
    them in one ``DataError``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{flag} {path}: no such file (a JSONL of prompt/answer rows)")
    rows: list[Row] = []
    problems: list[str] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.append(
                f"line {number}: not UTF-8 (byte 0x{raw[error.start]:02x} at column "
                f"{error.start + 1})"
            )
            continue
        if not line.strip():
            continue
        try:
            rows.append(_row(line))
        except ValueError as error:
            problems.append(f"line {number}: {error}")
    if problems:
        more = f" (and {len(problems) - show} more)" if len(problems) > show else ""
        raise DataError(f"{flag} {path}: " + "; ".join(problems[:show]) + more)
    if not rows:
        raise DataError(f"{flag} {path}: no rows (the file is empty)")
    return rows


def _row(line: str) -> Row:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a row must be a JSON object, got {type(obj).__name__}")
    missing = [key for key in ("prompt", "answer") if key not in obj]
    if missing:
        raise ValueError(f"missing {' and '.join(repr(m) for m in missing)}")
    answer = obj["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise ValueError(f"'answer' must be text or a number, got {type(answer).__name__}")
    return Row(_prompt(obj["prompt"]), str(answer))


def _prompt(value: object) -> Prompt:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("'prompt' is empty")
        return value
    if not isinstance(value, list) or not value:
        raise ValueError("'prompt' must be text or a non-empty list of messages")
    messages = []
    for j, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise ValueError(f"message {j} needs a text 'content'")
        if m.get("role") not in ROLES:
            raise ValueError(f"message {j}: 'role' must be one of {', '.join(ROLES)}")
        messages.append({"role": m["role"], "content": m["content"]})
    return tuple(messages)


def split(rows: list[Row], fraction: float, seed: int) -> tuple[list[Row], list[Row]]:
    """``(train, held_out)``: ``round(len(rows) · fraction)`` rows drawn by ``seed`` are held
    out, the rest train; both keep file order. The same rows and seed give the same split."""
    order = list(range(len(rows)))
    random.Random(f"advest-split/{seed}").shuffle(order)
    held = set(order[: round(len(rows) * fraction)])
    return (
        [r for i, r in enumerate(rows) if i not in held],
        [r for i, r in enumerate(rows) if i in held],
    )


class PromptSource:
    """The embedded task (``path=None``), a JSONL file or a reasoning-gym task (``path`` =
    ``reasoning_gym:TASK``), read as an endless stream: the rows are reshuffled each pass with a
    seed of (seed, pass). ``held_out`` of a file's rows (split by ``split``) are kept in
    ``held`` and never drawn; a task's ``held`` are ``task_held`` rows drawn with a disjoint
    seed (``tasks.held_out_rows``); ``task_seed`` draws a task's rows (default: ``seed``, which
    also orders the stream)."""

    def __init__(
        self,
        path: str | None,
        seed: int,
        digits: int = 2,
        pool: int = 0,
        held_out: float = 0.0,
        *,
        task_options: dict[str, Any] | None = None,
        task_size: int = 1000,
        task_held: int = 0,
        task_seed: int | None = None,
    ) -> None:
        self.seed, self.digits, self.pool = seed, digits, pool
        self.rows: list[Row] | None = None
        self.held: list[Row] = []
        if tasks.is_task(path):
            assert path is not None
            options = task_options or {}
            drawn = seed if task_seed is None else task_seed
            self.rows = tasks.rows(path, options, task_size, drawn)
            if task_held:
                self.held = tasks.held_out_rows(path, options, task_held, drawn, self.rows)
        elif path is not None:
            self.rows, self.held = split(read_rows(path), held_out, seed)

    def item(self, index: int) -> Item:
        if self.rows is None:
            index = index % self.pool if self.pool else index
            p = problem(self.seed, index, self.digits)
            return Item(index, p.prompt, p.answer)
        n = len(self.rows)
        order = list(range(n))
        random.Random(f"advest-data/{self.seed}/{index // n}").shuffle(order)
        row = order[index % n]
        return Item(row, self.rows[row].prompt, self.rows[row].answer)

    def batch(self, step: int, rank: int, world: int, size: int) -> list[Item]:
        start = (step * world + rank) * size
        return [self.item(start + i) for i in range(size)]


class Steps(Dataset[int]):
    """Item s is the rollout step number s; the module turns it into prompts."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, step: int) -> int:
        return step


class FromStep(Sampler[int]):
    """Yields the steps not yet done, reading the position when iteration starts (after a
    checkpoint was restored)."""

    def __init__(self, steps: int, position: Callable[[], int]) -> None:
        self.steps, self.position = steps, position

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.position(), self.steps))

    def __len__(self) -> int:
        # the whole run: Lightning's restored batch counter already holds the steps done, and
        # ends the epoch when the counter reaches this length
        return self.steps
