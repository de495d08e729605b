"""``advest demo``: the max@K estimators side by side on one group, exact and fast."""

from __future__ import annotations

from fractions import Fraction

import torch

import advest.fast.maxk
import advest.reference.maxk  # noqa: F401  (binds the submodule used as reference.maxk)
from advest import fast, reference
from advest.fast import registry
from advest.fast.calling import plan


def _fmt(x: Fraction) -> str:
    return str(x) if x.denominator <= 999 else f"{float(x):.6g}"


def run(rewards: list[float], k: int) -> None:
    n = len(rewards)
    if not 1 <= n <= 10:
        raise ValueError(
            f"--rewards: the exact reference enumerates subsets; give 1 to 10; got {n}"
        )
    r = torch.tensor([rewards], dtype=torch.float64)
    print(f"rewards r = {rewards}   (N = {n}, K = {k})\n")
    print("exact reference (Fractions) / fast float64; * marks an estimator whose domain")
    print("excludes this K, N\n")
    header = (
        f"{'estimator':<22}" + "".join(f"{f'r={x:g}':>12}" for x in rewards) + "  max|fast−exact|"
    )
    print(header)
    print("-" * len(header))
    for name in fast.maxk.__all__:
        if registry.entry(name).k_range is None:
            continue
        takes_k = "k" in registry.entry(name).inputs
        if not takes_k and k != n:  # K is fixed by the estimator (K = G): --k would be ignored
            print(f"{name + ' *':<22}  K = N only ({registry.entry(name).k_domain}); pass --k {n}")
            continue
        args: tuple[int, ...] = (k,) if takes_k else ()
        try:
            exact = getattr(reference.maxk, name)(rewards, *args)
            got = plan(name, k=k if takes_k else None).per_sample({"rewards": r})[0].tolist()
        except ValueError as error:
            print(f"{name + ' *':<22}  {error}")
            continue
        err = max(abs(float(e) - g) for e, g in zip(exact, got, strict=True))
        print(f"{name:<22}" + "".join(f"{_fmt(e):>12}" for e in exact) + f"  {err:.1e}")
    print("\nmaxpo == canonical (EI − L2O = Δ); Σ canonical = 0; see spec/maxk.md")
