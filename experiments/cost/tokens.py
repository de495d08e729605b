"""Token- and history-level estimators against one forward pass of the trainer's model: the
overhead a user pays per rollout step. Printed, never asserted.

The forward pass is the rollout forward the trainer already does (no grad, B·G sequences of
P + T tokens, hidden states requested); each estimator gets a rollout of the same B, G, T with
every field filled (``hidden`` has the model's width D).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from advest.fast import registry
from advest.training.rollout import Rollout, plan, synthetic

from .bench import time_call

TARGETS = {"ktae": 0.02, "covariance_weights": 0.02, "hista": 0.10}
"""Issue targets: estimator time / forward time."""


def _estimator_call(name: str, r: Rollout) -> Callable[[], Any]:
    base = plan("grpo").per_sample(r)  # what a reweighter gets from its base estimator
    resolved = plan(name)
    return lambda: resolved.output(r, base)


def run(B: int = 8, G: int = 16, T: int = 256, P: int = 16, repeats: int = 5) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from advest.training.embedded import EmbeddedSpec, build_model

    spec = EmbeddedSpec()
    base = build_model(spec, 15)
    config = LlamaConfig(**{**base.config.to_dict(), "max_position_embeddings": P + T})  # type: ignore[union-attr, operator]
    model = LlamaForCausalLM(config)
    model.eval()
    D = config.hidden_size
    ids = torch.randint(3, 15, (B * G, P + T))

    @torch.no_grad()
    def forward() -> Any:
        return model(input_ids=ids, output_hidden_states=True, use_cache=False)

    fwd = time_call(forward, repeats, torch.device("cpu"))
    r = synthetic(B, G, T, D)
    names = [n for n in registry.names() if registry.entry(n).kind in ("token", "history")]
    print(
        f"\ntoken/history estimators vs one rollout forward pass of the default model "
        f"(Llama {spec.layers}×{D}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M "
        f"params) on B={B}, G={G}, T={T} (+P={P}), threads={torch.get_num_threads()}"
    )
    print(f"{'':<22}{'ms':>12}{'× forward':>12}{'target':>10}")
    print(f"{'forward pass':<22}{fwd * 1e3:>12.2f}{1.0:>12.3f}")
    for name in names:
        t = time_call(_estimator_call(name, r), repeats, torch.device("cpu"))
        target = f"≤ {TARGETS[name]:.0%}" if name in TARGETS else ""
        print(f"{name:<22}{t * 1e3:>12.2f}{t / fwd:>12.3f}{target:>10}")
