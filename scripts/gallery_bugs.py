"""Advantage-estimation bugs that public trackers report, each as a small estimator on rewards
[B, G] beside its fixed twin. Every pair reproduces the report's arithmetic, not the trainer's
plumbing; ``Bug.where`` cites the thread. scripts/bug_gallery.py runs the oracle on both. The
bugs that live in flat rows, ids, masks and low precision are in gallery_flat_bugs.py, judged in
the oracle's ``flat`` convention (``Bug.convention``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).parent))
import gallery_episode_bugs as episode
import gallery_flat_bugs as flat

Est = Callable[..., Any]
"""An estimator in its convention: ``[B, G]`` -> ``[B, G]``, flat rows, or verl's pair."""
EPS = 1e-4  # TRL's epsilon


@dataclass(frozen=True)
class Bug:
    name: str
    where: str
    """tracker and number, as cited"""
    url: str
    summary: str
    buggy: Est
    fixed: Est
    why_not: str = ""
    """for a bug no verdict tells apart: which property would catch it"""
    convention: str = "plain"
    """the oracle's calling convention for both twins: plain ([B, G]) or flat (rows, ids)"""


def _centre(r: Tensor) -> Tensor:
    return r - r.mean(-1, keepdim=True)


def _nanstd(r: Tensor, mean: Tensor) -> Tensor:
    n = r.isfinite().sum(-1, keepdim=True)
    return (((r - mean) ** 2).nansum(-1, keepdim=True) / (n - 1)).sqrt()


def trl_5773_buggy(r: Tensor) -> Tensor:
    """NaN marks an unscorable sample (its advantage is 0); nanstd (ddof 1) of a group with one
    valid reward is NaN, and 0 / NaN poisons the valid sample's advantage."""
    mean = r.nanmean(-1, keepdim=True)
    adv = (r - mean) / (_nanstd(r, mean) + EPS)
    return torch.where(r.isnan(), torch.zeros_like(r), adv)


def trl_5773_fixed(r: Tensor) -> Tensor:
    """TRL #5775's repair: a NaN std becomes 0."""
    mean = r.nanmean(-1, keepdim=True)
    adv = (r - mean) / (torch.nan_to_num(_nanstd(r, mean), nan=0.0) + EPS)
    return torch.where(r.isnan(), torch.zeros_like(r), adv)


def trl_5026_buggy(r: Tensor) -> Tensor:
    """MaxRL's mean normalisation: a negative group mean flips every sign."""
    m = r.mean(-1, keepdim=True)
    return (r - m) / (m + EPS)


def trl_5026_fixed(r: Tensor) -> Tensor:
    m = r.mean(-1, keepdim=True)
    return (r - m) / (m.abs() + EPS)


def trl_4662_buggy(r: Tensor) -> Tensor:
    """std with ddof 1 of a group of one sample (num_generations_eval=1) is NaN."""
    return _centre(r) / (r.std(-1, keepdim=True) + EPS)


def trl_4662_fixed(r: Tensor) -> Tensor:
    if r.shape[-1] == 1:
        return torch.zeros_like(r)
    return _centre(r) / (r.std(-1, keepdim=True) + EPS)


def verl_6348_buggy(r: Tensor) -> Tensor:
    """Vectorised GRPO: one-pass variance floored at 1e-6 inside the std."""
    g = r.shape[-1]
    mean = r.mean(-1, keepdim=True)
    var = ((r * r).sum(-1, keepdim=True) - g * mean * mean) / max(g - 1, 1)
    return (r - mean) / (var.clamp(min=1e-6).sqrt() + 1e-6)


def verl_6348_fixed(r: Tensor) -> Tensor:
    std = r.std(-1, keepdim=True) if r.shape[-1] > 1 else torch.ones_like(r)
    return (r - r.mean(-1, keepdim=True)) / (std + 1e-6)


def _loo(r: Tensor) -> tuple[Tensor, Tensor]:
    g = r.shape[-1]
    total = r.sum(-1, keepdim=True)
    return (total - r) / (g - 1), total


