"""What each estimator of the real-model experiment is for, and where the page "Choosing an
estimator" finds its proofs (``docs/theorems.md``) and the peer settings it reproduces
(``docs/integrations.md``). Facts about the estimators, not measurements: every number on the
page comes from ``docs/results/``."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Estimator:
    """What an estimator is for (the facts the results are read against)."""

    optimises: str
    source: str
    passk: bool = False  # targets pass@K / max@K by construction
    proof_terms: tuple[str, ...] = ()  # Coq theorem names that concern it
    proof_not: tuple[str, ...] = ()  # theorem names that match a term but concern another


ESTIMATORS: dict[str, Estimator] = {
    "grpo": Estimator(
        "pass@1 (the mean reward), each group divided by its std",
        "Shao et al., arXiv:2402.03300",
        proof_terms=("grpo",),
    ),
    "rloo": Estimator(
        "pass@1 (the mean reward), leave-one-out baseline",
        "Ahmadian et al., arXiv:2402.14740",
        proof_terms=("rloo",),
    ),
    "dr_grpo": Estimator(
        "pass@1 (the mean reward), no std division, a constant length normaliser",
        "Liu et al., arXiv:2503.20783",
    ),
    "maxrl": Estimator(
        "Σ_k (1/k)·pass@k (MaxRL's objective, the p-normalised form trainers ship)",
        "Tajwar et al., arXiv:2602.02710",
        proof_terms=("maxrl",),
        proof_not=("maxrl_unbiased",),
    ),
    "maxpo": Estimator(
        "max@K (= pass@K on 0/1 rewards), EI minus a leave-two-out baseline",
        "Takashiro et al., arXiv:2606.06080",
        True,
        ("maxpo",),
    ),
    "pkpo_sloo": Estimator(
        "pass@K / max@K, PKPO's leave-one-out transform",
        "Walder & Karkhanis, arXiv:2505.15201",
        True,
        ("pkpo_sloo",),
        ("pkpo_sloo_minus_one",),
    ),
    "chen_passk": Estimator(
        "pass@K on 0/1 rewards, the analytical advantage normalised by its std",
        "Chen et al., arXiv:2508.10751",
        True,
        ("chen",),
    ),
    "maxpo_k8": Estimator(
        "max@8 (maxpo at K = 8, G = 16)", "Takashiro et al., arXiv:2606.06080", True, ("maxpo",)
    ),
    "pkpo_sloo_k8": Estimator(
        "pass@8 (pkpo_sloo at K = 8, G = 16)",
        "Walder & Karkhanis, arXiv:2505.15201",
        True,
        ("pkpo_sloo",),
        ("pkpo_sloo_minus_one",),
    ),
    "ktae": Estimator(
        "pass@1, GRPO's advantage redistributed over tokens by key-token statistics",
        "Sun et al., arXiv:2505.16826",
    ),
    "hista": Estimator(
        "pass@1 with a per-token state-value baseline from hidden-state similarity",
        "Chen et al., arXiv:2605.29782",
    ),
    "numca": Estimator(
        "pass@1 with a per-token baseline at the numbers in the response (milestones)",
        "Chen et al., arXiv:2605.29782",
    ),
    "kae": Estimator(
        "pass@1 with a kernel baseline over the prompt's earlier iterations",
        "Gong et al., arXiv:2604.28005",
        proof_terms=("kae",),
    ),
    "covariance_weights": Estimator(
        "pass@1 (GRPO's advantages) reweighted by the log-prob/advantage covariance, "
        "to keep entropy",
        "Wang et al., arXiv:2605.11538",
    ),
}
"""Arm → what it optimises, where it comes from, and the Coq theorem names that concern it."""


READS_MORE = ("ktae", "hista", "numca", "kae", "covariance_weights")
"""Arms whose estimator reads more than the rewards (tokens, hidden states, log-probs, history)."""


def theorems(text: str) -> list[tuple[str, str]]:
    """``docs/theorems.md`` → (Coq theorem name, statement) for every row of its tables."""
    rows = re.findall(r"^\| \[`([A-Za-z]+\.\w+)`\]\([^)]*\) \| (.*?) \| ", text, re.M)
    return [(name, statement) for name, statement in rows]


def proofs(arm: str, rows: list[tuple[str, str]]) -> list[str]:
    e = ESTIMATORS[arm]
    out = []
    for name, _ in rows:
        short = name.split(".")[1]
        if any(t in short for t in e.proof_terms) and not any(t in short for t in e.proof_not):
            out.append(name)
    return out


def peers(arm: str, text: str) -> list[str]:
    """Rows of ``docs/integrations.md``'s peer tables whose advest side names ``arm``'s
    estimator (``name(...)``, or `` `name` `` as the setting's counterpart)."""
    name = arm.removesuffix("_k8")
    rows = re.findall(r"^\| (.+?) \| (.+?) \|", text, re.M)
    return [
        f"{left} → {right}"
        for left, right in rows
        if f"`{name}(" in right or right.startswith(f"`{name}`")
    ]


def unproved(arm: str, text: str) -> str | None:
    """The sentences of ``docs/theorems.md``'s "Still tested, not proved" paragraph that name
    ``arm`` (another estimator's caveat in the same paragraph is left out), if any."""
    match = re.search(r"^Still tested, not proved.*?(?:\n\n|\Z)", text, re.M | re.S)
    if match is None:
        return None
    # a sentence ends at a full stop before a capital or a backquoted path
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z`])", " ".join(match.group(0).split()))
    said = [t for t in sentences if arm.lower() in t.lower()]
    return " ".join(said) or None
