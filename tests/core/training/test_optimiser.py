"""The trainer's optimiser bookkeeping: the fused CPU AdamW it uses, and the Adam-moment variance
proxy it logs, each against the literal form it replaced for speed."""

from __future__ import annotations

import torch

from advest.training.metrics import adam_variance_proxy


def _stepped(fused: bool | None, steps: int = 3) -> tuple[torch.nn.Module, torch.optim.AdamW]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, fused=fused)
    for i in range(steps):
        torch.manual_seed(100 + i)
        opt.zero_grad()
        model(torch.randn(11, 7)).square().mean().backward()
        opt.step()
    return model, opt


def test_the_fused_cpu_adamw_takes_the_same_steps_as_the_default_loop() -> None:
    a, _ = _stepped(None)
    b, _ = _stepped(True)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_the_variance_proxy_equals_its_literal_definition() -> None:
    _, opt = _stepped(None)
    literal = 0.0
    for group in opt.param_groups:
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            state = opt.state[p]
            t = float(state["step"])
            m_hat = state["exp_avg"] / (1 - beta1**t)
            v_hat = state["exp_avg_sq"] / (1 - beta2**t)
            literal += float((v_hat - m_hat.square()).sum())
    got = adam_variance_proxy(opt)
    assert literal != 0.0
    assert abs(got - literal) <= 1e-5 * abs(literal)