def nemo_4161_buggy(r: Tensor) -> Tensor:
    """Leave-one-out std as sqrt(E[x²] − E[x]²): fp32 residue instead of 0 for equal others."""
    g = r.shape[-1]
    mean, _ = _loo(r)
    sq = ((r * r).sum(-1, keepdim=True) - r * r) / (g - 1)
    std = ((sq - mean * mean) * (g - 1) / max(g - 2, 1)).clamp(min=0).sqrt()
    return torch.where(std > 0, (r - mean) / (std + 1e-6), r - mean)


def nemo_4161_fixed(r: Tensor) -> Tensor:
    g = r.shape[-1]
    mean, _ = _loo(r)
    others = r.unsqueeze(-2).expand(*r.shape, g)  # [B, G, G]: row i holds the group
    keep = ~torch.eye(g, dtype=torch.bool, device=r.device)
    dev = torch.where(keep, others - mean.unsqueeze(-1), torch.zeros_like(others))
    std = (dev.pow(2).sum(-1) / max(g - 2, 1)).sqrt()
    return torch.where(std > 1e-3, (r - mean) / (std + 1e-6), r - mean)


def nemo_1518_buggy(r: Tensor) -> Tensor:
    """Leave-one-out baseline divided by the leave-one-out std + 1e-6: ±1e6 when the others tie."""
    g = r.shape[-1]
    mean, _ = _loo(r)
    others = r.unsqueeze(-2).expand(*r.shape, g)
    keep = ~torch.eye(g, dtype=torch.bool, device=r.device)
    dev = torch.where(keep, others - mean.unsqueeze(-1), torch.zeros_like(others))
    std = (dev.pow(2).sum(-1) / max(g - 2, 1)).sqrt()
    return (r - mean) / (std + 1e-6)


def nemo_1518_fixed(r: Tensor) -> Tensor:
    """NeMo-RL #1519: skip the division where the std is zero."""
    g = r.shape[-1]
    mean, _ = _loo(r)
    others = r.unsqueeze(-2).expand(*r.shape, g)
    keep = ~torch.eye(g, dtype=torch.bool, device=r.device)
    dev = torch.where(keep, others - mean.unsqueeze(-1), torch.zeros_like(others))
    std = (dev.pow(2).sum(-1) / max(g - 2, 1)).sqrt()
    return torch.where(std > 0, (r - mean) / (std + 1e-6), r - mean)


def skyrl_137_buggy(r: Tensor) -> Tensor:
    """RLOO: r − (Σ − r)/(G − 1), which divides by zero in a one-sample group."""
    g = r.shape[-1]
    return r - (r.sum(-1, keepdim=True) - r) / (g - 1) if g > 1 else r - (r - r) / 0.0


def skyrl_137_fixed(r: Tensor) -> Tensor:
    g = r.shape[-1]
    if g == 1:
        return torch.zeros_like(r)
    return r - (r.sum(-1, keepdim=True) - r) / (g - 1)


def trl_3991_buggy(r: Tensor) -> Tensor:
    """``scale_rewards="batch"`` whose std is computed per group, as ``"group"`` would."""
    std = r.std(-1, keepdim=True) if r.shape[-1] > 1 else torch.zeros_like(r)
    return (r - r.mean(-1, keepdim=True)) / (std + EPS)


def trl_3991_fixed(r: Tensor) -> Tensor:
    """The group mean over the std of the whole batch."""
    std = r.std() if r.numel() > 1 else torch.zeros(())
    return (r - r.mean(-1, keepdim=True)) / (std + EPS)


def rllm_916_buggy(r: Tensor) -> Tensor:
    """r − group mean: a one-sample group's mean is its own reward, so A = 0."""
    return r - r.mean(-1, keepdim=True)


def rllm_916_fixed(r: Tensor) -> Tensor:
    """A group of one keeps its reward (baseline 0), as the docstring says."""
    return r - r.mean(-1, keepdim=True) if r.shape[-1] > 1 else r.clone()


