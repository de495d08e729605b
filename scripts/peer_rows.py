"""The section "Trainers' data" of docs/peer_verdicts.md: the oracle's grouped rows (ids
relabelled, row order, ragged groups, masked rows, dropped groups, response length, std division
off), the magnitude bound and low-precision rewards, on every estimator verl 0.9.1 registers,
each reached through verl's own ``compute_advantage`` (``advest check verl:NAME --dispatch``),
and on TRL 1.16.0's GRPO and RLOO conventions (``[B, G]``: the magnitude and low-precision
rows). ``scripts/peer_verdicts.py`` appends it; every "no" needs its entry in ``FOUND`` (what a
maintainer needs: the input, what was expected, what came out, the line of their code), and
every entry a "no".

    .nox/verl/bin/python scripts/peer_rows.py   # print the section (a draft, reasons or not)
    .nox/skyrl/bin/python scripts/peer_rows.py --skyrl [--check]   # SkyRL's rows, as JSON
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

N = 4
COLUMNS = (
    "ids relabelled",
    "row order",
    "ragged groups",
    "masked rows",
    "dropped groups",
    "response length",
    "std division off",
    "magnitude bound",
    "low-precision rewards bfloat16",
    "low-precision rewards float16",
)

CORE = "verl/trainer/ppo/core_algos.py"
WHITENED = {
    "gae": f"{CORE}:262 (`masked_whiten(advantages, response_mask)`)",
    "reinforce_plus_plus": f"{CORE}:728 (`masked_whiten(returns, response_mask)`)",
    "reinforce_plus_plus_baseline": f"{CORE}:582 (`masked_whiten(scores, response_mask)`)",
}
BF16, BOTH = ("bfloat16",), ("bfloat16", "float16")
IN_DTYPE = {  # where the group statistics are taken in the rewards' own dtype, and which fail
    "grpo": (f"{CORE}:304-321 (`torch.mean` / `torch.std` of the scores)", BF16),
    "reinforce_plus_plus_baseline": (f"{CORE}:562-575 (the group mean)", BF16),
    "rloo": (f"{CORE}:612-625 (the group mean)", BOTH),
    "opo": (f"{CORE}:665-684 (the length-weighted mean)", BOTH),
    "gpg": (f"{CORE}:802-823 (mean and std)", BF16),
}
NO_MASK = {  # every row of the batch enters its uid's statistics, an empty response included
    "grpo": f"{CORE}:304",
    "grpo_vectorized": f"{CORE}:350",
    "grpo_passk": f"{CORE}:501",
    "reinforce_plus_plus_baseline": f"{CORE}:562",
    "rloo": f"{CORE}:612",
    "gpg": f"{CORE}:802",
    "rloo_vectorized": f"{CORE}:858",
}
TRL_LINE = "trl/trainer/{}_trainer.py (the inline advantage code, transcribed in peer_verdicts.py)"
BATCH = (
    "Expected: each group's advantages as alone (the oracle's reading of a per-group baseline). "
    "It whitens over the whole batch's tokens, {}: by design a batch statistic, so a group's "
    "advantages depend on the other groups, on their number and on the responses' lengths "
    "(verl PR 6497 is the same class for GDPO)."
)


def _whitened(lines: dict[str, str], flag: str) -> dict[tuple[str, str], str]:
    """The "no"s of estimators that whiten over the batch's tokens (``lines``: name -> where)."""
    out: dict[tuple[str, str], str] = {}
    for name, line in lines.items():
        for column in ("ragged groups", "dropped groups", "response length"):
            out[(name, column)] = BATCH.format(line)
        out[(name, "std division off")] = (
            f"Expected with `{flag}`: no division by a std. The flag is documented for GRPO "
            f"only; this estimator whitens regardless ({line})."
        )
    return out


