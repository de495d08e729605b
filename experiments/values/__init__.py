"""``advest experiment values``: an SVEB-style value-estimation benchmark (after the SVEB of
Chen et al., arXiv:2605.29782) on the embedded task and model, or a local checkpoint.

States are (problem, rollout i, prefix of t response tokens); the ground truth V_MC is the mean
reward of M Monte Carlo continuations of the state by the same policy (binomial SE reported).
Each estimator gives the baseline it would use for token t of rollout i from the group, never
seeing the continuations: the group mean (own return included: the paper's V̂_avg, leaky), the
leave-one-out mean, Numca, Hista (b = R_i − A_{i,t}). Scores: MSE, noise-corrected MSE, Spearman,
and the spread of (V̂ − group mean) as the collapse diagnostic, with bootstrap 95% intervals over
problems; every state's row is kept. Also KAE's claim on a policy trained between iterations
(``experiments/values/kae.py``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from advest.experiments.stats import cluster_bootstrap
from advest.fast import registry
from advest.fast.detokenize import texts_and_offsets
from advest.training.data import Item
from advest.training.evaluate import embedded_held_out
from advest.training.policy import load_policy, rollout_forward
from advest.training.prompts import token_ids as prompt_ids
from advest.training.rollout import Rollout, plan
from advest.training.scoring import Scorer

from . import kae as values_kae
from .kae import sample_state
from .paired import mse_rows

TOKEN_BASELINES = ("numca", "hista")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for v in np.unique(x):  # average ranks for ties
            r[x == v] = r[x == v].mean()
        return r

    # float64 noise (e.g. two ways of computing one leave-one-out mean) must not split ties
    ra, rb = ranks(np.round(a, 12)), ranks(np.round(b, 12))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _scores(est: np.ndarray, truth: np.ndarray, group: np.ndarray, m: int) -> dict[str, float]:
    err = (est - truth) ** 2
    return {
        "mse": float(err.mean()),
        "mse_noise_corrected": float((err - truth * (1 - truth) / (m - 1)).mean()),
        "spearman": _spearman(est, truth),
        "spread_vs_group_mean": float((est - group).std()),
    }


def _bootstrap(
    rows: list[dict[str, Any]], key: str, m: int, reps: int, seed: int, corrected: bool = False
) -> list[float]:
    """95% percentile interval of the MSE of ``key`` against V_MC (``corrected``: less V_MC's own
    binomial variance v(1 − v)/(m − 1)), resampling problems with their states."""
    e, t = np.array([r[key] for r in rows]), np.array([r["v_mc"] for r in rows])
    noise = t * (1 - t) / (m - 1) if corrected else 0.0
    problems = np.array([r["problem"] for r in rows])
    return list(cluster_bootstrap((e - t) ** 2 - noise, problems, reps, seed))


def _items(a: Any, seed: int) -> list[Item]:
    """``a.problems`` held-out prompts: the embedded task's (drawn with ``seed``), a JSONL
    file's first rows, or a reasoning-gym task's held-out rows for ``--seed`` (offset by
    ``seed``, so the two benchmarks draw different problems)."""
    from advest.training import tasks
    from advest.training.evaluate import items_of, jsonl_items

    if a.data is None:
        return embedded_held_out(a.problems, seed=seed)
    if not tasks.is_task(a.data):
        return jsonl_items(a.data)[: a.problems]
    train = tasks.rows(a.data, a.data_options, a.data_size, a.seed)
    return items_of(tasks.held_out_rows(a.data, a.data_options, a.problems, a.seed + seed, train))


@torch.no_grad()
def _item_baselines(
    model: Any, tok: Any, a: Any, scorer: Scorer, estimators: dict[str, Any], item: Any
) -> tuple[Tensor, Tensor, Tensor, Tensor, dict[str, Tensor]]:
    """One group of G rollouts of ``item``: the prompt ids, ``token_ids [1, G, T]``, ``mask
    [1, G, T]``, the rewards ``[G]`` and each estimator's baseline ``[G, T]``."""
    prompt = torch.tensor(prompt_ids(tok, item.prompt))
    scored = sample_state(model, tok, prompt, item.answer, a.group, a.max_new_tokens, a, scorer)
    T = a.max_new_tokens
    token_ids = scored.responses.reshape(1, a.group, T)
    mask = scored.mask.reshape(1, a.group, T)
    rewards = scored.rewards.double()  # [1, G]
    texts, offsets = texts_and_offsets(token_ids, mask, tok)
    seqs = torch.cat([prompt.expand(a.group, -1), token_ids[0]], 1)
    prompt_mask = torch.ones(a.group, prompt.numel(), dtype=torch.long)
    logp, entropy, hidden, _ = rollout_forward(
        model, seqs, prompt_mask, mask[0], temperature=a.temperature, chunks=1, hidden=True
    )  # hidden: [G, T, D], the state at P−1+t emitted token t
    assert hidden is not None
    R = rewards[0]
    rollout = Rollout(
        prompt_ids=torch.zeros(1, dtype=torch.long),
        token_ids=token_ids,
        mask=mask,
        rewards=rewards,
        logprobs=logp.unsqueeze(0),
        texts=texts,
        offsets=offsets,
        reward_parts=scored.parts,
        reward_weights=torch.tensor(scorer.weights, dtype=torch.float64),
        sequences=seqs,
        prompt_mask=prompt_mask,
        entropy=entropy.unsqueeze(0),
        truncated=scored.truncated.reshape(1, a.group),
        hidden=hidden.unsqueeze(0).double(),
    )
    base = {  # the baseline each token-level estimator used: b = R_i − A_{i,t}
        name: R.unsqueeze(-1) - p.output(rollout)[0].double() for name, p in estimators.items()
    }
    return prompt, token_ids, mask, R, base


