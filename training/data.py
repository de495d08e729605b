"""Prompts by rollout step: the data position of a run is one integer.

Each process draws its own B prompts for step s; all G samples of a prompt are generated on that
process, so groups never straddle ranks (group integrity under data parallelism by
construction). Step s on rank r of W uses items (s·W + r)·B … (s·W + r + 1)·B − 1 of the stream.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from torch.utils.data import Dataset, Sampler

from advest.training.task import Problem, problem


@dataclass(frozen=True)
class Item:
    prompt_id: int  # stable id of the prompt in its source (for estimators with history)
    prompt: str
    answer: str


class PromptSource:
    """The embedded task (``path=None``) or a JSONL file, read as an endless stream: a file is
    reshuffled each pass with a seed of (seed, pass)."""

    def __init__(self, path: str | None, seed: int, digits: int = 2, pool: int = 0) -> None:
        self.seed, self.digits, self.pool = seed, digits, pool
        self.rows: list[Problem] | None = None
        if path is not None:
            lines = Path(path).read_text().splitlines()
            self.rows = [_row(line, path, i) for i, line in enumerate(lines) if line.strip()]
            if not self.rows:
                raise ValueError(f"--data {path}: no rows")

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


def _row(line: str, path: str, number: int) -> Problem:
    try:
        obj = json.loads(line)
        return Problem(str(obj["prompt"]), str(obj["answer"]))
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ValueError(
            f"--data {path}: line {number + 1} is not a prompt/answer object"
        ) from None


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