def _found() -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    out.update(_whitened(WHITENED, "norm_adv_by_std_in_grpo=False"))
    out[("gae", "masked rows")] = (
        "Expected: 0 on a row with no response token. With values 0 and no valid token its "
        f"token-level advantage is whitened to a nonzero constant ({WHITENED['gae']}); the "
        "others do not move."
    )
    for name, line in NO_MASK.items():
        out[(name, "masked rows")] = (
            "Expected: a row with no response token (a fully rejected response) leaves its "
            "siblings' baseline alone. Its score 0 still enters the uid's statistics "
            f"(`scores = token_level_rewards.sum(dim=-1)` over every row, {line}); the row "
            "itself gets 0 only through `* response_mask` (verl PR 6452 is this class)."
        )
    for name, (line, lows) in IN_DTYPE.items():
        for low in lows:
            out[(name, f"low-precision rewards {low}")] = (
                "Expected: the float64 advantages of the same rewards up to the output's "
                f"rounding. The statistics are computed in {low} ({line}), which rounds a near "
                "tie's baseline away (OpenRLHF PR 1334 is this class)."
            )
    out[("grpo_vectorized", "ids relabelled")] = (
        "Expected: the same advantages whatever the uids. Integer uids are used as positions: "
        "`as_torch_index` returns them as they are (verl/utils/groupwise.py:130-132) and "
        "`group_mean_std` allocates max + 1 groups, so negative uids raise (verl PR 7150)."
    )
    out[("grpo_vectorized", "std division off")] = (
        "Expected with `algorithm.norm_adv_by_std_in_grpo=False`: r − the group mean. "
        "`compute_advantage` forwards the flag only to the `grpo` enum "
        "(verl/trainer/ppo/ray_trainer.py:235-245); `grpo_vectorized` reads its own keyword "
        f"(default True, {CORE}:340) and still divides (verl PR 7893)."
    )
    out[("opo", "masked rows")] = (
        "Expected: 0 on rows with no response token. A group whose rows all have length 0 "
        f"divides by `len_tensor.sum()` = 0 ({CORE}:682): NaN; a masked row inside a group "
        "has weight 0, so its siblings do not move."
    )
    out[("opo", "response length")] = (
        "Expected for a sequence baseline: lengths move nothing. OPO's baseline is the "
        f"length-weighted group mean by design ({CORE}:682); this row says so."
    )
    for column in ("ragged groups", "dropped groups"):
        out[("gpg", column)] = (
            "Expected: each group as alone. α = B / #(nonzero rewards) is taken over the whole "
            f"batch ({CORE}:810-811) by design, so every group's scale depends on the others."
        )
    for shown, file, lows in (
        ('GRPO, scale_rewards="group"', "grpo", BF16),
        ('GRPO, scale_rewards="batch"', "grpo", BF16),
        ('GRPO, scale_rewards="none"', "grpo", BF16),
        ("RLOO", "rloo", BOTH),
        ("RLOO, normalize_advantages=True", "rloo", BOTH),
    ):
        for low in lows:
            out[(shown, f"low-precision rewards {low}")] = (
                "Expected: the float64 advantages up to the output's rounding. The mean and std "
                f"are taken in the rewards' dtype ({TRL_LINE.format(file)}); TRL's rewards are "
                "float32 in practice, so this bites only a reward function that returns bf16."
            )
    return out


SKY = "skyrl/backends/skyrl_train/utils/ppo_utils.py"


def _found_skyrl() -> dict[tuple[str, str], str]:
    """The SkyRL 0.4.0 rows' "no"s, by the same classes as verl's."""
    out: dict[tuple[str, str], str] = {}
    whitened = {
        "SkyRL gae": f"{SKY}:1339 (`masked_whiten(advantages, response_mask)`)",
        "SkyRL reinforce++": f"{SKY}:1253 (`masked_whiten(returns, response_mask)`)",
    }
    out.update(_whitened(whitened, "grpo_norm_by_std=false"))
    out[("SkyRL gae", "masked rows")] = (
        "Expected: 0 on a row with no response token. With values 0 its token-level advantage "
        f"is whitened to a nonzero constant ({whitened['SkyRL gae']}); the others do not move."
    )
    for shown, line in (
        ("SkyRL grpo", f"{SKY}:1367"),
        ("SkyRL maxrl", f"{SKY}:1405"),
        ("SkyRL rloo", f"{SKY}:1284"),
    ):
        out[(shown, "masked rows")] = (
            "Expected: a row with no response token leaves its siblings' baseline alone. Its "
            f"score 0 still enters the uid's statistics (`scores = token_level_rewards.sum(dim="
            f"-1)` over every row, {line}); the row itself gets 0 only through the mask."
        )
        out[(shown, "low-precision rewards bfloat16")] = (
            "Expected: the float64 advantages up to the output's rounding. The group statistics "
            f"are taken in bfloat16 (from {line}: `torch.tensor` of the scores keeps their "
            "dtype), which rounds a near tie's baseline away."
        )
    out[("SkyRL maxrl", "std division off")] = (
        "Expected with `grpo_norm_by_std=false`: no division by a std. The flag is documented "
        "for GRPO only; MaxRL's (r − mean)/(mean + ε) is scale-invariant by design "
        f"({SKY}:1405-1430)."
    )
    return out


FOUND: dict[tuple[str, str], str] = {**_found(), **_found_skyrl()}
"""(estimator, column) -> what a maintainer needs to see the "no" for themselves; the measured
input and output follow each on the page."""


