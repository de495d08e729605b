"""The oracle's verdicts on every advantage estimator verl 0.9.1 registers and on TRL 1.16.0's
GRPO and RLOO conventions, written to docs/peer_verdicts.md (with the rows of trainers' data,
scripts/peer_rows.py, and the token level, scripts/token_verdicts.py).

    .nox/verl/bin/python scripts/peer_verdicts.py           # write docs/peer_verdicts.md
    .nox/verl/bin/python scripts/peer_verdicts.py --check   # exit 1 if the page is stale

Runs in the verl environment (tests/verl/test_verl.py runs ``--check`` there, so the committed page
cannot go stale). Each estimator is checked as ``advest check`` checks it: in a child process
with a timeout, at N = 3 and 8, in float32 (with float64 beside it) and in bfloat16. verl's
estimators come from verl's own registry (``verl:NAME``); TRL computes its advantages inline in
its trainers, so its conventions are transcribed below, line for line, with their source lines.
Every "no" on the page needs a one-line reason in ``REASONS``, and every reason a "no": the
script refuses to write a page where the two disagree.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "peer_verdicts.md"
NS = [3, 8]
TIMEOUT_S = 300.0


def _nanstd(x: Tensor, dim: int | None = None) -> Tensor:
    """TRL 1.16.0 ``trl.trainer.utils.nanstd``: Bessel-corrected, NaN-aware."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(x), dim=dim, keepdim=True)
    var = var * count / (count - 1)
    return torch.sqrt(var if dim is None else var.squeeze(dim))


def trl_grpo(rewards: Tensor) -> Tensor:
    """TRL 1.16.0 ``GRPOTrainer`` (grpo_trainer.py 2765-2787), ``scale_rewards="group"``
    (the default): (r − mean) / (std + 1e-4) per group, std Bessel-corrected; 0 at G = 1."""
    G = rewards.shape[1]
    mean = torch.nanmean(rewards, dim=1, keepdim=True)
    std = _nanstd(rewards, dim=1)[:, None] if G > 1 else torch.zeros_like(mean)
    return (rewards - mean) / (std + 1e-4)


def trl_grpo_batch(rewards: Tensor) -> Tensor:
    """TRL 1.16.0 ``GRPOTrainer``, ``scale_rewards="batch"``: the group mean, the batch's std."""
    mean = torch.nanmean(rewards, dim=1, keepdim=True)
    std = _nanstd(rewards) if rewards.numel() > 1 else torch.zeros(())
    return (rewards - mean) / (std + 1e-4)


def trl_grpo_none(rewards: Tensor) -> Tensor:
    """TRL 1.16.0 ``GRPOTrainer``, ``scale_rewards="none"``: r − the group mean."""
    return rewards - torch.nanmean(rewards, dim=1, keepdim=True)


def trl_rloo(rewards: Tensor) -> Tensor:
    """TRL 1.16.0 ``RLOOTrainer`` (rloo_trainer.py 1685-1699), ``normalize_advantages=False``
    (the default): r − the mean of the others; 0 at G = 1."""
    G = rewards.shape[1]
    if G == 1:
        return torch.zeros_like(rewards)
    counts = (~torch.isnan(rewards)).sum(dim=1, keepdim=True)
    total = torch.nansum(rewards, dim=1, keepdim=True)
    return torch.nan_to_num(rewards - (total - rewards) / (counts - 1), nan=0.0)


def trl_rloo_normalized(rewards: Tensor) -> Tensor:
    """TRL 1.16.0 ``RLOOTrainer``, ``normalize_advantages=True``: RLOO's advantages whitened over
    the whole batch, (A − mean) / (std + 1e-4)."""
    G = rewards.shape[1]
    if G == 1:
        return torch.zeros_like(rewards)
    counts = (~torch.isnan(rewards)).sum(dim=1, keepdim=True)
    total = torch.nansum(rewards, dim=1, keepdim=True)
    adv = rewards - (total - rewards) / (counts - 1)
    return torch.nan_to_num((adv - torch.nanmean(adv)) / (_nanstd(adv) + 1e-4), nan=0.0)