def _problem_rows(
    model: Any, tok: Any, a: Any, scorer: Scorer, estimators: dict[str, Any], item: Item, seed: str
) -> list[dict[str, Any]]:
    """``a.states`` states of one problem's group, each a row: V_MC and every baseline."""
    rng = random.Random(seed)  # per problem, so that a resumed run draws what it would have
    torch.manual_seed(rng.randrange(2**62))
    prompt, token_ids, mask, R, base = _item_baselines(model, tok, a, scorer, estimators, item)
    T, lengths = a.max_new_tokens, mask[0].sum(-1)
    rows = []
    for _ in range(a.states):
        i = rng.randrange(a.group)
        if int(lengths[i]) < 2:
            continue
        t = rng.randrange(1, int(lengths[i]))  # prefix of t tokens; the next token is t
        state = torch.cat([prompt, token_ids[0, i, :t]])
        prefix = token_ids[0, i, :t]
        conts = sample_state(model, tok, state, item.answer, a.mc, T - t, a, scorer, prefix)
        others = torch.cat([R[:i], R[i + 1 :]])
        rows.append({
            "problem": item.prompt, "t": t, "v_mc": float(conts.rewards.double().mean()),
            "group_mean": float(R.mean()), "loo_mean": float(others.mean()),
            **{name: float(b[i, t]) for name, b in base.items()},
        })  # fmt: skip
    return rows


def states_benchmark(model: Any, tok: Any, a: Any, scorer: Scorer, out: Path) -> dict[str, Any]:
    """Prefixes of the model's own rollouts, each valued by Monte Carlo (``a.mc`` continuations)
    and by every token-level baseline (b = R_i − A_{i,t}), the group mean and the leave-one-out
    mean; ``_summary`` scores them. Each finished problem's rows are appended to
    ``out/states.jsonl`` as one line, and a run given the same ``--out`` skips those problems."""
    items = _items(a, seed=7)
    estimators = {  # resolved once; hista with the block size the responses need
        name: plan(name, options={"w": a.hista_w} if name == "hista" else {})
        for name in TOKEN_BASELINES
        if name in registry.names()
    }
    path = out / "states.jsonl"
    kept = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    done = {d["index"]: d["rows"] for d in kept}
    start, todo = time.perf_counter(), [i for i in range(len(items)) if i not in done]
    what = f"states ({len(done)} problems done before)"
    for count, index in enumerate(todo):
        values_kae.progress(what, count, len(todo), start)
        got = _problem_rows(model, tok, a, scorer, estimators, items[index], f"{a.seed}/{index}")
        done[index] = got
        with path.open("a") as f:
            f.write(json.dumps({"index": index, "rows": got}) + "\n")
        said = no_signal(list(done.values()), a) if count == 2 else None
        if said:
            print(f"advest experiment values: warning: {said}", file=sys.stderr)
    return _summary([r for i in sorted(done) for r in done[i]], a) | {"problems_done": len(done)}


def no_signal(problems: list[list[dict[str, Any]]], a: Any) -> str | None:
    """What to say when every reward of ``problems`` (each a list of state rows) is 0: then
    every baseline is 0 and every score is 0, which looks like a result and is none."""
    if any(r["group_mean"] or r["v_mc"] for rows in problems for r in rows):
        return None
    return (f"every reward of the first {len(problems)} problems is 0 (--reward {a.reward}, "
            f"--max_new_tokens {a.max_new_tokens}): check the reward and the budget")  # fmt: skip


