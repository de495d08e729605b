"""Small autoregressive policies, enumerated exactly: the token oracle's ground truth.

A ``Tree`` is a tabular policy over two symbols and EOS (ids 0, 1 and ``EOS`` = 2): each prefix
without EOS shorter than ``T`` (a node) has its own distribution π(·|node) (rational), and each
complete response (ended by EOS, or cut at T tokens) a rational reward. The parameters are the
logits z of every node, so the score of token t is s_t = ∇_z log π(y_t|y_<t) = e_{y_t} − π(·|y_<t)
in that node's coordinates (``scores``) and ∇J = E[R Σ_t s_t] exactly (``gradient``).

``inputs`` turns groups of responses into the rollout fields an estimator may read, ``[B, G, T]``
(registry vocabulary: token_ids, mask, logprobs, sum_pi_squared, hidden, texts, offsets; and the
exact critic ``values`` V(y_<t) = E[R | y_<t] for verl's gae), in a chosen padding ``layout``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

import torch
from torch import Tensor

EOS = 2
V = 3
TEXT = {0: "7", 1: "+", EOS: ""}
"""What each token reads as in ``texts``: a digit, an operator, and EOS as no text (so Numca
sees numbers 7, 77, 777 end where a '+' or the end of the text ends them)."""

Seq = tuple[int, ...]
Layout = Literal["right", "left", "holes", "wide"]
"""Where a response's tokens sit in its row: from column 0 (``right`` padding), at the end of
the row (``left``), in every other column (``holes`` in the mask), or right-padded with two extra
columns (``wide``)."""
GARBAGE = {"token_ids": 1, "logprobs": -0.5, "sum_pi_squared": 0.5, "hidden": 3.0, "values": 5.0}
"""What ``inputs(..., garbage=True)`` writes at padding: finite values no estimator may read."""


@dataclass(frozen=True)
class Tree:
    """π(·|node) over V tokens for every node (a prefix without EOS, shorter than ``T``), and a
    reward for every complete response."""

    T: int
    pi: dict[Seq, tuple[Fraction, ...]]
    reward: dict[Seq, Fraction]

    @cached_property
    def responses(self) -> list[tuple[Seq, Fraction]]:
        """Every complete response with its probability, in a fixed order."""
        out: list[tuple[Seq, Fraction]] = []

        def grow(y: Seq, p: Fraction) -> None:
            if len(y) == self.T or (y and y[-1] == EOS):
                out.append((y, p))
                return
            for v in range(V):
                grow((*y, v), p * self.pi[y][v])

        grow((), Fraction(1))
        return out

    @cached_property
    def nodes(self) -> list[Seq]:
        """Every prefix with its own π (shortest first): the policy's parameter blocks."""
        return sorted(self.pi, key=lambda y: (len(y), y))

    def scores(self) -> Tensor:
        """``[Y, T, C]`` float64: s_t of every response (0 past its end), C = nodes × V."""
        column = {node: j for j, node in enumerate(self.nodes)}
        out = torch.zeros(len(self.responses), self.T, len(self.nodes) * V, dtype=torch.float64)
        for k, (y, _) in enumerate(self.responses):
            for t in range(len(y)):
                base = column[y[:t]] * V
                for v in range(V):
                    out[k, t, base + v] = float((v == y[t]) - self.pi[y[:t]][v])
        return out

    def gradient(self) -> list[Fraction]:
        """∇J = Σ_y π(y) R(y) Σ_t s_t(y), exactly, over the C = nodes × V logits."""
        column = {node: j for j, node in enumerate(self.nodes)}
        grad = [Fraction(0)] * (len(self.nodes) * V)
        for y, p in self.responses:
            for t in range(len(y)):
                for v in range(V):
                    grad[column[y[:t]] * V + v] += (
                        p * self.reward[y] * ((v == y[t]) - self.pi[y[:t]][v])
                    )
        return grad

    def value(self, prefix: Seq) -> Fraction:
        """V(prefix) = E[R | the response starts with prefix] (the exact critic)."""
        hits = [(p, self.reward[y]) for y, p in self.responses if y[: len(prefix)] == prefix]
        mass = sum((p for p, _ in hits), Fraction(0))
        return sum((p * r for p, r in hits), Fraction(0)) / mass

    def prob(self, y: Seq, t: int) -> Fraction:
        """π(y_t | y_<t), for any symbol sequence (every prefix without EOS is a node)."""
        return self.pi[y[:t]][y[t]]


def _tree(T: int, weights: dict[Seq, tuple[int, int, int]], rewards: list[Fraction]) -> Tree:
    pi = {node: tuple(Fraction(w, sum(ws)) for w in ws) for node, ws in weights.items()}
    stub = Tree(T, pi, {})
    return Tree(T, pi, dict(zip((y for y, _ in stub.responses), rewards, strict=True)))


Q = Fraction
TREES: list[Tree] = [
    # T = 2: responses (0,0) (0,1) (0,EOS) (1,0) (1,1) (1,EOS) (EOS,), rewards on a 1/4 grid
    _tree(
        2,
        {(): (2, 1, 1), (0,): (1, 1, 1), (1,): (3, 1, 1)},
        [Q(1), Q(0), Q(1, 2), Q(-1, 4), Q(3, 2), Q(0), Q(1, 4)],
    ),
    _tree(
        2,
        {(): (1, 2, 2), (0,): (1, 3, 1), (1,): (1, 1, 2)},
        [Q(0), Q(1), Q(1), Q(1, 2), Q(0), Q(-1, 2), Q(1)],
    ),
    # T = 3: 15 responses
    _tree(
        3,
        {
            (): (1, 1, 1),
            (0,): (2, 1, 1),
            (1,): (1, 2, 1),
            (0, 0): (1, 1, 2),
            (0, 1): (3, 1, 1),
            (1, 0): (1, 1, 1),
            (1, 1): (1, 2, 1),
        },
        [Q(k % 5, 4) - Q(1, 4) for k in range(15)],
    ),
]
"""The trees every check runs on: unbiasedness is judged on all three (one c for all), the other
checks on groups drawn from them."""


