"""``advest check --database DIR``: the failing inputs the search found, kept as JSON and
replayed before the next search of the same property (a user's CI finds again what it found
before, whatever the seed). hypothesis's own example database is off under a fixed seed, which
the search needs for the same report everywhere; so the shrunk inputs themselves are kept, one
file per property (``sha256`` of its key), in a plain format any advest version can read."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

KINDS: dict[str, type] = {}
"""The input classes a database may hold (``register``): nothing else is ever rebuilt."""


def register(cls: type) -> type:
    """Allow instances of the dataclass ``cls`` in a database (a class decorator)."""
    KINDS[cls.__qualname__] = cls
    return cls


def _encode(x: Any) -> Any:
    if isinstance(x, Tensor):
        return {
            "tensor": [_encode(v) for v in x.reshape(-1).tolist()],
            "dtype": str(x.dtype).removeprefix("torch."),
            "shape": list(x.shape),
        }
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = {f.name: _encode(getattr(x, f.name)) for f in dataclasses.fields(x)}
        return {"case": type(x).__qualname__, "fields": fields}
    if isinstance(x, tuple):
        return {"tuple": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": repr(x)}
    return x


def _decode(x: Any) -> Any:
    if isinstance(x, list):
        return [_decode(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "tensor" in x:
        values = [_decode(v) for v in x["tensor"]]
        return torch.tensor(values, dtype=getattr(torch, x["dtype"])).reshape(x["shape"])
    if "case" in x:
        return KINDS[x["case"]](**{k: _decode(v) for k, v in x["fields"].items()})
    if "tuple" in x:
        return tuple(_decode(v) for v in x["tuple"])
    return float(x["float"])


def _file(directory: str, key: bytes) -> Path:
    return Path(directory) / f"{hashlib.sha256(key).hexdigest()[:32]}.json"


def load(directory: str, key: bytes) -> list[Any]:
    """The inputs kept for ``key`` (none if the file is missing; one that cannot be read, or
    holds an input of an unknown kind, is skipped: a cache never stops a check)."""
    path = _file(directory, key)
    try:
        stored = json.loads(path.read_text())
        return [_decode(x) for x in stored["inputs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def save(directory: str, key: bytes, case: Any) -> None:
    """Keep ``case`` for ``key`` (after what is there, once)."""
    path = _file(directory, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        stored = json.loads(path.read_text())["inputs"]
    except (OSError, ValueError, KeyError, TypeError):
        stored = []
    encoded = _encode(case)
    if encoded not in stored:
        stored.append(encoded)
    path.write_text(json.dumps({"key": key.decode(errors="replace"), "inputs": stored}))
