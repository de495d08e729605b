"""The one parser system of every ``advest`` subcommand: jsonargparse (the engine of Lightning's
CLI), with the conventions fixed once here.

* Every setting's ``--help`` shows its description: dataclass fields are documented by the
  docstring under them, which jsonargparse reads only when attribute-docstring parsing is on.
* Booleans are switches: ``--flag`` / ``--no_flag``.
* Multi-word flags are snake_case everywhere (``--max_new_tokens``, ``--max_n``), as the dataclass
  fields and Lightning's ``--trainer.*`` flags already are.
* A bad value goes to stderr with exit code 2 and names the flag (``--steps: Expected a <class
  'int'>. Got value: abc``), not jsonargparse's internal key.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import typing
from typing import Any, NoReturn

import jsonargparse
from jsonargparse import ActionYesNo
from jsonargparse import ArgumentParser as _ArgumentParser

jsonargparse.set_parsing_settings(docstring_parse_attribute_docstrings=True)


class Parser(_ArgumentParser):
    """A jsonargparse parser whose errors name the flag as the user types it."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        message = re.sub(r'Parser key "([^"]+)":\s*', r"--\1: ", message)
        super().error(message, ex)


def new_parser(prog: str, description: str, usage: str | None = None) -> Parser:
    return Parser(
        prog=prog, description=description, usage=usage, default_env=False, exit_on_error=True
    )


def field_docs(cls: type) -> dict[str, str]:
    """``{field: its docstring}`` of a dataclass, as jsonargparse reads them for ``--help``."""
    import docstring_parser

    doc = docstring_parser.parse_from_object(cls)
    return {p.arg_name: " ".join((p.description or "").split()) for p in doc.params}


def add_settings(parser: _ArgumentParser, cls: type, names: tuple[str, ...] | None = None) -> None:
    """One flag per field of the dataclass ``cls``, or per field in ``names`` (help from the
    field's docstring); ``bool`` fields become ``--field`` / ``--no_field`` switches. Every
    command that takes a setting of ``RLConfig`` declares it through here, so its type, default
    and help are written once."""
    fields = dataclasses.fields(cls)
    unknown = set(names or ()) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    docs = field_docs(cls)
    if names is None:  # the whole class, as one argument group (`advest train --help`)
        flags = {f.name for f in fields if f.type in (bool, "bool")}
        parser.add_class_arguments(cls, nested_key=None, skip=flags, fail_untyped=False)
        chosen = [f for f in fields if f.name in flags]
    else:  # a few fields among a command's own flags: jsonargparse allows one group per class
        chosen = [f for f in fields if f.name in names]
    types = typing.get_type_hints(cls)
    for f in chosen:
        default: Any = f.default
        if default is dataclasses.MISSING:  # a list default comes from its factory
            default = f.default_factory()  # type: ignore[operator]
        if types[f.name] is bool:
            switch(parser, f.name, default, docs.get(f.name, ""))
        else:
            parser.add_argument(
                f"--{f.name}", type=types[f.name], default=default, help=docs.get(f.name, "")
            )


def switch(parser: _ArgumentParser, name: str, default: bool, help: str) -> None:
    """``--name`` / ``--no_name``."""
    parser.add_argument(f"--{name}", action=ActionYesNo, default=default, help=help)


def settings(cls: type[Any], namespace: Any) -> Any:
    """The dataclass ``cls`` built from the fields of a parsed namespace."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in vars(namespace).items() if k in names})


LIST_FLAGS = ("--reward", "--reward_weights")
"""Flags that take several values separated by spaces (``--reward math mymod:format``)."""


def gather_lists(argv: list[str]) -> list[str]:
    """``--reward math mymod:format`` → ``--reward '[math, mymod:format]'``: the values after a
    ``LIST_FLAGS`` flag, up to the next ``--flag``, as the one list value jsonargparse reads. A
    single ``--reward`` value stays as it is (a name, or a list written ``[a, b]``); weights are
    always a list."""
    out: list[str] = []
    i = 0
    # --flag=a is --flag a
    argv = [w for a in argv for w in (a.split("=", 1) if a.split("=")[0] in LIST_FLAGS else [a])]
    while i < len(argv):
        out.append(argv[i])
        i += 1
        if out[-1] not in LIST_FLAGS:
            continue
        values = []
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        listed = len(values) > 1 or (out[-1] == "--reward_weights" and values)
        if listed and not values[0].startswith("["):
            out.append("[" + ", ".join(v if _number(v) else json.dumps(v) for v in values) + "]")
        else:
            out.extend(values)
    return out


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def fail(prog: str, message: str) -> int:
    """A user mistake found after parsing: to stderr, exit code 2."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 2
