"""reasoning-gym tasks as data: ``--data reasoning_gym:TASK`` with ``--data_options`` (the task's
own settings, as JSON), ``--data_size`` and the run's ``--seed``.

Each row's prompt is the task's question (a user message when the tokenizer has a chat
template). Its answer is the task's entry as a tagged JSON record (``rewards.TASK_RECORD``), so
that ``--reward reasoning_gym`` can score a completion with the task's own ``score_answer``,
which may read the entry's metadata, in the reward worker processes; the other verifiers see
the entry's plain answer (``rewards.plain_answer``).

The held-out set is drawn with a seed no training set uses (``HELD_OUT_SEED``), and any held-out
question that also occurs in the training set is dropped, so the two never share a prompt.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import json
from typing import Any

from .rewards import TASK_RECORD
from .rows import DataError, Row

PREFIX = "reasoning_gym:"
"""``--data`` values that name a reasoning-gym task."""

HELD_OUT_SEED = 1_000_003
"""Offset of the held-out set's seed from the run's: a training seed is a small number, so the
held-out stream is one no training run draws."""

INSTALL = "pip install 'advest[real]' (reasoning-gym)"


def is_task(data: str | None) -> bool:
    return data is not None and data.startswith(PREFIX)


def task_name(data: str) -> str:
    return data[len(PREFIX) :]


def _registry() -> dict[str, Any]:
    if importlib.util.find_spec("reasoning_gym") is None:
        raise DataError(f"--data reasoning_gym:...: reasoning-gym is not installed; {INSTALL}")
    from reasoning_gym.factory import DATASETS

    return dict(DATASETS)


def check(data: str, options: dict[str, Any], size: int) -> None:
    """The task exists, its options are settings it has, and it builds: raises ``DataError``
    naming the flag, the close task names or the task's settings. Builds one row only."""
    name = task_name(data)
    registry = _registry()
    if name not in registry:
        close = difflib.get_close_matches(name, registry, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else f"{len(registry)} tasks exist"
        raise DataError(f"--data {data}: reasoning-gym has no task {name!r}; {hint}")
    if size < 1:
        raise DataError(f"--data_size must be at least 1; got {size}")
    _, config_cls = registry[name]
    settings = [f.name for f in dataclasses.fields(config_cls) if f.name not in ("seed", "size")]
    unknown = sorted(set(options) - set(settings))
    if unknown:
        raise DataError(
            f"--data_options: {name} has no setting {', '.join(map(repr, unknown))}; its "
            f"settings are {', '.join(settings)}"
        )
    try:
        _entries(name, options, 1, 0)
    except Exception as error:  # the task's own config checks (assert, TypeError, ValueError)
        raise DataError(
            f"--data_options {json.dumps(options)}: {name} refuses them "
            f"({type(error).__name__}: {error})"
        ) from None


def _entries(name: str, options: dict[str, Any], size: int, seed: int) -> list[dict[str, Any]]:
    from reasoning_gym import create_dataset

    dataset = create_dataset(name, size=size, seed=seed, **options)
    return [dict(dataset[i]) for i in range(size)]


def rows(data: str, options: dict[str, Any], size: int, seed: int) -> list[Row]:
    """``size`` rows of the task drawn with ``seed``: prompt = question, answer = the tagged
    entry (see the module doc)."""
    name = task_name(data)
    return [_row(name, e) for e in _entries(name, options, size, seed)]


def held_out_rows(
    data: str, options: dict[str, Any], size: int, seed: int, train: list[Row]
) -> list[Row]:
    """``size`` held-out rows from the seed ``seed + HELD_OUT_SEED``, none of whose questions
    is one of ``train``'s (more are drawn to replace those dropped). Raises ``DataError`` when
    the task's options allow too few questions beyond the training rows."""
    seen = {r.prompt for r in train}
    name = task_name(data)
    fresh: dict[str, Row] = {}
    for e in _entries(name, options, 4 * size + 16, seed + HELD_OUT_SEED):
        if e["question"] not in seen and len(fresh) < size:
            fresh.setdefault(e["question"], _row(name, e))
    if len(fresh) < size:
        raise DataError(
            f"--data {data}: only {len(fresh)} of {size} held-out questions are not among the "
            f"{len(train)} training rows (the options {json.dumps(options)} allow few distinct "
            "questions); lower --data_size or --eval_prompts, or widen --data_options"
        )
    return list(fresh.values())


def _row(name: str, entry: dict[str, Any]) -> Row:
    record = json.dumps({"task": name, "entry": entry}, default=_jsonable)
    return Row(str(entry["question"]), TASK_RECORD + record)


def _jsonable(value: Any) -> Any:
    # metadata holds tuples, sets and numpy scalars in some tasks
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if hasattr(value, "item"):
        return value.item()
    return repr(value)
