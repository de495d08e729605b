"""The correctness oracle behind ``advest check``: which properties does *any* advantage
estimator have? It takes a callable on rewards ``[B, G]`` (plus K for max@K), or one with verl's
signature, and reports, with evidence: centring, shift/scale/permutation behaviour,
exact-enumeration unbiasedness on small bandits, its relation to ``canonical`` (max@K), what it
does on bad input, and whether it modifies its inputs.

It trusts nothing: every call gets copies of the inputs (a changed copy is reported), the output
must have the input's shape, dtype and device, and K and N are validated before the user's code
runs. Every check runs in the estimator's own dtype (``dtype``) and again in float64 when the
estimator accepts float64 rewards; the tolerance follows the dtype and the rewards' spread
(``allowance``, stated in spec/oracle.md).

Five rooms, each below the next in the import contract (pyproject.toml): ``inputs`` (the
allowance and the explicit batches, exact token and episode trees), ``conventions`` (how an
estimator is called: ``[B, G]``, flat rows with ids, tokens, verl, SkyRL), ``properties`` (each
property a function returning a ``Finding``), ``search`` (every property searched over its input
domain with hypothesis, each "no" with its shrunk input) and ``reports`` (``check``, the table,
the JSON schema, the command line, ``assert_estimator``). The names below are the public API
(``oracle.check``, ``oracle.table``).
"""

from __future__ import annotations

from .conventions.harness import (
    Convention,
    Estimator,
    Guard,
    Objective,
    OracleError,
    OutOfScope,
    Plain,
    Watch,
    check_output,
    load,
    resolve_signature,
)
from .inputs.tolerance import DTYPES, LENGTH_T, USABLE, allowance, rule, sample_lengths
from .properties.findings import NON_FINITE, Finding
from .properties.sequence import (
    accuracy,
    all_equal,
    bad_input,
    centred,
    permutation_equivariant,
    relation_to_canonical,
    scale_behaviour,
    shift_invariant,
    singleton,
)
from .properties.unbiased import BANDIT_MAX_ROWS, BANDITS, unbiasedness
from .reports.cli import TIMEOUT_S, add_arguments, command, run_in_child
from .reports.report import accuracy_only, as_json, check, default_ns, validate
from .reports.verdicts import table

__all__ = [
    "BANDITS",
    "BANDIT_MAX_ROWS",
    "DTYPES",
    "LENGTH_T",
    "NON_FINITE",
    "TIMEOUT_S",
    "USABLE",
    "Convention",
    "Estimator",
    "Finding",
    "Guard",
    "Objective",
    "OracleError",
    "OutOfScope",
    "Plain",
    "Watch",
    "accuracy",
    "accuracy_only",
    "add_arguments",
    "all_equal",
    "allowance",
    "as_json",
    "bad_input",
    "centred",
    "check",
    "check_output",
    "command",
    "default_ns",
    "load",
    "permutation_equivariant",
    "relation_to_canonical",
    "resolve_signature",
    "rule",
    "run_in_child",
    "sample_lengths",
    "scale_behaviour",
    "shift_invariant",
    "singleton",
    "table",
    "unbiasedness",
    "validate",
]


def __getattr__(name: str) -> object:
    """``Family``, the old name of ``Objective``, with a DeprecationWarning (one release)."""
    if name == "Family":
        import warnings

        warnings.warn(
            "advest.oracle.Family is deprecated: it is advest.oracle.Objective (what an "
            "estimator is judged against; a registry entry's family is its module)",
            DeprecationWarning,
            stacklevel=2,
        )
        return Objective
    raise AttributeError(f"module 'advest.oracle' has no attribute {name!r}")
