"""Deprecated: the ``advest`` command line moved to :mod:`advest.cli` (above every layer, each
subcommand's parser with its own package). ``python -m advest.training.cli`` and
``advest.training.cli.main`` keep working, with a warning, until 0.4.0 removes them."""

from __future__ import annotations

import warnings
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    warnings.warn(
        "advest.training.cli is deprecated and is removed in 0.4.0; use advest.cli (or the "
        "`advest` command)",
        DeprecationWarning,
        stacklevel=2,
    )
    from advest.cli import main as advest_main

    return advest_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
