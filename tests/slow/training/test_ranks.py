"""The trainer under DDP on 2 CPU processes (gloo) gives the advantages one process gives over the
same global batch (issue 55): every rank's rollout and advantages are recorded at each step, the
ranks' rollouts are put together in rank order (the global batch) and replayed through the same
estimator on one process, and the advantages are compared, not only the parameters. For a
batch-coupled estimator (grpo_batch_std), a token-level one (ktae, which needs no collective and
is handed none) and KAE killed (SIGKILL on both ranks) after a checkpoint and resumed: its
history in the last checkpoint is the one process's, after every step of the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.fast import calling, registry
from tests import ranks_batch
from tests.core.training.test_training import ROOT, TRAINER_WARNINGS
from tests.core.training.test_training import model_path as model_path  # the fixture

pytestmark = TRAINER_WARNINGS

SCRIPT = """
import os, signal, sys, torch, lightning as L
from advest.fast import calling
from advest.training.config import RLConfig
from advest.training.train import train

model, out, name, estimator, steps, kill_at, resume = sys.argv[1:8]
STEP = [0]
real = calling.Plan.advantages

def spy(self, source):
    got = real(self, source)
    if not torch.distributed.is_initialized():  # the settings' dry run, before DDP starts
        return got
    rank = torch.distributed.get_rank()
    keep = ("rewards", "prompt_ids", "mask", "token_ids")
    record = {k: getattr(source, k).detach().cpu() for k in keep}
    record.update(out=got.detach().cpu(), collective=self.group is not None)
    torch.save(record, f"{out}/{name}_rank{rank}_step{STEP[0]}.pt")
    return got

calling.Plan.advantages = spy

class Kill(L.Callback):
    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        STEP[0] = int(batch)
    def on_train_batch_end(self, trainer, module, *args):  # after the step's checkpoint
        if STEP[0] == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)

cfg = RLConfig(model=model, steps=int(steps), prompts_per_step=2, group_size=4, max_new_tokens=4,
               eval_prompts=0, checkpoint_every=1, out=out, lr=1e-3, reward="digits",
               estimator=estimator, k=2, train_pool=6,
               estimator_options={"h": 1.0} if estimator == "kae" else {})
train(cfg, {"strategy": "ddp", "devices": 2, "accelerator": "cpu", "enable_progress_bar": False},
      name=name, resume=resume == "1", evaluate=False, callbacks=[Kill()])
"""


def _run(
    model: str,
    out: Path,
    name: str,
    estimator: str,
    steps: int,
    kill_at: int = -1,
    resume: bool = False,
) -> int:
    script = out / "ranks_run.py"
    script.write_text(SCRIPT)
    args = [model, str(out), name, estimator, str(steps), str(kill_at), str(int(resume))]
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "PYTHONWARNINGS": "ignore",
            "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1",
        },
    )
    if kill_at < 0:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.returncode


def _global_batch(records: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """The ranks' rollouts in rank order, padded to the widest response (mask False there)."""
    T = max(r["mask"].shape[-1] for r in records)
    pad = {k: [] for k in ("mask", "token_ids")}  # type: dict[str, list[torch.Tensor]]
    for r in records:
        extra = T - r["mask"].shape[-1]
        for k in pad:
            pad[k].append(torch.nn.functional.pad(r[k], (0, extra)))
    joined = {k: torch.cat(v) for k, v in pad.items()}
    for k in ("rewards", "prompt_ids"):
        joined[k] = torch.cat([r[k] for r in records])
    return joined


def _replay(
    out: Path, name: str, estimator: str, steps: int
) -> tuple[calling.Plan, list[str | None]]:
    """Replays the run's global batches through one process: the one-process plan (its history,
    for a stateful estimator) and, per step and rank, how that rank's advantages differ from the
    one process's (None: within the estimator's tolerance)."""
    # KAE's window of i·h iterations: h = 1 reaches back to every earlier step of a 4-step run,
    # so a prompt seen by the other rank counts (the default h = 0.25 would forget it)
    options = {"h": 1.0} if estimator == "kae" else {}
    plan = calling.plan(estimator, options=options, k=2)
    alone = calling.plan(estimator, options=options, k=2)
    entry = registry.entry(estimator)
    differed, errors = [], []
    for step in range(steps):
        records = [torch.load(out / f"{name}_rank{r}_step{step}.pt") for r in range(2)]
        source = _global_batch(records)
        want = plan.advantages(source)  # [B_all, G, T]
        start = 0
        for r in records:
            B, _, T = r["out"].shape
            mine = want[start : start + B]
            start += B
            assert bool((mine[..., T:] == 0).all())
            errors.append(
                ranks_batch.mismatch(
                    entry, mine[..., :T].double(), r["out"].double(), r["rewards"].double()
                )
            )
        # the planted defect: rank 0 on its own share (its own statistics and history)
        mine = alone.advantages(records[0]).double()
        differed.append(
            ranks_batch.mismatch(
                entry, mine, records[0]["out"].double(), records[0]["rewards"].double()
            )
        )
    assert any(differed) == entry.collective, (estimator, differed)
    # a group-local estimator was handed no process group: it paid for no collective
    assert all(r["collective"] == entry.collective for r in records), estimator
    return plan, errors


@pytest.mark.parametrize("estimator", ["grpo_batch_std", "ktae"])
def test_ddp_advantages_equal_one_process_over_the_global_batch(
    model_path: str, tmp_path: Path, estimator: str
) -> None:
    assert _run(model_path, tmp_path, estimator, estimator, steps=2) == 0
    _, errors = _replay(tmp_path, estimator, estimator, steps=2)
    assert errors == [None] * 4, (estimator, errors)  # 2 steps × 2 ranks, each as one process


def test_kae_killed_and_resumed_on_two_ranks_keeps_one_processs_history(
    model_path: str, tmp_path: Path
) -> None:
    assert _run(model_path, tmp_path, "kae", "kae", steps=4, kill_at=1) != 0
    ckpt = tmp_path / "kae" / "checkpoints" / "last.ckpt"
    assert torch.load(ckpt, weights_only=False)["advest"]["rollout_step"] == 2
    _run(model_path, tmp_path, "kae", "kae", steps=4, resume=True)
    one, errors = _replay(tmp_path, "kae", "kae", steps=4)
    assert errors == [None] * 8, errors
    saved = torch.load(ckpt, weights_only=False)["advest"]["estimator"]
    assert ranks_batch.same_state(saved, one.instance.state_dict())
