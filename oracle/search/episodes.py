"""The searched properties of an episode estimator (``--family episode``): its domain is every
batch of 1..3 groups of 1..3 episodes, each of 1..3 turns of 1..3 policy tokens and 0..3
observation tokens, with turn rewards of ``values.group`` (ties, offsets, outliers) and anything
in the turn-reward slots an episode does not use (NaN, ±inf, huge): padding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from torch import Tensor

from ..inputs.values import garbage, group, shown, tensor_literal
from ..properties import episodes as ep
from ..properties.findings import Failure, Finding
from .database import register
from .engine import Budget, Searched, failure_of, quiet, search


@register
@dataclass(frozen=True)
class Episodes:
    """One drawn input: the groups (per episode: turn rewards, turn id per token, −1 for an
    observation token) and the value in unused turn-reward slots (None: 0)."""

    groups: tuple[tuple[tuple[tuple[float, ...], tuple[int, ...]], ...], ...]
    fill: float | None


@st.composite
def episode_batches(draw: st.DrawFn, g_lo: int) -> Episodes:
    G, B = draw(st.integers(g_lo, 3)), draw(st.integers(1, 3))
    groups = []
    for _ in range(B):
        turns = [draw(st.integers(1, 3)) for _ in range(G)]
        values = draw(group(sum(turns), False))
        eps, at = [], 0
        for n in turns:
            ids: list[int] = []
            for k in range(n):
                ids += [k] * draw(st.integers(1, 3)) + [-1] * draw(st.integers(0, 3))
            eps.append((tuple(values[at : at + n]), tuple(ids)))
            at += n
        groups.append(tuple(eps))
    return Episodes(tuple(groups), draw(st.one_of(st.none(), garbage())))


def as_groups(case: Episodes) -> list[ep.Group]:
    return [[(list(r), list(ids)) for r, ids in g] for g in case.groups]


def batch(case: Episodes, fill: bool = True) -> tuple[Tensor, Tensor]:
    """``turn_rewards [B, G, K]`` (unused slots hold ``case.fill``), ``turn_ids [B, G, T]``."""
    rewards, ids = ep.batch(as_groups(case))
    if fill and case.fill is not None:
        for b, g in enumerate(case.groups):
            for i, (r, _) in enumerate(g):
                rewards[b, i, len(r) :] = case.fill
    return rewards, ids


def _call(est: ep.EpisodeEstimator, case: Episodes, fill: bool = True) -> Tensor | str:
    rewards, ids = batch(case, fill)
    try:
        out = est(rewards, ids)
    except Exception as error:  # the estimator's own failure is the finding
        return f"{type(error).__name__}: {str(error)[:160]}"
    if not isinstance(out, Tensor) or out.shape != ids.shape:
        got = getattr(out, "shape", type(out).__name__)
        return f"returned {got}, not [B, G, T] = {tuple(ids.shape)}"
    return out.double()


def _snippet(case: Episodes) -> str:
    rewards, ids = batch(case)
    return f"turn_rewards = {tensor_literal(rewards)}; turn_ids = {tensor_literal(ids)}"


def _finite(est: ep.EpisodeEstimator) -> Callable[[Episodes], Failure | None]:
    def check(case: Episodes) -> Failure | None:
        a = _call(est, case)
        if isinstance(a, str):
            return Failure("raises", "advantages for every batch of episodes", a)
        policy = batch(case)[1] >= 0
        if not bool(a[policy].isfinite().all()):
            return Failure(
                "non-finite output", "finite advantages at policy tokens", shown(a[policy])
            )
        if bool((a[~policy] != 0).any()):
            return Failure(
                "not 0 off the policy tokens",
                "0 at observation and padding tokens",
                shown(a[~policy]),
            )
        return None

    return check


def _padding(est: ep.EpisodeEstimator) -> Callable[[Episodes], Failure | None]:
    def check(case: Episodes) -> Failure | None:
        if case.fill is None:
            return None
        a, clean = _call(est, case), _call(est, case, fill=False)
        if isinstance(a, str) or isinstance(clean, str) or not bool(clean.isfinite().all()):
            return None
        scale = max(float(clean.abs().max()), 1e-300)
        if bool(((a - clean).abs() <= ep.REL * scale).all()):
            return None
        return Failure(
            "an unused turn's reward slot reaches the advantages",
            f"the advantages with 0 in unused slots: {shown(clean)}",
            shown(a),
        )

    return check


def _explicit(
    est: ep.EpisodeEstimator, row: Callable[..., Any]
) -> Callable[[Episodes], Failure | None]:
    """A row of ``oracle.properties.episodes`` (``own_future``, ...) judged on the drawn groups."""

    def check(case: Episodes) -> Failure | None:
        try:
            f = row(est, as_groups(case))
        except Exception:  # raised on these groups: the finite-output search reports it
            return None
        return failure_of(f)

    return check


def properties(est: ep.EpisodeEstimator, findings: Sequence[Any]) -> list[Searched[Episodes]]:
    """Finite output (and 0 off policy tokens) always; unused slots ignored; and each explicit
    row that held: reads its own future, observation tokens, counts each episode once."""
    one = Episodes(((((1.0,), (0,)),),), None)
    with quiet():
        g_lo = 1 if not isinstance(_call(est, one), str) else 2
    strategy = episode_batches(g_lo)
    words = (
        f"1..3 groups of {g_lo}..3 episodes of 1..3 turns, observation tokens, NaN/inf in "
        "unused slots"
    )

    def item(prop: str, check: Callable[[Episodes], Failure | None]) -> Searched[Episodes]:
        return Searched(prop, strategy, check, _snippet, words)

    out = [item("finite output", _finite(est)), item("padding values ignored", _padding(est))]
    rows = {
        "reads its own future": ep.own_future,
        "observation tokens": ep.observation_tokens,
        "counts each episode once": ep.counts_once,
    }
    for prop, row in rows.items():
        if {f.verdict for f in findings if f.prop == prop} == {"yes"}:
            out.append(item(prop, _explicit(est, row)))
    return out


def searched(est: ep.EpisodeEstimator, findings: Sequence[Any], budget: Budget) -> list[Finding]:
    """The searched rows of the episode oracle, after its explicit ``findings``."""
    return [search(p, budget, "episode") for p in properties(est, findings)]
