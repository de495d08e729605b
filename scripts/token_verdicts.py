"""The token-level section of docs/peer_verdicts.md: the token oracle (``advest check --family
token``, spec/oracle.md) on verl 0.9.1's token-level estimators and on advest's. Imported by
scripts/peer_verdicts.py, which writes the page in the verl environment. As there, every "no"
(and every baseline that reads more than its prefix) needs a one-line reason in
``TOKEN_REASONS``, and every reason such a cell."""

from __future__ import annotations

from typing import Any

VERL_TOKENS = ["gae", "reinforce_plus_plus", "optimal_token_baseline", "tir_optimal_token_baseline"]
"""verl's estimators whose advantage varies along a response (or whose inputs the token trees
supply exactly: gae's critic values, the optimal token baselines' log π and Σπ²)."""

READS = "reads its own tokens"
UNB, CEN, SHI, SCA = "unbiased", "centred", "shift invariant", "scale equivariant"
GRPO_EPS = "GRPO's ε in the std: invariant only up to ε/σ"
OTB_OWN = (
    "B_t weighs each response by W_t = Σ_{j≤t} (1 − 2π_j + Σπ²_j), which includes π of the "
    "token at t itself"
)
OTB_BIAS = (
    "B_t is computed from the group, each response's own reward and weight included "
    "(spec/otb.md, claim 5)"
)
WHITEN_CENTRE = "whitened over the group's tokens: a response weighs by its length"
WHITEN_ROUNDING = (
    "the whitening divides by the spread of the token advantages R − V(y_<t) (0.2 where the "
    "rewards are equal), which amplifies rounding beyond the rewards' m/s"
)
OTB_CENTRE = "centred in W-weighted form, not in plain sums"
OTB_SHIFT = "ε = 1e-8 in B_t's denominator: a shift by c moves B_t by c·ε/(ΣW + ε)"
OTB_TAIL = "the zero tail: a unique longest response gets A = R past the second-longest"
OTB_LEFT = (
    "B_t is taken over a column of the batch: left padding puts different response positions "
    "in one column"
)
OTB_ROUNDING = (
    "computes in the input dtype, where ε = 1e-8 is below the resolution of ΣW: a group of equal "
    "rewards gets 0 where float64 gives R·ε/(ΣW + ε) ≈ 1e-8, that group's whole advantage "
    "(groups of varied rewards are within the allowance)"
)
WHITEN_BIAS = "whitened by the group's token mean and std, which include the rollout's own reward"
WHITEN_READS = "the whitening's mean and std run over every token of the rollout, later ones too"
TOKEN_REASONS: dict[tuple[str, str], str] = {
    ("verl:gae", UNB): WHITEN_BIAS,
    ("verl:gae", READS): WHITEN_READS,
    ("verl:gae", CEN): WHITEN_CENTRE,
    ("verl:gae", SCA): "the critic's values are held while the rewards scale: A = R − V(y_<t) "
    "does not scale with R",
    ("verl:gae", "accurate in float32"): WHITEN_ROUNDING,
    ("verl:gae", "accurate in bfloat16"): WHITEN_ROUNDING,
    ("verl:gae", "0 at padding"): "masked_whiten writes whitened values at every position, and "
    "gae does not mask them afterwards",
    ("verl:gae", "all-equal groups"): "the critic's values are the tree's, not those of equal "
    "rewards: A = R − V(y_<t) is not 0, then whitened",
    ("verl:gae", "empty response"): "masked_whiten gives the padding row whitened values",
    ("verl:reinforce_plus_plus", UNB): WHITEN_BIAS,
    ("verl:reinforce_plus_plus", READS): WHITEN_READS,
    ("verl:reinforce_plus_plus", CEN): WHITEN_CENTRE,
    ("verl:reinforce_plus_plus", SCA): "the whitening adds 1e-8 to the variance: invariant "
    "only up to that floor",
    **{
        (f"verl:{n}", prop): reason
        for n in ("optimal_token_baseline", "tir_optimal_token_baseline")
        for prop, reason in (
            (UNB, OTB_BIAS),
            (READS, OTB_OWN),
            (CEN, OTB_CENTRE),
            (SHI, OTB_SHIFT),
            ("accurate in float32", OTB_ROUNDING),
            ("accurate in bfloat16", OTB_ROUNDING),
            ("all-equal groups", OTB_TAIL),
        )
    },
    ("verl:optimal_token_baseline", "left padding"): OTB_LEFT,
    ("ktae", UNB): "GRPO's division by the group's std, plus κ of the token's own id",
    ("ktae", READS): "κ is a function of the token's own id (u = t), and its tf term counts the "
    "rollout's tokens, later ones included",
    ("ktae", CEN): "κ is added to every token of a rollout, uncentred",
    ("ktae", SHI): "a token counts as correct when its rollout's reward is > 0: a shift moves that",
    ("ktae", SCA): GRPO_EPS,
    ("hista (w = 1)", CEN): "V̂_i(t) is a value of rollout i's own state: the group's advantages "
    "need not sum to 0 (at G = 2 it is the other's reward, RLOO)",
    ("covariance_weights", UNB): "reweights GRPO (std-divided) by weights read from the "
    "rollout's own log-probabilities and advantages",
    ("covariance_weights", READS): "each token's weight is centred over the group's tokens, "
    "the rollout's later tokens included",
    ("covariance_weights", CEN): "the weights differ per token: Σ w·A is not 0",
    ("covariance_weights", SCA): GRPO_EPS,
    ("covariance_weights", "extends"): "its weights read the log-probabilities, which still "
    "differ between positions when every rollout holds the same response",
    ("optimal_token_baseline", UNB): OTB_BIAS,
    ("optimal_token_baseline", READS): OTB_OWN,
    ("optimal_token_baseline", CEN): OTB_CENTRE,
    ("optimal_token_baseline", SHI): OTB_SHIFT,
    ("optimal_token_baseline", "left padding"): OTB_LEFT,
    ("optimal_token_baseline", "all-equal groups"): OTB_TAIL,
}
"""(row, column) -> why that cell says "no" (or reads more than its prefix)."""


