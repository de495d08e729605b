"""The update half of a training step: ``ppo_epochs × minibatches`` optimiser steps of the
clipped policy-gradient loss on one rollout, with the guards that stop a run cleanly (a
non-finite loss, gradient norm or weight).

Kept apart from the LightningModule (``module.py``), which samples and scores; these functions
take the module as a ``Trainee``: what an update reads of it. Shapes: a rollout of B prompts ×
G samples is S = B·G sequences of T response tokens.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

from . import losses, metrics, scale
from .config import RLConfig
from .policy import TokenScores, forward_logprobs
from .rollout import Rollout


class RunStopped(RuntimeError):
    """The run stopped itself; the message says why and what to change."""


class NonFiniteLoss(RunStopped):
    """Too many optimiser steps in a row skipped for a non-finite loss or gradient norm."""


class NonFiniteWeights(RunStopped):
    """An optimiser step made the policy's weights non-finite: nothing is saved after it."""


class Trainee(Protocol):
    """What an update reads and writes of the LightningModule."""

    cfg: RLConfig
    policy: Any
    trainer: Any
    bad_steps: int
    skipped_total: int
    rollout_step: int

    @property
    def device(self) -> torch.device: ...
    @property
    def one_pass(self) -> bool: ...
    def optimizers(self) -> Any: ...
    def manual_backward(self, loss: Tensor) -> None: ...


class Flat(NamedTuple):
    """The rollout as S rows: ``sequences [S, P + T]``, ``prompt_mask [S, P]``, the rollout
    log-probs ``old [S, T]``, the loss ``mask [S, T]``, ``ref [S, T]`` or None, ``adv [S, T]``."""

    sequences: Tensor
    prompt_mask: Tensor
    old: Tensor
    mask: Tensor
    ref: Tensor | None
    adv: Tensor
    attend: Tensor | None = None
    """``[S, T]``: the response tokens read (multi-turn episodes: the environment's tokens too);
    None: the loss mask's."""


def flat(rollout: Rollout, adv: Tensor, mask_truncated: bool) -> Flat:
    """``rollout`` and its advantages ``adv [B, G, T]`` as S = B·G rows (views: writing ``old``
    writes ``rollout.logprobs``). With ``mask_truncated``, truncated completions leave the loss."""
    S = rollout.sequences.shape[0]
    mask = rollout.mask.reshape(S, -1)
    if mask_truncated:
        mask = mask & ~rollout.truncated.reshape(S, 1)
    ref = None if rollout.ref_logprobs is None else rollout.ref_logprobs.reshape(S, -1)
    old = rollout.logprobs.reshape(S, -1)
    attend = None if rollout.attend is None else rollout.attend.reshape(S, -1)
    return Flat(rollout.sequences, rollout.prompt_mask, old, mask, ref, adv.reshape(S, -1), attend)


def ppo_update(m: Trainee, rollout: Rollout, adv: Tensor, seed: int) -> dict[str, float]:
    """``ppo_epochs × minibatches`` optimiser steps on the rollout (with --mask_truncated,
    truncated completions are left out of the loss). In ``one_pass`` mode the rollout's
    log-probs and entropy are written here, from the only forward pass there is. Returns the
    step's mean clip fraction, KL, gradient norm, loss and Adam's variance proxy."""
    rows = flat(rollout, adv, m.cfg.mask_truncated)
    gen = torch.Generator().manual_seed(seed)
    stats: dict[str, list[float]] = {"clip_frac": [], "kl": [], "grad_norm": [], "loss": []}
    m.policy.train()
    for _ in range(m.cfg.ppo_epochs):
        order = torch.randperm(rows.sequences.shape[0], generator=gen).to(m.device)
        for mb in order.chunk(m.cfg.minibatches):
            _optimiser_step(m, rollout, rows, mb, stats)
    m.policy.eval()
    out = {k: sum(v) / len(v) for k, v in stats.items() if v}
    out["grad_variance_proxy"] = metrics.adam_variance_proxy(_optimiser(m).optimizer)
    return out


def _optimiser(m: Trainee) -> Any:
    opt = m.optimizers()
    assert not isinstance(opt, list)  # one optimiser
    return opt