def verdicts(name: str, plain: Any = None, peer: str = "verl") -> dict[str, tuple[str, str]]:
    """{column: (verdict, evidence)} for ``peer``'s ``name`` through its own dispatch (verl's
    ``compute_advantage``, SkyRL's ``compute_advantages_and_returns``), or the ``[B, G]``
    callable ``plain`` (TRL's transcriptions)."""
    from advest.oracle.conventions import skyrl, verl
    from advest.oracle.conventions.harness import Guard
    from advest.oracle.conventions.rows import PlainRows, RowsAsPlain, row_call
    from advest.oracle.reports.report import _coupling, trainer_rows

    through = {"verl": verl.dispatched, "skyrl": skyrl.dispatched}[peer]
    rows = PlainRows(plain) if plain is not None else row_call(through(name), peer, Guard(), 2)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # the batch's allowance for an estimator whose groups are coupled, as check uses
            coupling = _coupling(RowsAsPlain(rows), N, torch.float32).verdict
        except Exception as error:  # out of scope: compute_advantage needs what it lacks
            return {"scope": ("out of scope", f"{type(error).__name__}: {error}")}
        found = trainer_rows(rows, N, torch.float32, None, 1, coupling.startswith("yes"))
    out = {}
    for f in found:
        key = f"{f.prop} {f.dtype}" if f.prop == "low-precision rewards" else f.prop
        out[key] = (f.verdict, f.evidence)
    return out


def section(names: list[str], trl: dict[str, tuple[str, Any]], strict: bool) -> list[str]:
    """The markdown lines of the section; ``strict``: ValueError where a "no" and ``FOUND``
    disagree."""
    head = "| estimator | " + " | ".join(COLUMNS) + " |"
    lines = [
        "## Trainers' data",
        "",
        "The rows of [the oracle on trainers' data](spec/oracle.md) at groups of up to "
        f"N = {N} (float32): verl's estimators reached through `compute_advantage` as its "
        "trainer calls it (`advest check verl:NAME --dispatch`: `norm_adv_by_std_in_grpo` and "
        "the algorithm config passed as the v1 trainer passes them), SkyRL 0.4.0's through "
        "`compute_advantages_and_returns` (`advest check skyrl:NAME`; computed in SkyRL's "
        "environment into `docs/results/skyrl_rows.json`), flat rows with string uids, a "
        "masked row one with no response token; TRL's conventions as `[B, G]`.",
        "",
        head,
        "|---" * (1 + len(COLUMNS)) + "|",
    ]
    notes, needed, scope = [], set(), []
    rows = [(n, verdicts(n)) for n in names]
    rows += [(f"SkyRL {n}", got) for n, got in skyrl_rows().items()]
    rows += [(shown, verdicts(key, plain)) for key, (shown, plain) in trl.items()]
    for shown, got in rows:
        if "scope" in got:
            scope.append(f"- `{shown}`: {got['scope'][1]}")
            continue
        unchecked = got.get("grouped rows", ("–", ""))[0]  # "–": a [B, G] convention
        cells = [got.get(c, (unchecked, ""))[0].replace("|", "/") for c in COLUMNS]
        lines.append(f"| `{shown}` | " + " | ".join(cells) + " |")
        for column, cell in zip(COLUMNS, cells, strict=True):
            if cell.split(":")[0] in ("no", "no effect"):
                needed.add((shown, column))
                evidence = got[column][1].replace("|", "/")
                why = FOUND.get((shown, column), "MISSING")
                notes.append(f"- `{shown}`, {column}: {why} Measured: {evidence}")
    if strict:
        missing = sorted(needed - set(FOUND))
        stale = sorted(set(FOUND) - needed)
        if missing or stale:
            raise ValueError(f"FOUND disagrees with the page: missing {missing}, stale {stale}")
    out_of_scope = ["Out of scope here (`compute_advantage` refuses the oracle's batch):", ""]
    return [
        *lines,
        "",
        'What each "no" means, for a maintainer:',
        "",
        *notes,
        "",
        *(out_of_scope + scope + [""] if scope else []),
    ]


SKYRL_ROWS = Path(__file__).resolve().parents[1] / "docs" / "results" / "skyrl_rows.json"


def skyrl_rows() -> dict[str, dict[str, tuple[str, str]]]:
    """SkyRL's rows as its environment computed them (``--skyrl``), read from the results file."""
    found = json.loads(SKYRL_ROWS.read_text())
    return {n: {c: (v[0], v[1]) for c, v in cols.items()} for n, cols in found.items()}


def skyrl_names() -> list[str]:
    """SkyRL's own registered estimators (advest's ``advest_*`` entries left out)."""
    from skyrl.backends.skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    return sorted(n for n in AdvantageEstimatorRegistry.list_available() if "advest" not in n)


def compute_skyrl() -> str:
    """The results file's text, computed now (SkyRL's environment)."""
    out = {n: verdicts(n, peer="skyrl") for n in skyrl_names()}
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    if "--skyrl" in sys.argv:  # in .nox/skyrl: write (or --check) docs/results/skyrl_rows.json
        text = compute_skyrl()
        if "--check" in sys.argv:
            return 0 if SKYRL_ROWS.read_text() == text else 1
        SKYRL_ROWS.write_text(text)
        return 0
    sys.path.insert(0, str(Path(__file__).parent))
    import peer_verdicts
    from peer_verdicts import TRL, TRL_NAMES, verl_names

    trl = {n: (TRL_NAMES[n], getattr(peer_verdicts, n)) for n in TRL}
    print("\n".join(section(verl_names(), trl, strict="--strict" in sys.argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