def so_far(out: Path) -> dict[str, Any]:
    """The metrics of ``out`` from the parts finished so far: the states of the problems in
    ``states.jsonl`` (``problems_done`` says how many) and ``kae.json`` if it exists."""
    from types import SimpleNamespace

    a = SimpleNamespace(**json.loads((out / "config.json").read_text()))
    path, metrics = out / "states.jsonl", {}
    if path.is_file():
        done = [json.loads(line) for line in path.read_text().splitlines()]
        rows = [r for d in sorted(done, key=lambda d: d["index"]) for r in d["rows"]]
        metrics["states"] = _summary(rows, a) | {"problems_done": len(done)}
    if (out / "kae.json").is_file():
        metrics["kae"] = json.loads((out / "kae.json").read_text())
    return metrics


def _summary(rows: list[dict[str, Any]], a: Any) -> dict[str, Any]:
    """Each baseline's error against the Monte Carlo values of the sampled states, with its
    bootstrap interval, and the rows themselves."""
    if not rows:
        raise ValueError("no state had a response of 2+ tokens; raise --max_new_tokens")
    truth = np.array([r["v_mc"] for r in rows])
    group = np.array([r["group_mean"] for r in rows])
    result: dict[str, Any] = {
        "states": len(rows),
        "mean_binomial_se": float(np.mean(np.sqrt(truth * (1 - truth) / a.mc))),
        "reference_spread_v_mc_minus_group_mean": float((truth - group).std()),
        "estimators": {},
    }
    for key in ("group_mean", "loo_mean", *(n for n in TOKEN_BASELINES if n in rows[0])):
        est = np.array([r[key] for r in rows])
        s: dict[str, Any] = {**_scores(est, truth, group, a.mc)}
        s["mse_95ci"] = _bootstrap(rows, key, a.mc, a.bootstrap, a.seed)
        s["mse_noise_corrected_95ci"] = _bootstrap(rows, key, a.mc, a.bootstrap, a.seed, True)
        result["estimators"][key] = s
    result["rows"] = rows
    return result


def parser() -> Any:
    from advest.parsing import add_settings, new_parser, switch
    from advest.training.config import REWARD_SETTINGS, RLConfig

    p = new_parser("advest experiment values", __doc__ or "")
    p.add_argument(
        "--model",
        type=str | None,
        default=None,
        help="checkpoint folder, .gguf file or smollm2-135m-instruct (default: embedded)",
    )
    p.add_argument(
        "--data",
        type=str | None,
        default=None,
        help="JSONL prompts/answers or reasoning_gym:TASK (default: the embedded task)",
    )
    add_settings(p, RLConfig, ("data_options", "data_size"))  # prompts go in as plain text
    p.add_argument("--problems", type=int, default=100, help="held-out problems")
    p.add_argument("--group", type=int, default=16, help="G: rollouts per problem")
    p.add_argument("--states", type=int, default=3, help="states (prefixes) per problem")
    p.add_argument("--mc", type=int, default=48, help="M continuations per state (and prompt)")
    p.add_argument("--iterations", type=int, default=6, help="KAE: iterations (policy steps + 1)")
    p.add_argument("--kae_prompts", type=int, default=32, help="KAE: prompts (of --problems)")
    p.add_argument("--kae_train", type=int, default=8, help="KAE: samples per prompt trained on")
    p.add_argument("--kae_lr", type=float, default=1e-3, help="KAE: the policy's AdamW lr")
    p.add_argument("--kae_lora_r", type=int, default=16, help="KAE: LoRA rank on a real model")
    # continuations of a prefix are sampled by ``generate`` (the one engine taking a prefix)
    add_settings(p, RLConfig, ("max_new_tokens", "temperature", "top_p", *REWARD_SETTINGS))
    p.add_argument("--hista_w", type=int, default=1, help="Hista block size (responses are short)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (95% CI)")
    p.add_argument("--seed", type=int, default=0, help="seeds the sampling")
    switch(p, "quick", False, "tiny sizes: a smoke run")
    p.add_argument("--only", choices=("states", "kae"), default=None,
                   help="one part (two processes into one --out; default both)")  # fmt: skip
    p.add_argument("--out", type=str | None, default=None, help="default runs/values/<timestamp>")
    return p


