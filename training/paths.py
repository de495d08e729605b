"""The files and folders the flags name, checked by reading headers only, before any model
loads: ``--model`` (a GGUF file or short name by ``models.check``, a ``save_pretrained``
folder here), its safetensors files, its chat template, and ``--out``. Each raises
``ConfigError`` naming the flag and what to do."""

from __future__ import annotations

import json
from pathlib import Path

from . import models
from .settings import ConfigError


def check_model(spec: str, max_new_tokens: int | None = None, flag: str = "--model") -> int | None:
    """``--model`` checked without loading it: a GGUF file (or a short name) by its header, a
    folder by ``check_model_folder``; returns the context length when known. Raises
    ``ConfigError``."""
    try:
        kind, context = models.check(spec, flag)
    except models.ModelError as error:
        raise ConfigError(str(error)) from None
    if kind == "folder":
        return check_model_folder(spec, max_new_tokens, flag)
    if max_new_tokens is not None and context is not None and max_new_tokens >= context:
        raise ConfigError(
            f"--max_new_tokens {max_new_tokens} does not fit the model's context of {context} "
            "tokens (prompt included); lower --max_new_tokens"
        )
    return context


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")


def check_model_folder(
    path: str, max_new_tokens: int | None = None, flag: str = "--model"
) -> int | None:
    """A ``save_pretrained`` folder with a config, weights and a tokenizer, checked without
    loading anything; ``max_new_tokens`` must fit the model's context, which is returned
    (None when the config does not say)."""
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{flag} {path}: no such folder (a save_pretrained folder)")
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{flag} {path}: no config.json (a save_pretrained folder)")
    weights = [*folder.glob("*.safetensors"), *folder.glob("pytorch_model*.bin")]
    if not weights:
        raise ConfigError(f"{flag} {path}: no weights (*.safetensors or pytorch_model*.bin)")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(
            f"{flag} {path}: no tokenizer ({' or '.join(TOKENIZER_FILES)}); save it beside the "
            "model with tokenizer.save_pretrained(folder)"
        )
    try:
        config = json.loads((folder / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{flag} {path}: config.json is not JSON ({error})") from None
    context = config.get("max_position_embeddings")
    if max_new_tokens is not None and isinstance(context, int):
        _fits(max_new_tokens, context)
    return context if isinstance(context, int) else None


def _fits(max_new_tokens: int, context: int) -> None:
    if max_new_tokens >= context:
        raise ConfigError(
            f"--max_new_tokens {max_new_tokens} does not fit the model's context of {context} "
            "tokens (prompt included); lower --max_new_tokens"
        )


def check_weights(path: str, flag: str = "--model") -> None:
    """Every ``*.safetensors`` file of a model folder is whole: its header parses and the file
    is as long as the header says (a truncated download or copy otherwise fails mid-load)."""
    import struct

    for file in sorted(Path(path).glob("*.safetensors")):
        size = file.stat().st_size
        try:
            with file.open("rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n)) if 8 + n <= size else None
        except (struct.error, json.JSONDecodeError, UnicodeDecodeError):
            header = None
        if not isinstance(header, dict):
            raise ConfigError(f"{flag} {path}: {file.name} is not a safetensors file")
        ends = [t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"]
        if size < 8 + n + max(ends, default=0):
            raise ConfigError(
                f"{flag} {path}: {file.name} is truncated ({size} bytes of "
                f"{8 + n + max(ends)}); copy or download it again"
            )


def check_out(out: str, flag: str = "--out") -> None:
    """An output folder that exists as a folder, or can be created, and can be written."""
    import os

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {out} is a file; give a folder (it is created if missing)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {out}: {parent} is a file, so the folder cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {out}: {parent} is not writable")
    import tempfile

    try:  # os.access says yes to root everywhere; a read-only mount still refuses the write
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as error:
        raise ConfigError(f"{flag} {out}: {parent} is not writable ({error.strerror})") from None


def has_chat_template(path: str) -> bool:
    """Whether a tokenizer folder ships a chat template (read from its files, nothing loaded)."""
    if models.is_gguf(path):
        return models.gguf_has_template(models.locate(path))
    folder = Path(path)
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    config = folder / "tokenizer_config.json"
    return config.is_file() and bool(json.loads(config.read_text()).get("chat_template"))