BUGS = [
    Bug(
        "one valid reward in a group gives NaN (nanstd, ddof 1)",
        "TRL #5773",
        "https://github.com/huggingface/trl/pull/5773",
        "a group where 7 of 8 rewards are NaN: nanstd is NaN and poisons the valid sample",
        trl_5773_buggy,
        trl_5773_fixed,
    ),
    Bug(
        "MaxRL mean normalisation flips signs when the group mean is < 0",
        "TRL #5026",
        "https://github.com/huggingface/trl/pull/5026",
        "(r − m)/(m + 1e-4) with m < 0 reinforces the worse samples",
        trl_5026_buggy,
        trl_5026_fixed,
    ),
    Bug(
        "std of a one-sample group is NaN (num_generations_eval=1)",
        "TRL #4662",
        "https://github.com/huggingface/trl/pull/4662",
        "grouped_rewards.std(dim=1) with G = 1 warns and returns NaN",
        trl_4662_buggy,
        trl_4662_fixed,
    ),
    Bug(
        "vectorised GRPO shrinks low-variance groups ±0.005 vs ±0.62",
        "verl #6348",
        "https://github.com/verl-project/verl/pull/6348",
        "one-pass variance floored at 1e-6 in compute_grpo_vectorized_outcome_advantage",
        verl_6348_buggy,
        verl_6348_fixed,
    ),
    Bug(
        "fp32 leave-one-out std residue amplifies a singleton ~4000×",
        "NeMo-RL #4161",
        "https://github.com/NVIDIA-NeMo/RL/pull/4161",
        "sqrt(E[x²] − E[x]²) in float32 gives 1.6e-4 instead of 0 for tied others",
        nemo_4161_buggy,
        nemo_4161_fixed,
    ),
    Bug(
        "leave-one-out baseline + std normalisation explodes to ±1e6",
        "NeMo-RL #1518",
        "https://github.com/NVIDIA-NeMo/RL/issues/1518",
        "rewards [1, 0, 0, 0]: the others' std is 0, divided by 1e-6 (fixed in #1519)",
        nemo_1518_buggy,
        nemo_1518_fixed,
    ),
    Bug(
        "RLOO divides by G − 1 = 0 for a one-sample group",
        "SkyRL #137",
        "https://github.com/NovaSky-AI/SkyRL/pull/137",
        "review of compute_rloo_outcome_advantage: single-sample prompts are the bug",
        skyrl_137_buggy,
        skyrl_137_fixed,
    ),
    Bug(
        "reinforce_plus_plus_baseline gives all zeros at n = 1",
        "rLLM #916",
        "https://github.com/rllm-org/rllm/issues/916",
        "the docstring promises a baseline of 0 for a one-sample group (A = r); it subtracts the "
        "sample's own reward",
        rllm_916_buggy,
        rllm_916_fixed,
    ),
    Bug(
        'scale_rewards="batch" computes the std per group',
        "TRL #3991",
        "https://github.com/huggingface/trl/issues/3991",
        "the batch branch reshaped the rewards into groups before taking the std",
        trl_3991_buggy,
        trl_3991_fixed,
    ),
    Bug(
        "partial rollout groups mis-grouped by a fixed group_size stride",
        "AReaL #1419",
        "https://github.com/areal-project/AReaL/issues/1419",
        "a group with fewer than group_size rows shifts every later group",
        flat.areal_1419_buggy,
        flat.grouped_fixed,
        convention="flat",
    ),
    Bug(
        "unequal group sizes reshaped into equal groups",
        "slime #1414 (fix #1415)",
        "https://github.com/THUDM/slime/pull/1415",
        "reshape(-1, n) instead of per-group_index statistics",
        flat.slime_1414_buggy,
        flat.grouped_fixed,
        convention="flat",
    ),
    Bug(
        "a fully rejected response still moves its group's GRPO baseline",
        "verl #6452",
        "https://github.com/verl-project/verl/pull/6452",
        "rows with an all-zero response_mask keep their reward in the group mean",
        flat.verl_6452_buggy,
        flat.nemo_3837_fixed,
        convention="flat",
    ),
    Bug(
        "zero-action samples shift the group reward baseline",
        "OpenRLHF #1239",
        "https://github.com/OpenRLHF/OpenRLHF/pull/1239",
        "a sibling with action_mask.sum() == 0 still enters the dr_grpo mean",
        flat.openrlhf_1239_buggy,
        flat.openrlhf_1239_fixed,
        convention="flat",
    ),
    Bug(
        "raw uids used as dense ids: negative uids raise, sparse ones over-allocate",
        "verl #7150",
        "https://github.com/verl-project/verl/pull/7150",
        "as_torch_index took integer labels as positions",
        flat.verl_7150_buggy,
        flat.verl_7150_fixed,
        convention="flat",
    ),
    Bug(
        "valid_mask swallowed in **kwargs: placeholder rows move their siblings",
        "NeMo-RL #3837",
        "https://github.com/NVIDIA-NeMo/RL/pull/3837",
        "GDPO and REINFORCE++ accepted valid_mask and never read it",
        flat.nemo_3837_buggy,
        flat.nemo_3837_fixed,
        convention="flat",
    ),
    Bug(
        "uneven groups fall back to one batch-wide baseline",
        "slime #2230",
        "https://github.com/THUDM/slime/issues/2230",
        "a constant group gets −1.09 instead of 0 when group sizes differ",
        flat.slime_2230_buggy,
        flat.grouped_fixed,
        convention="flat",
    ),
    Bug(
        "rows left over from a group-size reshape are divided by ε",
        "AReaL #1673",
        "https://github.com/areal-project/AReaL/pull/1673",
        "[1, 2, 3] with G = 2: the third row becomes 3/1e-5 = 300000",
        flat.areal_1673_buggy,
        flat.grouped_fixed,
        convention="flat",
    ),
    Bug(
        "GDPO's final whitening runs over tokens: long responses weigh more",
        "verl #6497",
        "https://github.com/verl-project/verl/pull/6497",
        "masked_whiten over the response tokens instead of one value per response",
        flat.verl_6497_buggy,
        flat.verl_6497_fixed,
        convention="verl",
    ),
    Bug(
        "norm_adv_by_std_in_grpo=False ignored by grpo_vectorized",
        "verl #7893",
        "https://github.com/verl-project/verl/pull/7893",
        "compute_advantage never forwards the flag; the config says not to divide by the std",
        flat.verl_7893_buggy,
        flat.verl_7893_fixed,
        convention="verl",
    ),
    Bug(
        "bf16 rewards round the group baseline away",
        "OpenRLHF #1334",
        "https://github.com/OpenRLHF/OpenRLHF/pull/1334",
        "[1, 1, 1, 1.0078] in bf16 gives about [0, 0, 0, 2]; a constant fp16 group NaN",
        flat.openrlhf_1334_buggy,
        flat.grouped_fixed,
        convention="flat",
    ),
    Bug(
        "per-turn-index normalisation: a baseline set by the episode's own stopping turn",
        "verl #7244",
        "https://github.com/verl-project/verl/issues/7244",
        "MT-GRPO's per-turn-index mean subtracts one term per turn the episode itself took: "
        "biased where the policy decides when to stop",
        episode.turn_index_mean,
        episode.turn_rloo,
        convention="episode",
    ),
    Bug(
        "turns counted as rows of the group statistic",
        "agent-lightning #445",
        "https://github.com/microsoft/agent-lightning/pull/445",
        "each turn a row of the group mean, so an episode with more turns weighs more",
        episode.rows_per_turn,
        episode.turn_rloo,
        convention="episode",
    ),
    Bug(
        "discounted returns run over masked tool-output tokens",
        "miles #1827",
        "https://github.com/radixark/miles/pull/1827",
        "the recursion steps through observation tokens: they get advantages and the terminal "
        "reward is attenuated by the tool output's length",
        episode.gae_over_all_tokens,
        episode.gae_over_policy_tokens,
        convention="episode",
    ),
    Bug(
        "the final reward overwrites every turn's own step reward",
        "AReaL #1674",
        "https://github.com/areal-project/AReaL/pull/1674",
        "each turn gets the terminal turn's normalised reward; intermediate step rewards are lost",
        episode.final_overwrites_steps,
        episode.turn_rloo,
        convention="episode",
    ),
]
