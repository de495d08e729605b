"""transformers made quiet: one switch for its per-tensor progress bars, used wherever advest
loads or writes a model (``models``, ``embedded``, ``policy``, ``scale``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No per-tensor progress bars ("Converting and de-quantizing", "Loading weights", "Writing
    model shards"): the run's one bar is the trainer's."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    bar = getattr(gguf_utils, "tqdm")  # noqa: B009 - the GGUF loader's own bar, which that switch misses
    setattr(gguf_utils, "tqdm", lambda items, **kw: items)  # noqa: B010
    try:
        yield
    finally:
        setattr(gguf_utils, "tqdm", bar)  # noqa: B010
        if was:
            hf_logging.enable_progress_bar()
