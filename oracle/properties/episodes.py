"""The episode oracle: judges an estimator of multi-turn episodes, called as the "episode" kind
is (``fn(turn_rewards [B, G, K], turn_ids [B, G, T]) -> [B, G, T]``; spec/episode.md).

Rows: unbiased, by exact enumeration of small episode trees whose length the policy chooses
(``episode_trees``); reads its own future (an episode's earlier turns move when its own later
turns change but their return does not: the verl #7244 class); observation tokens (adding or
removing them moves no policy token's advantage, and each gets exactly 0); counts each episode
once (an episode taking one more, reward-free turn moves no other episode: agent-lightning #445);
one-turn episodes (the single-turn estimator it declares, on the episodes' returns).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from fractions import Fraction

import torch
from torch import Tensor

from ..inputs.episode_trees import (
    WORLDS,
    Episode,
    Point,
    World,
    episodes,
    objective_gradient,
    tokens,
)
from .findings import Finding

EpisodeEstimator = Callable[[Tensor, Tensor], Tensor]
Group = list[tuple[list[float], list[int]]]
"""One group: per episode, (turn rewards, turn ids per response token)."""
REL = 1e-9
"""float64: a move or a bias smaller than this fraction of the terms' size is rounding."""


def batch(groups: Sequence[Group]) -> tuple[Tensor, Tensor]:
    """Groups -> ``turn_rewards [B, G, K]`` float64 and ``turn_ids [B, G, T]`` (−1 padded)."""
    K = max(len(r) for g in groups for r, _ in g)
    T = max(len(ids) for g in groups for _, ids in g)
    rewards = torch.zeros(len(groups), len(groups[0]), K, dtype=torch.float64)
    ids = torch.full((len(groups), len(groups[0]), T), -1, dtype=torch.int64)
    for b, g in enumerate(groups):
        for i, (r, t) in enumerate(g):
            rewards[b, i, : len(r)] = torch.tensor(r, dtype=torch.float64)
            ids[b, i, : len(t)] = torch.tensor(t, dtype=torch.int64)
    return rewards, ids


def _call(est: EpisodeEstimator, groups: Sequence[Group]) -> Tensor:
    rewards, ids = batch(groups)
    out = est(rewards, ids)
    if not isinstance(out, Tensor) or out.shape != ids.shape:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out)
        raise ValueError(f"an episode estimator returns [B, G, T] = {tuple(ids.shape)}; got {got}")
    return out.to(torch.float64)


# ----------------------------------------------------------------------------- unbiased
Key = tuple[Point, int]


def expected_gradient(
    est: EpisodeEstimator, world: World, n: int
) -> tuple[dict[Key, float], dict[Key, float], float]:
    """(E[(1/N) Σ_i Σ_t A_{i,t} score_t], ∇J, the size Σ|terms|) over every group of ``n``
    episodes of ``world``, in one call of ``est``."""
    eps = list(episodes(world))
    rows = [(e, *tokens(e)) for e in eps]
    combos = list(itertools.product(range(len(eps)), repeat=n))
    groups = [[([float(r) for r in eps[j].turn_rewards], rows[j][1]) for j in c] for c in combos]
    adv = _call(est, groups)
    grad: dict[Key, float] = {}
    size = 0.0
    for b, combo in enumerate(combos):
        p = _probability([eps[j] for j in combo]) / n
        for i, j in enumerate(combo):
            policy = [t for t, x in enumerate(rows[j][1]) if x >= 0]
            for k, (token_score, end_score) in enumerate(eps[j].scores):
                for t, score in ((policy[2 * k], token_score), (policy[2 * k + 1], end_score)):
                    a = float(adv[b, i, t])
                    for key, s in score.items():
                        grad[key] = grad.get(key, 0.0) + p * a * float(s)
                        size += abs(p * a * float(s))
    truth = {key: float(v) for key, v in objective_gradient(world).items()}
    return grad, truth, size


def _probability(group: Sequence[Episode]) -> float:
    out = Fraction(1)
    for e in group:
        out *= e.probability
    return float(out)