def columns(length: int, T: int, layout: Layout) -> list[int]:
    """The columns a response of ``length`` tokens occupies in a row of ``width(T, layout)``."""
    if layout == "left":
        return list(range(T - length, T))
    if layout == "holes":
        return list(range(0, 2 * length, 2))
    return list(range(length))


def width(T: int, layout: Layout) -> int:
    """The row width a ``layout`` needs for responses of up to ``T`` tokens."""
    return {"right": T, "left": T, "holes": 2 * T, "wide": T + 2}[layout]


def inputs(
    tree: Tree,
    groups: list[list[Seq]],
    rewards: Tensor,
    layout: Layout = "right",
    garbage: bool = False,
) -> dict[str, Any]:
    """Every rollout field of ``groups`` (B groups of G responses, any symbol sequences of at
    most ``tree.T`` tokens, empty allowed) with ``rewards`` ``[B, G]`` (float64, held apart from
    the responses so that checks can move one without the other). Returns token_ids, mask,
    logprobs, sum_pi_squared, values ``[B, G, W]``, hidden ``[B, G, W, D]`` (a one-hot of the
    prefix y_≤t: a causal state), texts ``[B][G]``, offsets ``[B, G, W, 2]`` and rewards, W =
    ``width(tree.T, layout)``. Padding holds 0, or ``GARBAGE`` when ``garbage``."""
    B, G = len(groups), len(groups[0])
    rows: dict[Seq, dict[str, Tensor]] = {}
    index = []
    for group in groups:
        for y in group:
            if y not in rows:
                rows[y] = _row(tree, y, layout, garbage)
            index.append(y)
    out: dict[str, Any] = {
        name: torch.stack([rows[y][name] for y in index]).reshape(B, G, *rows[index[0]][name].shape)
        for name in rows[index[0]]
    }
    out["texts"] = [["".join(TEXT[v] for v in y) for y in group] for group in groups]
    out["rewards"] = rewards.to(torch.float64)
    return out


def _row(tree: Tree, y: Seq, layout: Layout, garbage: bool) -> dict[str, Tensor]:
    """One response's row of every tensor field, ``[W]`` (hidden ``[W, D]``, offsets ``[W, 2]``)."""
    Wd = width(tree.T, layout)
    prefixes = _prefix_index(tree.T)
    fill = GARBAGE if garbage else dict.fromkeys(GARBAGE, 0)
    row = {
        "token_ids": torch.full((Wd,), int(fill["token_ids"]), dtype=torch.int64),
        "mask": torch.zeros(Wd, dtype=torch.bool),
        "hidden": torch.full((Wd, len(prefixes)), float(fill["hidden"]), dtype=torch.float64),
        "offsets": torch.zeros(Wd, 2, dtype=torch.int64),
    }
    for name in ("logprobs", "sum_pi_squared", "values"):
        row[name] = torch.full((Wd,), float(fill[name]), dtype=torch.float64)
    chars = 0
    for t, c in enumerate(columns(len(y), tree.T, layout)):
        node = tree.pi[y[:t]]
        row["token_ids"][c] = y[t]
        row["mask"][c] = True
        row["logprobs"][c] = math.log(tree.prob(y, t))
        row["sum_pi_squared"][c] = float(sum((p * p for p in node), Fraction(0)))
        row["values"][c] = float(tree.value(y[:t]))
        row["hidden"][c] = 0.0
        row["hidden"][c, prefixes[y[: t + 1]]] = 1.0
        row["offsets"][c] = torch.tensor([chars, chars + len(TEXT[y[t]])])
        chars += len(TEXT[y[t]])
    return row


@functools.cache
def _prefix_index(T: int) -> dict[Seq, int]:
    return {y: j for j, y in enumerate(_all_prefixes(T))}


def _all_prefixes(T: int) -> list[Seq]:
    """Every symbol sequence of 1..T tokens with EOS only last (the hidden states' index)."""
    out: list[Seq] = []
    frontier: list[Seq] = [()]
    for _ in range(T):
        frontier = [(*y, v) for y in frontier if not (y and y[-1] == EOS) for v in range(V)]
        out += frontier
    return out


def enumerate_groups(tree: Tree, G: int) -> tuple[list[list[Seq]], Tensor, Tensor, Tensor]:
    """Every group of G i.i.d. responses: (groups, rewards ``[B, G]``, their probability ``[B]``,
    each rollout's response index ``[B, G]``), B = Y^G."""
    Y = len(tree.responses)
    index = torch.cartesian_prod(*[torch.arange(Y)] * G).reshape(-1, G)  # [Y^G, G]
    p = torch.tensor([float(p) for _, p in tree.responses], dtype=torch.float64)
    r = torch.tensor([float(tree.reward[y]) for y, _ in tree.responses], dtype=torch.float64)
    groups = [[tree.responses[int(k)][0] for k in row] for row in index]
    return groups, r[index], p[index].prod(-1), index
