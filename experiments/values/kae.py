"""KAE's claim on a policy that changes over time (``advest experiment values``, second table).

KAE (spec/kae.md) values a prompt from its earlier visits, weighted by how recent they are. On a
fixed policy every earlier visit is as good as a new one, so pooling wins by construction; the
claim worth measuring is whether the history still helps while the policy learns. Here the
policy is trained between iterations (one AdamW step of a REINFORCE-with-leave-one-out loss on
``train`` of the Monte Carlo samples per prompt; LoRA on a real model, every weight on the
embedded one), so the value of each prompt moves. At every iteration and for n = 1, 2, 4 fresh
samples per prompt, two estimates of the current policy's value are scored against its Monte
Carlo value V_MC (``mc`` samples, drawn before the step): the mean of the n samples (the group
mean, what GRPO/RLOO use) and KAE's value from the earlier iterations' samples alone
(``KAE.value``, bandwidths h = 0.5 and 1, each scored where it has a history). One row per
(iteration, n, prompt) is kept; MSEs come with 95% bootstrap intervals over prompts.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from advest.experiments.stats import cluster_bootstrap
from advest.fast import registry
from advest.training.generation import Sampling
from advest.training.policy import forward_logprobs
from advest.training.prompts import token_ids as prompt_ids
from advest.training.sampling import Scored, sample_and_score
from advest.training.scoring import Scorer

from .paired import word

SAMPLES = (1, 2, 4)
"""n: fresh samples per prompt per iteration (drawn together, then split)."""
BANDWIDTHS = {"kae_h05": 0.5, "kae_h1": 1.0}
"""The KAE bandwidths scored. With the triangular kernel the visit one iteration back has weight
1 − 1/(i·h) at iteration i, so a bandwidth h has a history only from i > 1/h: the default
h = 0.25 would have none before iteration 5 of these short runs (its value would be 0)."""


def _trainable(model: Any, real: bool, r: int) -> tuple[Any, list[Tensor]]:
    """The model to train and its trainable parameters: LoRA (rank ``r``) on a real model."""
    if real:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, task_type="CAUSAL_LM",
                                                 target_modules="all-linear"))  # fmt: skip
    return model, [p for p in model.parameters() if p.requires_grad]


def sample_state(
    model: Any,
    tok: Any,
    state: Tensor,
    answer: str,
    n: int,
    budget: int,
    a: Any,
    scorer: Scorer,
    prefix: Tensor | None = None,
) -> Scored:
    """n continuations of one state (``state``: prompt and ``prefix`` token ids), sampled and
    scored as training samples are (``--temperature``, ``--top_p``, ``--reward``); the reward
    of a continuation is that of the whole response, ``prefix`` included."""
    ids = state.unsqueeze(0)
    sampling = Sampling(n, max(budget, 1), a.temperature, a.top_p)
    return sample_and_score(
        model, tok, ids, torch.ones_like(ids), [answer], sampling, scorer, prefix=prefix
    )


def progress(what: str, done: int, total: int, start: float) -> None:
    """One line on stdout: ``done`` of ``total`` and the time left at the rate so far."""
    if done == 0:
        return
    spent = time.perf_counter() - start
    left = spent / done * (total - done)
    print(f"{what}: {done}/{total}, {spent / 60:.1f} min, ~{left / 60:.0f} min left", flush=True)


def _step(model: Any, opt: torch.optim.Optimizer, batch: list[Scored], a: Any) -> None:
    """One AdamW step on Σ (R − mean of the others) log π(y), summed over the prompts' samples
    and divided by their tokens: the policy moves, in the direction of its own rewards."""
    model.train()
    opt.zero_grad(set_to_none=True)
    tokens = sum(int(s.mask[: a.kae_train].sum()) for s in batch)
    for s in batch:
        rows = slice(0, a.kae_train)
        r = s.rewards[0, rows].double()
        g = r.numel()
        adv = (r - (r.sum() - r) / max(g - 1, 1)).float() if g > 1 else torch.zeros_like(r).float()
        logp = forward_logprobs(
            model, s.sequences[rows], s.prompt_mask[rows], s.mask[rows], a.temperature
        ).logp
        loss = -(adv.unsqueeze(-1) * logp * s.mask[rows]).sum() / max(tokens, 1)
        loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    model.eval()


def kae_benchmark(model: Any, tok: Any, a: Any, scorer: Scorer, items: list[Any]) -> dict[str, Any]:
    """``a.iterations`` iterations on ``items``: score, then train (module docstring)."""
    model, params = _trainable(model, a.model is not None, a.kae_lora_r)
    opt = torch.optim.AdamW(params, lr=a.kae_lr)
    prompts = [torch.tensor(prompt_ids(tok, i.prompt)) for i in items]
    ids = torch.arange(len(items))
    kaes = {(k, n): registry.get("kae")(h=h) for k, h in BANDWIDTHS.items() for n in SAMPLES}
    rows: list[dict[str, Any]] = []
    torch.manual_seed(a.seed + 1)
    model.eval()
    began = time.perf_counter()
    for it in range(a.iterations):
        progress("KAE iterations", it, a.iterations, began)
        with torch.no_grad():
            budget, pairs = a.max_new_tokens, list(zip(prompts, items, strict=True))
            mc = [sample_state(model, tok, p, i.answer, a.mc, budget, a, scorer) for p, i in pairs]
            fresh = torch.cat([  # [P, 7]: split into groups of 1, 2 and 4
                sample_state(model, tok, p, i.answer, sum(SAMPLES), budget, a, scorer).rewards
                for p, i in pairs
            ]).double()  # fmt: skip
        truth = torch.stack([s.rewards.double().mean() for s in mc])
        start = 0
        for n in SAMPLES:
            r = fresh[:, start : start + n]
            start += n
            # KAE's next call is iteration it + 1; its last visit is one iteration back
            live = {k: it > 0 and (it + 1) * h > 1 for k, h in BANDWIDTHS.items()}
            history = {k: kaes[k, n].value(ids) if live[k] else None for k in BANDWIDTHS}
            for name in BANDWIDTHS:
                kaes[name, n](ids, r)
            for p in range(len(items)):
                got = {k: None if h is None else float(h[p]) for k, h in history.items()}
                rows.append({"iteration": it, "n": n, "prompt": p, "v_mc": float(truth[p]),
                             "group_mean": float(r[p].mean()), **got})  # fmt: skip
        if it + 1 < a.iterations:
            with torch.enable_grad():
                _step(model, opt, mc, a)
    rank = a.kae_lora_r if a.model is not None else 0
    policy = {"prompts": len(items), "iterations": a.iterations, "lr": a.kae_lr,
              "trained_on": a.kae_train, "lora_r": rank}  # fmt: skip
    return {"policy": policy, **summarise(rows, a.mc, a.bootstrap, a.seed)}


def summarise(rows: list[dict[str, Any]], mc: int, reps: int, seed: int) -> dict[str, Any]:
    """Per n and bandwidth, on the iterations where that KAE has a history: its MSE against V_MC
    and the group mean's on the same rows, with intervals, and the paired difference KAE −
    group mean; the policy's drift (mean V_MC per iteration); the rows themselves."""
    out: dict[str, Any] = {"mc": mc, "drift": [], "by_n": {}, "rows": rows}
    iterations = sorted({r["iteration"] for r in rows})
    out["drift"] = [float(np.mean([r["v_mc"] for r in rows if r["iteration"] == i and r["n"] == 1]))
                    for i in iterations]  # fmt: skip
    for n in SAMPLES:
        entry: dict[str, Any] = {}
        for k in BANDWIDTHS:  # each on the rows where it has a history, paired with the mean
            got = [r for r in rows if r["n"] == n and r[k] is not None]
            if not got:
                continue
            truth = np.array([r["v_mc"] for r in got])
            prompts = np.array([r["prompt"] for r in got])
            err = {c: (np.array([r[c] for r in got]) - truth) ** 2 for c in ("group_mean", k)}
            d = err[k] - err["group_mean"]
            ci = {c: list(cluster_bootstrap(e, prompts, reps, seed)) for c, e in err.items()}
            entry[k] = {
                "rows": len(got),
                "iterations": sorted({r["iteration"] + 1 for r in got}),
                **{c: {"mse": float(e.mean()), "mse_95ci": ci[c]} for c, e in err.items()},
                "difference": {"mean": float(d.mean()),
                               "ci": list(cluster_bootstrap(d, prompts, reps, seed))},
            }  # fmt: skip
        out["by_n"][f"n={n}"] = entry
    return out