def unbiased(est: EpisodeEstimator, n: int = 2, worlds: Sequence[World] = WORLDS) -> Finding:
    """E[(1/N) Σ_i ĝ_i] = ∇J on every world (episodes whose length the policy chooses)."""
    worst: tuple[float, str, str] = (0.0, "", "")
    for world in worlds:
        got, truth, size = expected_gradient(est, world, n)
        for key in sorted(set(got) | set(truth), key=repr):  # the first of equal gaps, always
            gap = got.get(key, 0.0) - truth.get(key, 0.0)
            if abs(gap) > REL * max(size, 1e-300) and abs(gap) > abs(worst[0]):
                worst = (gap, world.name, _describe(key))
    if not worst[1]:
        return Finding("unbiased", "yes", f"E[(1/N)Σ ĝ] = ∇J on {len(worlds)} episode trees, "
                       f"N = {n} (every group enumerated)", n=n)  # fmt: skip
    gap, place, where = worst
    return Finding("unbiased", "no: biased", f"E[ĝ] − ∇J = {gap:+.4g} at {where} ({place})",
                   n=n, data={"gap": gap, "world": place, "at": where})  # fmt: skip


def _describe(key: Key) -> str:
    point, option = key
    kind, history, token = point
    turn = len(history)
    if kind == "stop":
        return f"turn {turn}'s {'go on' if option else 'stop'} decision (after token {token})"
    return f"turn {turn}'s token {option}"


# ----------------------------------------------------------------------------- metamorphic rows
def random_groups(seed: int, count: int = 24, G: int = 4) -> list[Group]:
    """Groups of G episodes of 1 to 3 turns, each turn 1 to 3 policy tokens then 0 to 3
    observation tokens; rewards from a small set with ties, zeros and negatives."""
    rng = random.Random(seed)
    groups = []
    for _ in range(count):
        group = []
        for _ in range(G):
            turns = rng.randint(1, 3)
            rewards = [rng.choice([-1.0, -0.5, 0.0, 0.25, 1.0, 2.0]) for _ in range(turns)]
            ids: list[int] = []
            for k in range(turns):
                ids += [k] * rng.randint(1, 3) + [-1] * rng.randint(0, 3)
            group.append((rewards, ids))
        groups.append(group)
    return groups


Move = tuple[float, str]


def _moved(a: Tensor, b: Tensor, at: list[tuple[int, int, int, int]], where: str) -> Move:
    """The largest |a − b| over the listed (batch, episode, position in a, position in b), as a
    fraction of the outputs' size, with its place."""
    worst: Move = (0.0, "")
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-300)
    for g, i, s, t in at:
        gap = abs(float(a[g, i, s]) - float(b[g, i, t])) / scale
        if gap > REL and gap > worst[0]:
            worst = (gap, f"group {g}, episode {i}, {where} at token {s}")
    return worst


def _policy(ids: list[int]) -> list[int]:
    return [t for t, x in enumerate(ids) if x >= 0]


def _extra_turn(groups: list[Group], i: int) -> list[Group]:
    """Episode i of each group takes one more turn with reward 0 (observation tokens, then two
    policy tokens): every return it had is unchanged."""
    out = []
    for g in groups:
        r, ids = g[i]
        turns = max(ids) + 1
        longer = ([*r[:turns], 0.0], [*ids, -1, -1, turns, turns])
        out.append([longer if j == i else e for j, e in enumerate(g)])
    return out


def own_future(est: EpisodeEstimator, groups: list[Group]) -> Finding:
    """An episode's advantages do not move when its own later turns change and its returns do
    not: one more reward-free turn, or two later turns' rewards swapped."""
    base = _call(est, groups)
    worst: Move = (0.0, "")
    for i in range(len(groups[0])):
        longer = _call(est, _extra_turn(groups, i))
        at = [(b, i, t, t) for b, g in enumerate(groups) for t in _policy(g[i][1])]
        worst = max(worst, _moved(base, longer, at, "one more turn taken later"))
        swapped = [[(r[:1] + r[2:3] + r[1:2] + r[3:], ids) if j == i and len(r) >= 3 else (r, ids)
                    for j, (r, ids) in enumerate(g)] for g in groups]  # fmt: skip
        changed = _call(est, swapped)
        at = [(b, i, t, t) for b, g in enumerate(groups) for t, x in enumerate(g[i][1]) if x == 0]
        worst = max(worst, _moved(base, changed, at, "turns 1 and 2 swapped later"))
    return _finding("reads its own future", worst, "no: its baseline reads its own later turns")