TRL = ["trl_grpo", "trl_grpo_batch", "trl_grpo_none", "trl_rloo", "trl_rloo_normalized"]
TRL_NAMES = {
    "trl_grpo": 'GRPO, scale_rewards="group"',
    "trl_grpo_batch": 'GRPO, scale_rewards="batch"',
    "trl_grpo_none": 'GRPO, scale_rewards="none"',
    "trl_rloo": "RLOO",
    "trl_rloo_normalized": "RLOO, normalize_advantages=True",
}

COLUMNS = {
    "unbiased": "unbiased (mean reward)",
    "centred": "centred",
    "shift invariant": "shift",
    "scale equivariant": "scale",
    "permutation equivariant": "permutation",
    "float32": "float32",
    "bfloat16": "bfloat16",
    "singleton group": "G = 1",
    "all-equal groups": "all-equal",
    "split over ranks": "ranks",
    "search": "searched",
}
SEARCH = "search"
"""The search's column (spec/oracle.md, "Searched properties"): its "no" cells need no reason in
``REASONS``: each comes with its shrunk input, expected and measured, under "Found by the
search"."""

WHITENED = ["gae", "gdpo", "reinforce_plus_plus_baseline", "reinforce_plus_plus"]
Z_SCORES = ["grpo", "grpo_vectorized", "trl_grpo", "trl_grpo_batch"]
UNBIASED = "unbiased"
REASONS: dict[tuple[str, str], str] = {
    **{
        (n, UNBIASED): "divides by the group's std (+ ε), which depends on the sample's own reward"
        for n in ("grpo", "grpo_vectorized", "trl_grpo")
    },
    ("trl_grpo_batch", UNBIASED): "divides by the batch's std (+ ε), which depends on the "
    "sampled rewards",
    ("gae", UNBIASED): "with values 0, A = r whitened by the batch's token-weighted mean and "
    "std, which depend on the sampled rewards",
    ("gdpo", UNBIASED): "GRPO's division by the group's std, then whitening over the batch",
    ("grpo_passk", UNBIASED): "a pass@k estimator (arXiv 2503.19595): only the best sample gets "
    "(r_max − r_second) / (std + ε); not one for the mean reward",
    ("reinforce_plus_plus_baseline", UNBIASED): "the group mean includes the sample's own "
    "reward, and the batch whitening divides by a sampled std",
    ("opo", UNBIASED): "the length-weighted group mean includes the sample's own reward",
    ("reinforce_plus_plus", UNBIASED): "no baseline but the batch's own token-weighted mean and "
    "std, which include the sample's reward",
    ("gpg", UNBIASED): "α = B / #(nonzero rewards) depends on the sampled rewards, and the group "
    "mean includes the sample's own reward",
    ("trl_rloo_normalized", UNBIASED): "RLOO's advantages whitened by their batch mean and std "
    "(+ 1e-4), which depend on the sampled rewards",
    **{
        (n, "centred"): "whitened over the batch's tokens: a response weighs by its length, so "
        "the batch, not each group, is centred"
        for n in WHITENED
    },
    ("grpo_passk", "centred"): "only the best sample of a group gets a nonzero advantage",
    ("opo", "centred"): "the baseline is the length-weighted mean: the plain sum over a group "
    "is not 0",
    ("remax", "centred"): "A = r − the greedy reward (made up here as 0): nothing is centred",
    **{
        (n, "scale equivariant"): "ε = 1e-6 (verl) or 1e-4 (TRL) added to the std: invariant "
        "only up to ε/σ"
        for n in (*Z_SCORES, "grpo_passk")
    },
    **{
        (n, "scale equivariant"): "the whitening adds 1e-8 to the variance: invariant only up "
        "to that floor"
        for n in WHITENED
    },
    ("trl_rloo_normalized", "scale equivariant"): "whitened with 1e-4 added to the std: "
    "invariant only up to that floor",
    ("remax", "shift invariant"): "the made-up greedy reward 0 does not move with the rewards "
    "(a real greedy reward would)",
    ("gpg", "shift invariant"): "α = B / #(nonzero rewards): a shift changes which rewards are "
    "zero",
    **{
        (n, "singleton group"): "a lone sample gets r / (1 + ε): mean 0 and std 1 by convention"
        for n in ("grpo", "grpo_vectorized")
    },
    ("rloo", "singleton group"): "a lone sample keeps its raw reward as its advantage (a "
    "reported bug: rloo_vectorized gives 0)",
    ("opo", "singleton group"): "a lone sample's baseline is 0: its advantage is its raw reward",
    ("remax", "singleton group"): "A = r − the greedy reward, made up here as 0",
    ("gpg", "singleton group"): "a lone sample's mean is 0, so A = α·r with α = B / "
    "#(nonzero rewards) = 4/3 here",
    **{
        (n, "all-equal groups"): "the batch whitening moves an all-equal group's zeros (0 "
        "alone, nonzero beside other groups)"
        for n in WHITENED
    },
    ("remax", "all-equal groups"): "A = r − the greedy reward (made up here as 0): equal rewards "
    "keep their value",
    **{
        (n, "bfloat16"): "at N = 3 the bfloat16 z-score misses float64 by a little more than the "
        "G·u allowance (the std's square root and the division add roundings)"
        for n in ("grpo", "trl_grpo")
    },
    ("grpo_vectorized", "bfloat16"): "returns float32 advantages for bfloat16 rewards "
    "(group_mean_std computes in float32)",
    ("rloo_vectorized", "bfloat16"): "returns float64 advantages for bfloat16 rewards "
    "(torch.bincount's weighted counts are float64)",
    **{
        (n, "split over ranks"): "a statistic over the whole batch (a whitening; gpg's α counts "
        "the batch's nonzero rewards) computed over the rows it is given: verl computes it on its "
        "driver over the whole batch, so verl is right; a trainer that shards the batch over ranks "
        "must all-reduce it"
        for n in (*WHITENED, "gpg")
    },
}
"""(estimator, column) -> why that cell says "no"."""