def _needs_reason(prop: str, cell: str) -> bool:
    if prop == READS:
        return cell != "prefix only"
    return cell.startswith("no") or any(f"G={g}: no" in cell for g in (2, 3))


def token_section(strict: bool = True) -> list[str]:
    """The section's lines: one table, verl's rows then advest's (``ADVEST``), and a reason for
    each "no"; ValueError (``strict``) when a "no" has no reason or a reason no "no"."""
    from advest.fast import registry
    from advest.oracle.conventions.verl import verl_estimator
    from advest.oracle.reports.token_report import ADVEST, COLUMNS, cell, safe_check, verdict_table

    rows: list[tuple[str, Any]] = [
        (f"verl:{name}", safe_check(verl_estimator(name), convention="verl"))
        for name in VERL_TOKENS
    ]
    rows += [
        (row, safe_check(registry.get(name), extends=seq, options=options))
        for row, name, seq, options in ADVEST
    ]
    why, needed = [], set()
    for row, found in rows:
        for prop in COLUMNS if not isinstance(found, str) else ():
            if _needs_reason(prop, cell(found, prop)):
                needed.add((row, prop))
                reason = TOKEN_REASONS.get((row, prop), "MISSING")
                why.append(f"- `{row}`, {COLUMNS[prop]}: {reason}")
    if strict:
        check_reasons("TOKEN_REASONS", TOKEN_REASONS, needed)
    return [*TOKEN_INTRO, verdict_table(rows), "", '### Why each token-level "no"', "", *why, ""]


def check_reasons(name: str, reasons: dict[tuple[str, str], str], needed: set[Any]) -> None:
    """ValueError unless ``reasons`` (the table ``name``) gives a reason for exactly the
    (row, column) cells that say "no": none missing, none left over from an older verdict."""
    missing = sorted(k for k in needed if k not in reasons)
    stale = sorted(k for k in reasons if k not in needed)
    if missing or stale:
        raise ValueError(f"{name}: no reason for {missing}; reasons for no 'no': {stale}")


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