def counts_once(est: EpisodeEstimator, groups: list[Group]) -> Finding:
    """One more reward-free turn in one episode moves no other episode's advantage: a group
    statistic counts episodes, not turns."""
    base = _call(est, groups)
    worst: Move = (0.0, "")
    for i in range(len(groups[0])):
        longer = _call(est, _extra_turn(groups, i))
        at = [(b, j, t, t) for b, g in enumerate(groups) for j in range(len(g)) if j != i
              for t in range(len(g[j][1]))]  # fmt: skip
        worst = max(worst, _moved(base, longer, at, f"episode {i} took one more turn; moved"))
    return _finding("counts each episode once", worst, "no: an episode with more turns weighs more")


def observation_tokens(est: EpisodeEstimator, groups: list[Group]) -> Finding:
    """Two more observation tokens after each episode's first turn, and its last observation
    token removed, move no policy token's advantage; every observation token gets exactly 0."""
    base = _call(est, groups)
    nonzero = [(b, i, t) for b, g in enumerate(groups) for i, (_, ids) in enumerate(g)
               for t, x in enumerate(ids) if x < 0 and float(base[b, i, t]) != 0.0]  # fmt: skip
    if nonzero:
        b, i, t = nonzero[0]
        return Finding("observation tokens", "no: an observation token has an advantage",
                       f"group {b}, episode {i}, token {t}: {float(base[b, i, t]):.4g} "
                       f"({len(nonzero)} such tokens)")  # fmt: skip
    changed, at = [], []
    for b, g in enumerate(groups):
        row = []
        for i, (r, ids) in enumerate(g):
            first = ids.index(-1) if -1 in ids else len(ids)
            edited = [*ids[:first], -1, -1, *ids[first:]]
            last = max((t for t, x in enumerate(edited) if x < 0), default=None)
            if last is not None and last > first + 1:
                del edited[last]
            row.append((r, edited))
            at += list(zip([b] * len(ids), [i] * len(ids), _policy(ids), _policy(edited),
                           strict=False))  # fmt: skip
        changed.append(row)
    worst = _moved(base, _call(est, changed), at, "observation tokens added and removed; moved")
    return _finding("observation tokens", worst, "no: observation tokens move advantages")


def one_turn(est: EpisodeEstimator, single: Callable[[Tensor], Tensor] | None,
             name: str | None, seed: int = 0) -> Finding:  # fmt: skip
    """One-turn episodes: every policy token of episode i gets ``single(returns)[i]``."""
    if single is None:
        return Finding("one-turn episodes", "not compared", "no single-turn estimator named")
    groups = [[([r], [0] * n + [-1] * m) for r, n, m in g] for g in _one_turn_rows(seed)]
    got = _call(est, groups)
    returns = torch.tensor([[r[0] for r, _ in g] for g in groups], dtype=torch.float64)
    want = single(returns)
    at = [(b, i, t, 0) for b, g in enumerate(groups) for i, (_, ids) in enumerate(g)
          for t in _policy(ids)]  # fmt: skip
    worst = _moved(got, want.unsqueeze(-1), at, f"differs from {name}")
    return _finding("one-turn episodes", worst, f"no: differs from {name} on one-turn episodes",
                    yes=f"equals {name} on the returns")  # fmt: skip


def _one_turn_rows(seed: int) -> list[list[tuple[float, int, int]]]:
    rng = random.Random(seed)
    return [[(rng.choice([-1.0, 0.0, 0.5, 1.0, 3.0]), rng.randint(1, 3), rng.randint(0, 2))
             for _ in range(4)] for _ in range(16)]  # fmt: skip


def _finding(prop: str, worst: Move, no: str, yes: str = "nothing moved") -> Finding:
    if not worst[1]:
        return Finding(prop, "yes", yes)
    return Finding(prop, no, f"{worst[1]} by {worst[0]:.3g} of max|A|", data={"at": worst[1]})


def report(est: EpisodeEstimator, single: Callable[[Tensor], Tensor] | None = None,
           name: str | None = None, seed: int = 0) -> list[Finding]:  # fmt: skip
    """Every row of the episode oracle for ``est``."""
    groups = random_groups(seed)
    return [
        unbiased(est),
        own_future(est, groups),
        observation_tokens(est, groups),
        counts_once(est, groups),
        one_turn(est, single, name, seed),
    ]
