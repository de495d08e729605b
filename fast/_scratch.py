"""Per-thread CPU scratch buffers for the chunked sorted path of ``fast.maxk``.

Why: a CPU tensor of a few hundred KiB or more is a fresh ``malloc``, and whether glibc serves it
from memory the process already holds or maps new pages (each page-faulted in on its first write,
about 1 ms per MiB on a loaded 2-core VM) depends on thresholds that the process's own history of
frees has moved (``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``). At [4096, 64] the whole-batch
implementation this replaces took 1.7–2.0× a ``torch.sort`` of its input with glibc's defaults and
0.9–1.0× with freed memory retained (``python -m advest.experiments.cost.bench_sort``). The sorted
path instead writes every chunk-sized intermediate into buffers kept here, one set per calling
thread (two threads never share one), reused chunk after chunk and call after call: nothing but the
output is allocated at the batch's size. Held memory is bounded by one chunk
(``fast._maxk_core.chunk_rows``; about 50 bytes per reward of the chunk, 12.5 MiB per calling thread
at the default 2^18); ``release`` drops it. Requests above ``MAX_ELEMENTS``, other devices (their
caching allocators keep buffers already) and calls traced by ``torch.compile`` (whose graphs must
not write to state outside them) get a fresh tensor.
"""

from __future__ import annotations

import threading

import torch
from torch import Tensor

MAX_ELEMENTS = 2**20
"""The largest buffer kept (8 MiB in float64); a larger one is allocated per call."""


class _Buffers(threading.local):
    def __init__(self) -> None:
        self.held: dict[tuple[str, torch.dtype], Tensor] = {}


_BUFFERS = _Buffers()


def buffer(name: str, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> Tensor:
    """An uninitialised contiguous ``[R, G]`` tensor: this thread's buffer ``name`` on CPU (its
    contents are overwritten by the next request of the same name), else a fresh one."""
    n = shape[0] * shape[1]
    if device.type != "cpu" or n > MAX_ELEMENTS or torch.compiler.is_compiling():
        return torch.empty(shape, dtype=dtype, device=device)
    held = _BUFFERS.held.get((name, dtype))
    if held is None or held.numel() < n:
        held = torch.empty(n, dtype=dtype)
        _BUFFERS.held[(name, dtype)] = held
    return held[:n].view(shape)


def release() -> None:
    """Drop this thread's buffers (they are made again on the next call that needs them)."""
    _BUFFERS.held.clear()
