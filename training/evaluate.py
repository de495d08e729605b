"""Held-out pass@k curves: n samples per prompt, the unbiased estimator for k = 1..n.

``advest eval --model PATH`` writes ``passk.json``, ``passk.md`` and ``passk.png``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .data import Item, PromptSource, Row, read_rows
from .generation import Engine, Sampling, generate
from .metrics import pass_at_k
from .prompts import encode
from .sampling import Scored, passes, sample_and_score
from .scoring import Scorer
from .task import held_out

if TYPE_CHECKING:
    from .config import RLConfig


def embedded_held_out(n: int, seed: int = 0, digits: int = 2) -> list[Item]:
    return [Item(i, p.prompt, p.answer) for i, p in enumerate(held_out(seed, n, digits))]


def jsonl_items(path: str, flag: str = "--data") -> list[Item]:
    """Every row of a prompt/answer JSONL, in file order (parsed and checked by ``read_rows``)."""
    return items_of(read_rows(path, flag=flag))


def items_of(rows: list[Row]) -> list[Item]:
    return [Item(i, r.prompt, r.answer) for i, r in enumerate(rows)]


def held_out_items(cfg: RLConfig, source: PromptSource) -> list[Item]:
    """A run's held-out prompts (at most ``cfg.eval_prompts``): the embedded task's held-out
    problems, ``--eval_data``, the ``--eval_fraction`` split of ``--data`` (``source.held``), or
    none (a ``--data`` run given neither)."""
    from .config import eval_sizes

    prompts = eval_sizes(cfg)[0]
    if cfg.embedded_task:
        items = embedded_held_out(prompts, cfg.seed)
    elif cfg.eval_data is not None:
        items = jsonl_items(cfg.eval_data, "--eval_data")
    else:
        items = items_of(source.held)
    return items[:prompts]


def resolve_model(path: str) -> str:
    """``advest eval --model``: a model folder as is, or a run folder's exported ``model``."""
    folder = Path(path)
    # a run folder's own config.json is the run's settings, not a model's: look for model/ first
    return str(folder / "model") if (folder / "model").is_dir() else path


def pass_curve(model: Any, tokenizer: Any, items: list[Item], **kw: Any) -> dict[int, float]:
    """Mean over prompts of pass@k, k = 1..samples (``pass_counts``'s keywords)."""
    return curve_of(pass_counts(model, tokenizer, items, **kw), kw["samples"])


def curve_of(counts: list[int], samples: int) -> dict[int, float]:
    """Per-prompt pass counts (of ``samples`` each) → mean pass@k for k = 1..samples."""
    return {
        k: sum(pass_at_k(samples, c, k) for c in counts) / len(counts)
        for k in range(1, samples + 1)
    }


