"""Deprecated alias of ``advest.proofs.coq_check`` (renamed: ``proofs/coq/`` is the folder of
``.v`` files, this was the module that checks them). Every name still resolves here, with a
``DeprecationWarning``, until 0.4.0 removes it; ``python -m advest.proofs.coq`` still re-pins."""

from __future__ import annotations

import warnings
from typing import Any

from . import coq_check


def __getattr__(name: str) -> Any:
    value = getattr(coq_check, name)  # AttributeError for a name that never existed
    warnings.warn(
        f"advest.proofs.coq.{name} is deprecated and is removed in 0.4.0: import it from "
        "advest.proofs.coq_check",
        DeprecationWarning,
        stacklevel=2,
    )
    return value


if __name__ == "__main__":
    warnings.warn(
        "python -m advest.proofs.coq is deprecated: run python -m advest.proofs.coq_check",
        DeprecationWarning,
        stacklevel=1,
    )
    coq_check.write_statements()
    print(f"wrote {coq_check.STATEMENTS}")
