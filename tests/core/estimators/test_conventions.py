"""Peer conventions reproduced by advest options, compared with the peer's own code.

verl's (``convention="verl-0.9.1"`` on ``grpo`` and ``reinforce_pp``) run inside verl's
environment (tests/verl/check_verl.py); TRL's GRPO formula runs through TRL's trainer in
tests/core/training/test_trl.py. Here: the paper code of Chen et al., RUCAIBox/Passk_Training, which
is not pip-installable, so its advantage function is transcribed below from ``code/passk_adv.py`` at
commit 00474d78dc80afd0a3dde1bda476efec32db34ed, line for line.
"""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import torch
from scipy.special import comb

from advest import fast
from advest.reference import maxk as reference_maxk
from advest.spec import conventions


def passk_training_calc_adv(val: np.ndarray, k: int) -> np.ndarray:
    """``calc_adv`` of RUCAIBox/Passk_Training code/passk_adv.py @ 00474d7, verbatim."""
    c = len(np.where(val == 1)[0])
    n = len(val)
    rho = 1 - comb(n - c, k) / comb(n, k)
    sigma = np.sqrt(rho * (1 - rho))
    adv_p = (1 - rho) / (sigma + 1e-6)
    adv_n = (1 - rho - comb(n - c - 1, k - 1) / comb(n - 1, k - 1)) / (sigma + 1e-6)
    new_val = np.where(val == 1, adv_p, val)
    new_val = np.where(new_val == 0, adv_n, new_val)
    return new_val


@pytest.mark.parametrize("n", range(2, 9))
def test_chen_passk_passk_training_convention_reproduces_the_paper_code(n: int) -> None:
    """Every binary group of size n, every K <= n − 1 (advest's domain), float64."""
    groups = np.array(list(product([0.0, 1.0], repeat=n)))  # [2^n, n]
    rewards = torch.tensor(groups)
    convention = "passk_training@00474d7"
    for k in range(1, n):
        theirs = torch.tensor(np.stack([passk_training_calc_adv(g, k) for g in groups]))
        ours = fast.maxk.chen_passk(rewards, k, convention=convention)
        # theirs: scipy's float binomials; ours: lgamma ratios: float64 rounding apart
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
        exact = [reference_maxk.chen_passk(list(g), k, convention=convention) for g in groups]
        torch.testing.assert_close(
            torch.tensor([[float(a) for a in row] for row in exact], dtype=torch.float64),
            theirs,
            rtol=1e-12,
            atol=1e-12,
        )
        # and advest's own convention (σ without ε) differs from it wherever σ > 0
        plain = fast.maxk.chen_passk(rewards, k)
        moved = (plain - theirs).abs() > 1e-9
        assert bool(moved.any()) == bool((plain != 0).any())


def test_the_passk_training_convention_needs_normalize_and_a_known_name() -> None:
    r = torch.tensor([[0.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match="always normalizes"):
        fast.maxk.chen_passk(r, 1, normalize=False, convention="passk_training@00474d7")
    with pytest.raises(ValueError, match="convention"):
        fast.maxk.chen_passk(r, 1, convention="passk_training")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="convention"):
        fast.group.grpo(r, convention="verl")  # type: ignore[arg-type]


def test_reinforce_pp_verl_convention_needs_lengths_and_keeps_verls_constants() -> None:
    r = torch.tensor([[0.0, 1.0], [0.5, 1.0]])
    lengths = torch.tensor([[1, 2], [3, 1]])
    with pytest.raises(ValueError, match="pass lengths"):
        fast.group.reinforce_pp(r, convention="verl-0.9.1")
    with pytest.raises(ValueError, match="eps"):
        fast.group.reinforce_pp(r, lengths, eps=1e-4, convention="verl-0.9.1")
    with pytest.raises(ValueError, match="only with convention"):
        fast.group.reinforce_pp(r, lengths)
    with pytest.raises(ValueError, match="lengths must be >= 1; group 1"):
        fast.group.reinforce_pp(r, torch.tensor([[1, 2], [0, 1]]), convention="verl-0.9.1")


@pytest.mark.parametrize("G", [1, 2, 5])
def test_reinforce_pp_verl_convention_fast_equals_reference(G: int) -> None:
    """The token-weighted whitening of verl's REINFORCE++ (tests/verl/ checks it against verl
    itself, in verl's environment): fast against the exact reference, a constant group and a
    group of one included."""
    from advest.reference import group as reference_group

    gen = torch.Generator().manual_seed(G)
    r = torch.rand(3, G, generator=gen, dtype=torch.float64)
    r[1] = 0.5  # a constant group: exact zeros before whitening (G > 1)
    lengths = torch.randint(1, 6, (3, G), generator=gen)
    want = reference_group.reinforce_pp(r.tolist(), lengths.tolist(), convention="verl-0.9.1")
    got = fast.group.reinforce_pp(r, lengths, convention="verl-0.9.1")
    flat = [float(x) for row in want for x in row]
    assert got.flatten().tolist() == pytest.approx(flat, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("eps", "ddof"), [(1e-4, 1), (1e-6, 0), (1e-6, 2), (0.0, 1)])
def test_verls_whitening_refuses_any_other_eps_or_ddof(eps: float, ddof: int) -> None:
    from advest.spec.conventions import check_verl_whiten

    check_verl_whiten("reinforce_pp", 1e-6, 1)  # verl's own: accepted
    with pytest.raises(ValueError, match="whitens with verl's fixed"):
        check_verl_whiten("reinforce_pp", eps, ddof)


def test_each_convention_check_returns_the_convention_it_was_given() -> None:
    """The checks return the convention as its Literal type, for callers that branch on it."""
    for name in ("advest", "verl-0.9.1"):
        assert conventions.check_convention(name, "grpo") == name
    for name in ("advest", "passk_training@00474d7"):
        assert conventions.check_passk_convention(name, True) == name
    for name in ("advest", "skyrl-0.4.0"):
        assert conventions.check_maxrl_convention(name) == name