@torch.no_grad()
def pass_counts(
    model: Any,
    tokenizer: Any,
    items: list[Item],
    *,
    samples: int,
    max_new_tokens: int,
    scorer: Scorer,
    temperature: float = 1.0,
    top_p: float = 1.0,
    chat_template: bool = True,
    system_prompt: str | None = None,
    seed: int = 1234,
    batch_sequences: int = 512,
    engine: Engine | None = None,
    progress: Callable[[int, int], None] | None = None,
    turns: int = 1,
    embedded: bool = False,
    first: list[int] | None = None,
) -> list[int]:
    """How many of ``samples`` completions of each prompt pass: a sample passes when the first
    reward of ``scorer`` (the verifier) gives full credit, as in training's pass@k columns;
    further rewards shape the training reward only. Sampled and scored as training samples
    (``sampling.sample_and_score``), by ``engine`` (``generation.ENGINES``; default
    ``generate``). Prompts are sampled in chunks of at most ``batch_sequences`` completions
    (at least one prompt): 32 prompts at the embedded model's 16 samples, 8 at 64, so memory and
    ``progress(prompts done, prompts)`` (called after each chunk) follow the work. ``turns``:
    episodes of up to that many turns (a failing answer gets the task's feedback and another
    turn; ``embedded``: the embedded task's feedback), counted after their last turn; the same
    episodes' counts after their first turn are appended to ``first`` when it is given (paired:
    one sampling gives both)."""
    was_training = model.training
    model.eval()
    state = torch.get_rng_state()  # evaluation must not move the run's random stream
    torch.manual_seed(seed)
    sampling = Sampling(samples, max_new_tokens, temperature, top_p)
    counts: list[int] = []
    per_chunk = max(1, batch_sequences // max(samples, 1))
    for start in range(0, len(items), per_chunk):
        chunk = items[start : start + per_chunk]
        scored = _sample_chunk(
            model, tokenizer, chunk, sampling, scorer, engine or generate, turns, embedded,
            chat_template=chat_template, system_prompt=system_prompt,
        )  # fmt: skip
        counts += [int(c) for c in passes(scored.parts).sum(-1).tolist()]
        if first is not None:
            opening = scored.parts if scored.first_parts is None else scored.first_parts
            first += [int(c) for c in passes(opening).sum(-1).tolist()]
        if progress is not None:
            progress(len(counts), len(items))
    torch.set_rng_state(state)
    model.train(was_training)
    return counts


def _sample_chunk(
    model: Any,
    tokenizer: Any,
    chunk: list[Item],
    sampling: Sampling,
    scorer: Scorer,
    engine: Engine,
    turns: int,
    embedded: bool,
    *,
    chat_template: bool,
    system_prompt: str | None,
) -> Scored:
    """One chunk of ``pass_counts``' prompts sampled and scored: one turn as training samples
    them, or episodes of up to ``turns`` turns."""
    device = next(model.parameters()).device
    ids, attn = encode(
        tokenizer, [i.prompt for i in chunk], chat_template=chat_template,
        system_prompt=system_prompt,
    )  # fmt: skip
    answers = [i.answer for i in chunk]
    if turns > 1:
        from .episodes import feedback_text, sample_episodes

        return sample_episodes(
            model, tokenizer, ids.to(device), attn.to(device), answers, sampling, scorer,
            turns=turns, feedback=[feedback_text(i.prompt, embedded) for i in chunk],
            engine=engine,
        )  # fmt: skip
    return sample_and_score(
        model, tokenizer, ids.to(device), attn.to(device), answers, sampling, scorer,
        engine=engine,
    )  # fmt: skip


def write(curves: dict[str, dict[int, float]], folder: Path, stem: str = "passk") -> None:
    """``{label: {k: pass@k}}`` → JSON, a Markdown table and a log-x plot."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(curves, indent=1))
    labels = list(curves)
    ks = sorted(next(iter(curves.values())))
    lines = ["| k | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for k in ks:
        lines.append(f"| {k} | " + " | ".join(f"{curves[lab][k]:.3f}" for lab in labels) + " |")
    (folder / f"{stem}.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label in labels:
        ax.plot(ks, [curves[label][k] for k in ks], marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / f"{stem}.png", dpi=120)
    plt.close(fig)


def parser() -> Any:
    from advest.parsing import add_settings, new_parser

    from .config import PROMPT_SETTINGS, REWARD_SETTINGS, SAMPLING_SETTINGS, RLConfig

    p = new_parser("advest eval", "Held-out pass@k curves of a checkpoint.")
    p.add_argument(
        "--model",
        type=str | None,
        default=None,
        help="model folder, a run folder (its exported model/), a .gguf file or "
        "smollm2-135m-instruct; default: the embedded model",
    )
    p.add_argument(
        "--data",
        type=str | None,
        default=None,
        help="JSONL prompts/answers, or reasoning_gym:TASK (its held-out prompts, drawn as "
        "advest train draws them for --seed); default: embedded held-out",
    )
    add_settings(p, RLConfig, ("dtype", *PROMPT_SETTINGS))
    p.add_argument("--seed", type=int, default=0, help="the training run's --seed")
    p.add_argument(
        "--prompts", type=int, default=64, help="held-out prompts (embedded task, reasoning-gym)"
    )
    p.add_argument(
        "--samples", type=int, default=64, help="n samples per prompt: pass@k for k = 1..n"
    )
    add_settings(p, RLConfig, SAMPLING_SETTINGS + REWARD_SETTINGS)
    p.add_argument("--out", type=str, default="runs/eval", help="output folder")
    return p


def _checked_items(ns: Any) -> list[Item]:
    """Every check of ``advest eval``'s settings that needs no model, then the held-out items;
    raises ``ConfigError`` or ``DataError`` naming the flag."""
    from . import models, tasks
    from .config import ConfigError, check_sampling, check_task
    from .embedded import CONTEXT
    from .paths import check_model, check_out, check_weights, has_chat_template

    for flag in ("samples", "prompts", "max_new_tokens"):
        if getattr(ns, flag) < 1:
            raise ConfigError(f"--{flag} must be at least 1; got {getattr(ns, flag)}")
    check_sampling(ns.temperature, ns.top_p)
    check_out(ns.out)
    if ns.model is not None:
        ns.model = resolve_model(ns.model)
        check_model(ns.model, ns.max_new_tokens)
        if not models.is_gguf(ns.model):
            check_weights(ns.model)
    elif ns.max_new_tokens >= CONTEXT:
        raise ConfigError(
            f"--max_new_tokens {ns.max_new_tokens} does not fit the embedded model's context "
            f"of {CONTEXT} tokens; lower --max_new_tokens"
        )
    check_task(ns.data, ns.data_options, ns.data_size, ns.reward, held=ns.prompts, seed=ns.seed)
    if tasks.is_task(ns.data):
        train = tasks.rows(ns.data, ns.data_options, ns.data_size, ns.seed)
        rows = tasks.held_out_rows(ns.data, ns.data_options, ns.prompts, ns.seed, train)
        items = items_of(rows)
    else:
        items = jsonl_items(ns.data) if ns.data else embedded_held_out(ns.prompts)
    chat = [i for i in items if not isinstance(i.prompt, str)]
    if chat and (ns.model is None or not has_chat_template(ns.model)):
        raise ConfigError(
            f"--data {ns.data}: {len(chat)} rows give chat messages but "
            f"{ns.model or 'the embedded model'} has no chat template; give text prompts "
            "or a model whose tokenizer has one"
        )
    return items


def main(argv: list[str]) -> int:
    """``advest eval``: pass@k for k = 1..n of a checkpoint on a held-out set."""
    from advest.parsing import fail, gather_lists

    from . import generation, models
    from .config import ConfigError, build_scorer
    from .data import DataError
    from .policy import load_policy
    from .scale import torch_dtype

    ns = parser().parse_args(gather_lists(argv))
    try:
        items = _checked_items(ns)
        dtype, engine = torch_dtype(ns.dtype), generation.get(ns.generator)
        scorer = build_scorer(ns.reward, ns.reward_weights, ns.reward_timeout, ns.reward_workers)
    except (ConfigError, DataError) as error:
        return fail("advest eval", str(error))
    model_path = models.folder(ns.model)
    model, tokenizer = load_policy(model_path, dtype)
    try:
        curve = pass_curve(
            model,
            tokenizer,
            items,
            samples=ns.samples,
            max_new_tokens=ns.max_new_tokens,
            scorer=scorer,
            temperature=ns.temperature,
            top_p=ns.top_p,
            chat_template=ns.chat_template,
            system_prompt=ns.system_prompt,
            engine=engine,
        )
    finally:
        scorer.close()
    label = Path(ns.model).name if ns.model else Path(model_path).name
    if label == "model":  # a run's export: name it after the run
        label = Path(model_path).parent.name
    write({label: curve}, Path(ns.out))
    for k in (1, 2, 4, 8, 16, 32, 64):
        if k in curve:
            print(f"pass@{k} = {curve[k]:.4f}")
    print(f"wrote {ns.out}/passk.json, passk.md, passk.png")
    return 0
