"""The peer conventions an estimator can follow, and the checks of those settings: one module
for ``reference/`` and ``fast/`` (a settings check is not arithmetic, so the two need not be
written twice; like ``spec.hyperparams``, this imports neither implementation).

A convention names whose numbers an estimator reproduces: advest's own (the spec's pinned
conventions), or a peer's, with the version or commit whose code it follows (spec/group.md and
spec/maxk.md, "Peer conventions")."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "SKYRL_MAXRL_EPS",
    "Convention",
    "MaxrlConvention",
    "PasskConvention",
    "check_convention",
    "check_maxrl_convention",
    "check_passk_convention",
    "check_verl_whiten",
]

Convention = Literal["advest", "verl-0.9.1"]
"""The group estimators': advest's (spec/group.md), or verl 0.9.1's ``core_algos.py``."""

PasskConvention = Literal["advest", "passk_training@00474d7"]
"""``chen_passk``'s: advest's, or RUCAIBox/Passk_Training code/passk_adv.py at commit 00474d7."""


def check_convention(convention: object, name: str) -> Convention:
    """``convention`` of the group estimator ``name``; the message names the choices."""
    if convention not in ("advest", "verl-0.9.1"):
        raise ValueError(
            f"{name} needs convention in ('advest', 'verl-0.9.1'); got convention={convention!r}"
        )
    return "verl-0.9.1" if convention == "verl-0.9.1" else "advest"


def check_verl_whiten(name: str, eps: object, ddof: object) -> None:
    """verl's token whitening has its own fixed ε (1e-8, inside the root) and Bessel's
    correction: any other ``eps`` or ``ddof`` with ``convention='verl-0.9.1'`` is refused."""
    if eps != 1e-6 or ddof != 1:
        raise ValueError(
            f"{name} with convention='verl-0.9.1' whitens with verl's fixed ε = 1e-8 in "
            f"the root and Bessel's correction over tokens; got eps={eps!r}, ddof={ddof!r}"
        )


def check_passk_convention(convention: object, normalize: object) -> PasskConvention:
    """``chen_passk``'s ``convention``; the Passk_Training one always normalises."""
    if convention not in ("advest", "passk_training@00474d7"):
        raise ValueError(
            "chen_passk needs convention in ('advest', 'passk_training@00474d7'); "
            f"got convention={convention!r}"
        )
    if convention != "advest" and not normalize:
        raise ValueError(f"chen_passk with convention={convention!r} always normalizes")
    return "advest" if convention == "advest" else "passk_training@00474d7"


MaxrlConvention = Literal["advest", "skyrl-0.4.0"]
"""``maxrl``'s: advest's (no ε; a group of one follows the formula, so A = 0), or SkyRL 0.4.0's
``compute_maxrl_advantage`` (ε = 1e-6 added to r̄; a group of one keeps A = r)."""

SKYRL_MAXRL_EPS = 1e-6
"""SkyRL 0.4.0 ``compute_maxrl_advantage``: (r − r̄)/(r̄ + 1e-6), the double 1e-6."""


def check_maxrl_convention(convention: object) -> MaxrlConvention:
    """``maxrl``'s ``convention``; the message names the choices."""
    if convention not in ("advest", "skyrl-0.4.0"):
        raise ValueError(
            f"maxrl needs convention in ('advest', 'skyrl-0.4.0'); got convention={convention!r}"
        )
    return "advest" if convention == "advest" else "skyrl-0.4.0"