def _optimiser_step(
    m: Trainee, rollout: Rollout, rows: Flat, mb: Tensor, stats: dict[str, list[float]]
) -> None:
    """One optimiser step on minibatch ``mb`` (row indices), in micro-batches; skipped, with a
    warning, when the loss or the gradient norm is not finite."""
    opt = _optimiser(m)
    norm = losses.Normaliser.of(rows.mask[mb], rows.mask.shape[-1])  # the response width
    opt.zero_grad()
    # in row order, micro-batches hold whole groups: each prompt's forward pass is done once
    # per micro-batch (``logprobs``); the accumulated gradient is the same up to rounding
    for micro in mb.sort().values.chunk(m.cfg.micro_batches):
        if not _backward(m, rollout, rows, micro, norm, stats):
            skip_nonfinite(m, "loss")
            opt.zero_grad()
            return
    norm_total = torch.nn.utils.clip_grad_norm_(m.policy.parameters(), m.cfg.max_grad_norm)
    if not bool(torch.isfinite(norm_total)):  # the step would make every weight NaN
        skip_nonfinite(m, "gradient norm")
        opt.zero_grad()
        return
    m.bad_steps = 0
    stats["grad_norm"].append(float(norm_total))
    opt.step()
    check_weights(m, float(norm_total))


def _backward(
    m: Trainee,
    rollout: Rollout,
    rows: Flat,
    micro: Tensor,
    norm: losses.Normaliser,
    stats: dict[str, list[float]],
) -> bool:
    """The loss of rows ``micro`` and its backward pass; False (nothing accumulated) when the
    loss is not finite on any rank."""
    cfg, mask = m.cfg, rows.mask[micro]
    attend = None if rows.attend is None else rows.attend[micro]
    scores = forward_logprobs(
        m.policy,
        rows.sequences[micro],
        rows.prompt_mask[micro],
        mask,
        cfg.temperature,
        attend=attend,
    )
    if m.one_pass:
        fill_rollout(rollout, micro, scores)
    parts = losses.policy_loss(
        scores.logp,
        rows.old[micro],
        rows.adv[micro],
        mask,
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        aggregation=cfg.loss_aggregation,
        norm=norm,
        ref_logprobs=None if rows.ref is None else rows.ref[micro],
        kl_coef=cfg.kl_coef,
        kl_estimator=cfg.kl_estimator,
    )
    bad = not bool(torch.isfinite(parts.loss))
    if m.trainer.strategy.reduce_boolean_decision(bad, all=False):
        return False
    m.manual_backward(parts.loss)
    tokens = mask.sum().clamp(min=1)
    stats["clip_frac"].append(float(parts.clipped.sum() / tokens))
    stats["kl"].append(float((parts.kl * mask).sum() / tokens))
    stats["loss"].append(float(parts.loss.detach()))
    return True


def fill_rollout(rollout: Rollout, rows: Tensor, scores: TokenScores) -> None:
    """``one_pass``: the rollout's log-probs and entropy of sequences ``rows`` from the update's
    forward pass (``old`` is a view of ``rollout.logprobs``, so the loss reads them as its old
    log-probs: ratio 1)."""
    S = rollout.mask.shape[0] * rollout.mask.shape[1]
    rollout.logprobs.view(S, -1)[rows] = scores.logp.detach()
    rollout.entropy.view(S, -1)[rows] = scores.entropy


def skip_nonfinite(m: Trainee, what: str) -> None:
    """Count a skipped optimiser step; stop the run after ``--max_bad_steps`` in a row."""
    m.bad_steps += 1
    m.skipped_total += 1
    step = m.rollout_step + 1  # the step being trained, as metrics.csv numbers it
    warnings.warn(
        f"non-finite {what} at rollout step {step}: optimiser step skipped "
        f"({m.bad_steps} in a row)",
        stacklevel=3,
    )
    if m.bad_steps >= m.cfg.max_bad_steps:
        plural = "losses" if what == "loss" else f"{what}s"
        raise NonFiniteLoss(
            f"{m.bad_steps} consecutive non-finite {plural} at rollout step {step}: "
            "stopping. Lower --lr or --max_grad_norm, or check the estimator's inputs and "
            "the rewards; the weights were not updated by these steps."
        )


def check_weights(m: Trainee, grad_norm: float) -> None:
    """After an optimiser step: a non-finite weight stops the run before anything is sampled,
    checkpointed or exported with it."""
    # each tensor's min and max: NaN propagates into both and an infinity is one of them, so
    # they are finite exactly when every weight is; a reduction, without isfinite's full-size
    # boolean temporaries (0.4 s a step for SmolLM2 on one core, against 0.03)
    ends = [torch.stack(torch.aminmax(p.detach())).float() for p in scale.trainable(m.policy)]
    if bool(torch.isfinite(torch.stack(ends)).all()):
        return
    raise NonFiniteWeights(
        f"rollout step {m.rollout_step + 1}: the policy's weights became non-finite "
        f"(NaN or inf) in an optimiser step whose loss and gradient norm ({grad_norm:.3g}) "
        f"were finite; the likely cause is a learning rate too large for this model "
        f"(--lr {m.cfg.lr:g}, --dtype {m.cfg.dtype}): lower --lr. Nothing was saved "
        "or exported after this step."
    )
