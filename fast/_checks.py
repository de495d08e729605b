"""Input validation shared by the fast estimators: clear errors, never a silent NaN."""

from __future__ import annotations

import torch
from torch import Tensor


def check_rewards(rewards: object, name: str = "rewards") -> Tensor:
    """Validate ``rewards: [B, G]``: a floating tensor, G >= 1, every value finite.

    Errors name the argument and the first offending group.
    """
    if not isinstance(rewards, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [B, G]; got {type(rewards)}")
    if not rewards.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64); "
            f"got {rewards.dtype}"
        )
    if rewards.dim() != 2:
        raise ValueError(f"{name} must have shape [B, G]; got shape {tuple(rewards.shape)}")
    if rewards.shape[1] == 0:
        raise ValueError(
            f"{name} has empty groups (shape {tuple(rewards.shape)}); each group needs >= 1 sample"
        )
    check_finite(rewards, name)
    return rewards


def check_finite(values: Tensor, name: str) -> None:
    """Raise ``ValueError`` naming the first group (dim 0) that holds a NaN or an infinity."""
    # Screen with one sum (NaN and ±inf propagate into it); only a non-finite sum, which finite
    # values can also give by overflow, pays for the element-wise scan.
    if values.numel() == 0 or bool(torch.isfinite(values.sum())):
        return
    finite = torch.isfinite(values)
    if not bool(finite.all()):
        bad = (~finite).nonzero()[0].tolist()
        group, sample = bad[0], bad[1:]
        value = values[tuple(bad)].item()
        raise ValueError(
            f"{name} has a non-finite value in group {group} ({value} at sample {sample})"
        )


def check_k(k: object, n: int, name: str, *, k_max: int) -> int:
    """``k`` must be an int with 1 <= k <= k_max (k_max is N or N−1); the message names K and N."""
    bound = "N" if k_max == n else "N-1"
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= k_max:
        raise ValueError(f"{name} needs 1 <= K <= {bound}; got K={k!r}, N={n}")
    return k


def check_ddof(ddof: object, name: str) -> int:
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise ValueError(f"{name} needs ddof in (0, 1); got ddof={ddof!r}")
    assert isinstance(ddof, int)
    return ddof


def check_companion(other: object, rewards: Tensor, name: str) -> Tensor:
    """A second per-sample tensor (e.g. ``lengths``) must match ``rewards`` in shape and device."""
    if not isinstance(other, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [B, G]; got {type(other)}")
    if other.shape != rewards.shape:
        raise ValueError(
            f"{name} has shape {tuple(other.shape)} but rewards has {tuple(rewards.shape)}"
        )
    if other.device != rewards.device:
        raise ValueError(f"{name} is on {other.device} but rewards is on {rewards.device}")
    if other.dtype == torch.bool or other.is_complex():
        raise TypeError(f"{name} must be an integer or floating tensor; got {other.dtype}")
    if other.is_floating_point():
        check_finite(other, name)
    return other


def refuse_where(bad: Tensor, values: Tensor, what: str) -> None:
    """Raise ``ValueError`` "``what``; group g has v at sample i" for the first True of
    ``bad: [B, G]`` (``values: [B, G]`` holds the offending value)."""
    if bool(bad.any()):
        group, sample = bad.nonzero()[0].tolist()
        raise ValueError(
            f"{what}; group {group} has {values[group, sample].item()} at sample {sample}"
        )


def check_lengths(lengths: Tensor) -> None:
    """Response lengths (token counts, ``[B, G]``) are at least 1."""
    refuse_where(lengths < 1, lengths, "lengths must be >= 1")


def bool_mask(mask: Tensor) -> Tensor:
    """``mask`` as bool; a non-bool mask must hold only 0 and 1."""
    if mask.dtype != torch.bool:
        if bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError("mask must be boolean or hold only 0 and 1")
        mask = mask != 0
    return mask
