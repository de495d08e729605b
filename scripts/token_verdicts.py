"""The token-level section of docs/peer_verdicts.md: the token oracle (``advest check --family
token``, spec/oracle.md) on verl 0.9.1's token-level estimators and on advest's. Imported by
scripts/peer_verdicts.py, which writes the page in the verl environment."""

from __future__ import annotations

from typing import Any

VERL_TOKENS = ["gae", "reinforce_plus_plus", "optimal_token_baseline", "tir_optimal_token_baseline"]
"""verl's estimators whose advantage varies along a response (or whose inputs the token trees
supply exactly: gae's critic values, the optimal token baselines' log π and Σπ²)."""


def token_section() -> list[str]:
    """The section's lines: one table, verl's rows then advest's (``ADVEST``)."""
    from advest.fast import registry
    from advest.oracle.token_report import ADVEST, safe_check, verdict_table
    from advest.oracle.verl import verl_estimator

    rows: list[tuple[str, Any]] = [
        (f"verl:{name}", safe_check(verl_estimator(name), convention="verl"))
        for name in VERL_TOKENS
    ]
    rows += [(name, safe_check(registry.get(name), extends=seq)) for name, seq in ADVEST]
    return [*TOKEN_INTRO, verdict_table(rows), ""]


TOKEN_INTRO = [
    "## Token level",
    "",
    'What `advest check --family token` reports (spec/oracle.md, "Token-level estimators"):',
    "exact enumeration of every group of G = 2 and 3 rollouts of three small token trees (two",
    "symbols and EOS, responses of up to 3 tokens, rational π), properties in float64, cells",
    "merged over G where they agree. verl's estimators get the trees' exact inputs: gae the",
    "critic V(y_<t) = E[R | y_<t] (γ = λ = 1), the optimal token baselines log π and Σπ² of the",
    "sampled tokens; an estimator that couples groups (verl's batch whitening) is judged one",
    "group per batch. `extends`: equal to the named sequence estimator when every rollout of a",
    "group holds the same response.",
    "",
]