def verl_names() -> list[str]:
    """verl's own registered estimators (advest's ``advest_*`` entries left out)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    return [n for n in ADV_ESTIMATOR_REGISTRY if not n.startswith("advest_")]


def _page_child(conn: Any, target: str, options: dict[str, Any]) -> None:
    """The child process for one estimator (``run_in_child``'s protocol): every check in
    float32 (float64 beside it), then bfloat16's accuracy; ``("ok", (findings, bf16))`` with
    bf16 the findings or the one-line reason it could not be checked, or an error kind."""
    from advest.oracle import OracleError, OutOfScope, accuracy_only, check
    from advest.oracle.reports.cli import load_target

    try:
        fn, forced = load_target(target)
    except Exception as error:
        conn.send(("import", f"cannot import {target}: {type(error).__name__}: {error}"))
        return
    convention = forced or "plain"
    try:
        found = check(fn, "outcome", 1, ns=NS, convention=convention)
    except OutOfScope as error:
        conn.send(("oracle", f"out of scope: {error}"))
        return
    except Exception as error:
        conn.send(("call", f"{type(error).__name__}: {error}"))
        return
    low: Any
    try:
        low = accuracy_only(fn, "bfloat16", NS, convention=convention)
    except OracleError as error:
        low = f"not accepted: {error}"
    conn.send(("ok", (found, low)))


def _findings(target: str) -> tuple[str, Any]:
    """(kind, payload) of one child run: (findings, bfloat16 findings), or a one-line error."""
    from advest.oracle import run_in_child

    kind, payload, stage = run_in_child(target, {}, TIMEOUT_S, child=_page_child)
    if kind in ("timeout", "died"):
        return kind, f"{kind} while {stage}"
    return kind, payload


def _cell(findings: list[Any], prop: str, dtype: str) -> str:
    got = [f for f in findings if f.prop == prop and f.dtype == dtype and not f.searched]
    verdicts = list(dict.fromkeys(f.verdict for f in got))
    if not got:
        return ""
    if len(verdicts) == 1:
        return str(verdicts[0])
    return "; ".join(f"N={f.n}: {f.verdict}" for f in got)


def _unbiased(findings: list[Any]) -> str:
    got = [f for f in findings if f.prop == "unbiased" and f.dtype == "float64"]
    if all(f.verdict.startswith("yes") for f in got) and got:
        cs = [f.verdict.split("E[ĝ] = ")[1].split("·")[0] for f in got]
        if cs == [str(f.n) for f in got]:
            return "yes, E[ĝ] = N·∇J"
        pairs = zip(cs, got, strict=True)
        return "yes, E[ĝ] = c·∇J, " + ", ".join(f"c = {c} at N = {f.n}" for c, f in pairs)
    return _cell(findings, "unbiased", "float64").replace(" for the mean reward (K=1)", "")


def row(name: str, child: tuple[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The page's cells for one estimator from its child's answer (``_findings``), and the
    oracle's evidence behind each."""
    from advest.oracle.reports.token_report import counterexamples, searched_cell

    kind, payload = child
    if kind != "ok":
        return {"scope": payload}, {}
    found, low = payload
    cells = {
        "unbiased": _unbiased(found),
        **{p: _cell(found, p, "float64") for p in COLUMNS if "invariant" in p or "equi" in p},
        "centred": _cell(found, "centred", "float64"),
        "float32": _cell(found, "accurate (vs float64)", "float32"),
        "singleton group": _cell(found, "singleton group", "float32"),
        "all-equal groups": _cell(found, "all-equal groups", "float32"),
        "split over ranks": _cell(found, "split over ranks", "float64"),
        SEARCH: searched_cell(found),
    }
    working = [f for f in found if f.prop == "working precision"]
    if working:
        cells["float32"] += " (computes in float32)"
    if isinstance(low, str):
        cells["bfloat16"] = low.replace("|", "/")
    else:
        cells["bfloat16"] = _cell(low, "accurate (vs float64)", "bfloat16")
    evidence = {
        p: "; ".join(
            dict.fromkeys(f.evidence for f in found if f.prop == p and f.verdict[:2] == "no")
        )
        for p in ("centred", "singleton group", "all-equal groups")
    }
    evidence[SEARCH] = "\n".join(counterexamples(name, found))
    return cells, evidence


def _is_no(cell: str) -> bool:
    return cell.startswith("no") or "N=3: no" in cell or "N=8: no" in cell


def render(strict: bool = True) -> str:
    """The page, or (``strict``) ValueError when a "no" has no reason or a reason no "no"."""
    rows = [(n, f"verl:{n}", n) for n in verl_names()]
    rows += [(n, f"peer_verdicts:{n}", TRL_NAMES[n]) for n in TRL]
    head = "| estimator | " + " | ".join(COLUMNS.values()) + " |"
    lines = [head, "|---" * (1 + len(COLUMNS)) + "|"]
    out_of_scope, why, needed = [], [], set()
    found_by_search: list[str] = []
    # one child process per estimator, as many at once as there are cores: each is seeded on
    # its own (the search's seed is its target's and property's), so the page is the same
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        children = list(pool.map(_findings, [target for _, target, _ in rows]))
    for (key, _, shown), child in zip(rows, children, strict=True):
        cells, evidence = row(key, child)
        if evidence.get(SEARCH):
            found_by_search.append(evidence[SEARCH].replace(f"`{key}`", f"`{shown}`"))
        if "scope" in cells:
            note = f" {SCOPE_NOTES[key]}" if key in SCOPE_NOTES else ""
            out_of_scope.append(f"- `{shown}`: {cells['scope']}.{note}")
            continue
        lines.append(f"| `{shown}` | " + " | ".join(cells[c] for c in COLUMNS) + " |")
        for column in COLUMNS:
            if column != SEARCH and _is_no(cells[column]):
                needed.add((key, column))
                reason = REASONS.get((key, column), "MISSING")
                why.append(f"- `{shown}`, {COLUMNS[column]}: {reason}")
    from peer_rows import section  # scripts/ is the working directory
    from token_verdicts import check_reasons, token_section

    if strict:
        check_reasons("REASONS", REASONS, needed)
    trl = {n: (TRL_NAMES[n], globals()[n]) for n in TRL}
    trainers = section(verl_names(), trl, strict)

    return "\n".join(
        [
            *INTRO,
            *lines,
            "",
            '## Why each "no"',
            "",
            *why,
            "",
            "## Found by the search",
            "",
            'Each searched "no" with the smallest input hypothesis shrank it to (paste it, then',
            "`A = estimator(rewards)`), what the property expected and what the estimator gave:",
            "",
            *(found_by_search or ["- (the search found nothing the explicit inputs had not)"]),
            "",
            *SCOPE,
            *out_of_scope,
            "",
            *trainers,
            *token_section(strict),
        ]
    )


INTRO = [
    "# The oracle on verl's and TRL's estimators",
    "",
    "Generated by `scripts/peer_verdicts.py` in the verl environment (verl 0.9.1; TRL 1.16.0's",
    "conventions transcribed there with their source lines); `tests/verl/test_verl.py` regenerates"
    " it",
    "and fails if this page differs. Each row is what `advest check verl:NAME` (or the",
    "transcription) reports at N = 3 and 8: the properties in float64, judged with the",
    "tolerance rule of [the oracle](spec/oracle.md); `float32` and `bfloat16`: the estimator in",
    "that dtype against itself in float64 on the same rewards; `G = 1`: groups of one sample;",
    "`ranks`: the estimator on shards of one batch on 2 gloo processes, against one call on the",
    "whole batch (oracle/properties/ranks.py; verl computes advantages on its driver over the",
    "whole batch);",
    "`searched`: the search over each property's whole input domain (every group size, id,",
    "masked row and reward value), after the explicit inputs;",
    "`all-equal`: groups of equal rewards beside varied ones. verl's estimators are called with",
    "verl's default `AlgoConfig`, string uids, responses of random length that move with their",
    "samples, and, where verl's batch would supply them, made-up inputs: gae gets values 0 (γ =",
    "λ = 1), remax a greedy baseline of 0 (so its row is REINFORCE with a fixed baseline).",
    "",
]
SCOPE = ["## Out of scope", ""]
OTB_NOTE = (
    "Why the oracle cannot judge it: its bandit gives each response one action and the estimator "
    "only rewards, while this baseline weighs each response by π of its own sampled tokens; a "
    "made-up π is detached from the actions the enumeration sums over, so any verdict would be "
    "about another estimator. advest's `optimal_token_baseline` equals it (max |Δ| 1.9e-7 in "
    "float32, tests/verl/check_otb.py), and its claims are decided by exact enumeration of token "
    "trees with the real π in [spec/otb.md](spec/otb.md): no constant baseline adds bias, the "
    "cumulative weight minimises the prefix estimator, and the group's own estimate is biased "
    "for n ≥ 2. The token oracle judges it with the real π: see Token level below."
)
SCOPE_NOTES = {"optimal_token_baseline": OTB_NOTE, "tir_optimal_token_baseline": OTB_NOTE}
"""What the oracle's one-line reason cannot say, per out-of-scope estimator."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--draft", action="store_true", help="print, reasons or not")
    args = parser.parse_args(argv)
    os.chdir(ROOT / "scripts")  # the child processes import peer_verdicts from here
    page = render(strict=not args.draft)
    if args.draft:
        print(page)
        return 0
    if args.check:
        if PAGE.read_text() != page:
            print(
                f"{PAGE} is stale: run scripts/peer_verdicts.py in .nox/verl (nox -s verl)",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