def main(argv: list[str]) -> int:
    from advest.parsing import fail, gather_lists
    from advest.training import models, tasks
    from advest.training.config import ConfigError, build_scorer, check_sampling, check_task
    from advest.training.data import DataError
    from advest.training.paths import check_model

    a = parser().parse_args(gather_lists(argv))
    try:
        check_sampling(a.temperature, a.top_p)
        if a.model is not None:
            check_model(a.model, a.max_new_tokens)
        check_task(a.data, a.data_options, a.data_size, a.reward, held=a.problems, seed=a.seed)
        if a.data is not None and not tasks.is_task(a.data):
            _items(a, 0)  # read and checked in full before any model loads
        scorer = build_scorer(a.reward, a.reward_weights, a.reward_timeout, a.reward_workers)
    except (ConfigError, DataError) as error:
        return fail("advest experiment values", str(error))
    if a.quick:
        a.problems, a.group, a.states, a.mc, a.iterations, a.bootstrap = 4, 4, 2, 4, 2, 20
        a.kae_prompts, a.kae_train = 4, 4
    out = Path(a.out or f"runs/values/{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    changed = _changed_settings(out, a)
    if changed:
        said = f"{out / 'states.jsonl'} holds rows made with other settings ({changed})"
        return fail("advest experiment values", f"{said}; give another --out or delete it")
    model_path = models.folder(a.model)
    model, tok = load_policy(model_path)
    model.eval()
    (out / "config.json").write_text(json.dumps({**vars(a), "model_path": model_path}, indent=1))
    try:
        metrics = _run(model, tok, a, scorer, out)
    finally:
        scorer.close()
    if a.only is not None:  # one half: the other run into the same --out finishes the set
        print(f"advest experiment values: the {a.only} part is in {out}")
        return 0
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    (out / "summary.md").write_text(summary(metrics))
    _plot(metrics, out)
    print(summary(metrics))
    return 0


def _run(model: Any, tok: Any, a: Any, scorer: Scorer, out: Path) -> dict[str, Any]:
    """The parts ``a.only`` names (both by default). The KAE part is kept in ``out/kae.json``
    once finished (it trains the policy, so it runs in one piece) and read from there after."""
    metrics: dict[str, Any] = {}
    if a.only in (None, "states"):
        metrics["states"] = states_benchmark(model, tok, a, scorer, out)
    if a.only in (None, "kae"):
        path = out / "kae.json"
        if not path.is_file():
            items = _items(a, 11)[: a.kae_prompts]
            kae = values_kae.kae_benchmark(model, tok, a, scorer, items)
            path.write_text(json.dumps(kae))
        metrics["kae"] = json.loads(path.read_text())
    return metrics


RESUME_FREE = ("out", "bootstrap", "only")
"""Settings a resumed run may change: they do not touch the rows already in states.jsonl."""


def _changed_settings(out: Path, a: Any) -> str:
    """The settings (``name: was → now``) that differ from those of the rows already in
    ``out/states.jsonl``; empty when there are none or nothing to resume."""
    if not (out / "states.jsonl").is_file() or not (out / "config.json").is_file():
        return ""
    was = json.loads((out / "config.json").read_text())
    now = json.loads(json.dumps(vars(a)))  # as the file holds them (tuples as lists)
    return ", ".join(f"--{k}: {was.get(k)!r} → {v!r}" for k, v in now.items()
                     if k not in RESUME_FREE and was.get(k) != v)  # fmt: skip


def summary(m: dict[str, Any]) -> str:
    s = m["states"]
    lines = [
        "# advest experiment values",
        "",
        f"{s['states']} states; mean binomial SE of V_MC {s['mean_binomial_se']:.3f}; "
        f"spread of (V_MC − group mean) {s['reference_spread_v_mc_minus_group_mean']:.3f}",
        "",
        *mse_rows("estimator", s["estimators"]),
    ]
    lines += ["", *values_kae.table(m["kae"])]
    return "\n".join(lines) + "\n"


def _plot(m: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = m["states"]["rows"]
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for key in ("loo_mean", *(n for n in TOKEN_BASELINES if n in rows[0])):
        ax.hist([r[key] - r["group_mean"] for r in rows], bins=30, alpha=0.5, label=key)
    ax.hist(
        [r["v_mc"] - r["group_mean"] for r in rows],
        bins=30,
        histtype="step",
        color="k",
        label="V_MC",
    )
    ax.set_xlabel("V̂ − group mean (collapse diagnostic)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "collapse.png", dpi=120)
    plt.close(fig)
