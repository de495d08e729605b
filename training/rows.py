"""The types of a prompt and of a data row, apart from the readers (``data``) and the task
generators (``tasks``), which both use them: neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass

Message = dict[str, str]
Prompt = str | tuple[Message, ...]
"""A prompt: plain text, or chat messages ``{"role": ..., "content": ...}`` in order."""
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Item:
    prompt_id: int  # stable id of the prompt in its source (for estimators with history)
    prompt: Prompt
    answer: str


@dataclass(frozen=True)
class Row:
    """One row of a data file."""

    prompt: Prompt
    answer: str


class DataError(ValueError):
    """A data file that cannot be used; the message names the file and each bad line."""