def _cell(e: dict[str, Any]) -> str:
    return f"{e['mse']:.4f} [{e['mse_95ci'][0]:.4f}, {e['mse_95ci'][1]:.4f}]"


def _verdict(e: dict[str, Any]) -> str:
    return word(*e["ci"])


def _diff(e: dict[str, Any]) -> str:
    lo, hi = e["ci"]
    return f"{e['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}] ({_verdict(e)})"


def verdicts(kae: dict[str, Any]) -> str:
    """One sentence: in how many of the table's (n, bandwidth) rows KAE's history has the lower,
    the higher MSE, or no measured difference from the group mean's (paired intervals)."""
    found = [_verdict(e["difference"]) for per in kae["by_n"].values() for e in per.values()]
    counts = ", ".join(f"{w} in {found.count(w)}" for w in
                       ("lower", "higher", "no measured difference"))  # fmt: skip
    return f"KAE's history − the group mean, paired over {len(found)} (n, h) rows: {counts}"


def table(kae: dict[str, Any]) -> list[str]:
    """The KAE table's lines (markdown), from ``summarise``'s record."""
    drift = ", ".join(f"{v:.3f}" for v in kae["drift"])
    p = kae["policy"]
    weights = f"LoRA r = {p['lora_r']}" if p["lora_r"] else "every weight"
    lines = [
        f"KAE on a policy trained between iterations ({p['prompts']} prompts, {p['iterations']} "
        f"iterations; after each, one AdamW step ({weights}, lr {p['lr']:g}) on {p['trained_on']} "
        "of the Monte Carlo samples per prompt with leave-one-out advantages): its mean V_MC "
        f"({kae['mc']} samples per prompt) went {drift} over the iterations. MSE against V_MC on "
        "the iterations where each KAE bandwidth has a history (the group mean on the same "
        "rows), 95% bootstrap intervals over prompts; the difference is paired (same prompt "
        "and iteration):",
        "",
        "| fresh samples per prompt | KAE | iterations | group mean | KAE history | "
        "KAE − group mean |",
        "|---|---|---|---|---|---|",
    ]
    for n, per in kae["by_n"].items():
        for k, e in per.items():
            its = ", ".join(str(i) for i in e["iterations"])
            lines.append(f"| {n} | h = {BANDWIDTHS[k]:g} | {its} | {_cell(e['group_mean'])} | "
                         f"{_cell(e[k])} | {_diff(e['difference'])} |")  # fmt: skip
    return lines
