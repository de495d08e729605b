"""One table of hostile input, every command: each row is (command line, files it needs, the
fragment its one-line refusal must contain). Every row must exit non-zero with that message on
stderr, no traceback, before any model loads (loading one fails the row), leaving every file
it was given as it was.

``ADVEST_HOSTILE_REPORT=FILE`` records each row's outcome in FILE instead of asserting: how the
table was measured on the code before issue 27 (see the commit message).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from tests.core.training.test_resume import model  # noqa: F401  (the fixture)
from tests.core.training.test_training import TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS
REPORT = os.environ.get("ADVEST_HOSTILE_REPORT")
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


class ModelLoaded(BaseException):
    """Raised by the guarded loaders: a row that gets here was not refused before loading."""


@dataclass(frozen=True)
class Case:
    id: str
    argv: str  # {model}, {tmp} are filled in; split on spaces
    says: str
    setup: Callable[[Path, str], None] = lambda tmp, src: None
    cpu_only: bool = False  # a refusal of CPU machines: any GPU is hidden for the row
    env: dict[str, str] = field(default_factory=dict)  # set for the row only
    code: int | None = None  # the exit code, where the command documents one per outcome


# PATH without Coq: how `advest prove` runs on a machine where it is not installed
NO_COQ = os.pathsep.join(
    d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "coqc").exists()
)


TRAIN = "train --out {tmp}/runs --name r --steps 1 --prompts_per_step 2 --group_size 4 "
TRAIN += "--eval_prompts 0 --reward_workers 0 --estimator grpo --k 2 --model {model} "


def _file(name: str, text: str) -> Callable[[Path, str], None]:
    def make(tmp: Path, src: str) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)

    return make


def _model_copy(mangle: Callable[[bytes], bytes]) -> Callable[[Path, str], None]:
    def make(tmp: Path, src: str) -> None:
        shutil.copytree(src, tmp / "m")
        weights = tmp / "m" / "model.safetensors"
        weights.write_bytes(mangle(weights.read_bytes()))

    return make


def _run(step: int, rl: dict[str, object], ckpt: bool = True) -> Callable[[Path, str], None]:
    """A run folder ``{tmp}/runs/r`` whose checkpoint holds ``step`` (no weights needed)."""

    def make(tmp: Path, src: str) -> None:
        folder = tmp / "runs" / "r"
        (folder / "checkpoints").mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"rl": rl, "trainer": {}}))
        if ckpt:
            state = {"advest": {"rollout_step": step}, "epoch": 1}
            torch.save(state, folder / "checkpoints" / "last.ckpt")

    return make


CHAT = json.dumps({"prompt": [{"role": "user", "content": "1+1?"}], "answer": "2"}) + "\n"
LONG = json.dumps({"prompt": "1+" * 40 + "1=", "answer": "41"}) + "\n"
GOOD = json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n"
CASES = [
    # ---- train: numbers that are not finite (issue 27: trained NaN weights, exit 0)
    Case("train-lr-1e999", TRAIN + "--lr 1e999", "--lr must be a finite number"),
    Case("train-yaml-inf", TRAIN + "--config {tmp}/c.yaml", "--lr must be a finite number",
         _file("c.yaml", "lr: .inf\n")),
    Case("train-clip-high-inf", TRAIN + "--clip_high 1e999", "--clip_high must be a finite"),
    Case("train-temperature-inf", TRAIN + "--temperature=1e999", "--temperature must be a finite"),
    Case("train-yaml-nan", TRAIN + "--config {tmp}/c.yaml", "--kl_coef must be a finite number",
         _file("c.yaml", "kl_coef: .nan\n")),
    Case("train-options-nan", TRAIN + "--config {tmp}/c.yaml",
         "--estimator_options eps must be a finite number",
         _file("c.yaml", "estimator_options: {eps: .nan}\n")),
    Case("train-weights-inf", TRAIN + "--reward exact digits --reward_weights 1 1e999",
         "--reward_weights must be a finite number"),
    Case("train-float16-cpu", TRAIN + "--dtype float16", "--dtype float16 needs a GPU",
         cpu_only=True),
    # ---- train: the run folder (issue 27: --name .. escaped --out; reuse overwrote a run)
    Case("train-name-dotdot", TRAIN + "--name ..", "must be a plain folder name"),
    Case("train-name-parent", TRAIN + "--name ../mine", "must be a plain folder name",
         _file("mine/notes.txt", "a user's file")),
    Case("train-name-absolute", TRAIN + "--name {tmp}/mine", "must be a plain folder name",
         _file("mine/notes.txt", "a user's file")),
    Case("train-name-reused", TRAIN, "already holds files; continue that run with --resume",
         _file("runs/r/notes.txt", "an earlier run")),
    Case("train-resume-complete", TRAIN + "--steps 3 --resume", "is complete at step 3",
         _run(3, {})),
    Case("train-resume-fewer", TRAIN + "--steps 2 --resume",
         "to extend it pass --steps M > 3 --resume", _run(3, {})),
    Case("train-resume-changed", TRAIN + "--steps 5 --resume", "--group_size 4 (the run has 8)",
         _run(3, {"group_size": 8})),
    Case("train-resume-nothing", TRAIN + "--resume", "--resume: no checkpoint at",
         _run(3, {}, ckpt=False)),
    Case("train-resume-no-name", "train --resume --out {tmp}/runs", "--resume needs --name"),
    Case("train-out-file", TRAIN + "--out {tmp}/f", "--out {tmp}/f is a file", _file("f", "x")),
    # root may write anywhere a mode allows: as root, a folder under /proc (never writable)
    Case("train-out-read-only",
         TRAIN + ("--out /proc/advest-test/runs" if ROOT_USER else "--out {tmp}/ro/runs"),
         "is not writable", lambda tmp, src: (tmp / "ro").mkdir(mode=0o500)),
    # ---- train: the model and the data (issue 27: tracebacks while or after loading)
    Case("train-truncated-weights", TRAIN + "--model {tmp}/m", "model.safetensors is truncated",
         _model_copy(lambda b: b[: len(b) // 2])),
    Case("train-garbage-weights", TRAIN + "--model {tmp}/m", "is not a safetensors file",
         _model_copy(lambda b: struct.pack("<Q", 1 << 40) + b"{}")),
    Case("train-prompt-budget", TRAIN + "--data {tmp}/d.jsonl --max_prompt_tokens 1",
         "every prompt is longer than --max_prompt_tokens 1", _file("d.jsonl", GOOD)),
    Case("train-prompt-context", TRAIN + "--data {tmp}/d.jsonl",
         "every prompt is longer than --max_prompt_tokens", _file("d.jsonl", LONG)),
    Case("train-chat-embedded", "train --out {tmp}/runs --data {tmp}/d.jsonl",
         "the embedded model has none", _file("d.jsonl", CHAT)),
    Case("train-embedded-context", "train --out {tmp}/runs --max_new_tokens 64",
         "does not fit the model's context of 64"),
    Case("train-accelerator-gpu", TRAIN + "--trainer.accelerator gpu", "no GPU is visible",
         cpu_only=True),
    Case("train-devices-0", TRAIN + "--trainer.devices 0",
         "--trainer.devices '0': give at least 1 device"),
    Case("train-grpo-alone", TRAIN + "--estimator grpo --group_size 1 --prompts_per_step 2",
         "with --group_size 1 the run learns nothing"),
    # ---- eval
    Case("eval-samples-negative", "eval --out {tmp}/e --samples -2",
         "--samples must be at least 1"),
    Case("eval-samples-zero", "eval --out {tmp}/e --samples 0", "--samples must be at least 1"),
    Case("eval-prompts-zero", "eval --out {tmp}/e --prompts 0", "--prompts must be at least 1"),
    Case("eval-max-new-tokens-zero", "eval --out {tmp}/e --max_new_tokens 0",
         "--max_new_tokens must be at least 1"),
    Case("eval-chat-embedded", "eval --out {tmp}/e --data {tmp}/d.jsonl", "no chat template",
         _file("d.jsonl", CHAT)),
    Case("eval-out-file", "eval --out {tmp}/f --model {model}", "--out {tmp}/f is a file",
         _file("f", "x")),
    Case("eval-temperature-inf", "eval --out {tmp}/e --temperature 1e999",
         "greater than 0 and finite"),
    Case("eval-truncated-weights", "eval --out {tmp}/e --model {tmp}/m",
         "model.safetensors is truncated", _model_copy(lambda b: b[:-100])),
    # ---- check
    Case("check-syntax-error", "check hostile_syntax:f",
         "cannot import hostile_syntax:f: SyntaxError",
         _file("hostile_syntax.py", "def f(:\n")),
    Case("check-import-raises", "check hostile_raises:f",
         "cannot import hostile_raises:f: RuntimeError",
         _file("hostile_raises.py", "raise RuntimeError('no')\n")),
    Case("check-hangs", "check hostile_hang:f --timeout 5", "no answer within --timeout 5 s",
         _file("hostile_hang.py", "def f(rewards):\n    while True:\n        pass\n"), code=3),
    Case("check-dies", "check hostile_exit:f", "the process checking it died (exit code 7)",
         _file("hostile_exit.py", "import os\ndef f(rewards):\n    os._exit(7)\n"), code=3),
    Case("check-timeout-zero", "check hostile_hang:f --timeout 0",
         "--timeout must be a finite number > 0", code=2),
    Case("check-nan-output", "check hostile_nan:f --n 3",
         "returns non-finite advantages for finite rewards (float32, N=3: NaN in 32 of 32 groups",
         _file("hostile_nan.py", "import torch\ndef f(rewards):\n"
               "    return torch.full_like(rewards, float('nan'))\n"), code=1),
    Case("check-inf-output", "check hostile_inf:f --n 2", "returns non-finite advantages for "
         "finite rewards (float32, N=2: inf in ", _file("hostile_inf.py", "def f(r):\n"
         "    return 1 / (r - r.mean(-1, keepdim=True))\n"), code=1),
    # ---- prove
    Case("prove-without-coq", "prove --max_n 1 --unbiased_max_n 1 --no_progress",
         "coqc not found on PATH: Coq is not installed. Install it with: apt-get update && "
         "apt-get install -y --no-install-recommends coq libcoq-mathcomp-ssreflect",
         env={"PATH": NO_COQ}, code=1),
    # ---- bench
    Case("bench-device-cuda", "bench --device cuda", "--device cuda: no GPU is visible",
         cpu_only=True),
    Case("bench-device-bogus", "bench --device bogus", "--device 'bogus': choose cpu or cuda"),
    Case("bench-threads-negative", "bench --threads -1", "--threads must be at least 1"),
    Case("bench-repeats-zero", "bench --repeats 0", "--repeats must be at least 1"),
]  # fmt: skip

# ---- train: the settings (and data files) tests/core/training/test_validation.py held before
# (issue 27 item 5)
SETTINGS = [
    ("--lr 0", "--lr must be greater than 0"),
    ("--lr=-1e-4", "--lr must be greater than 0"),
    ("--weight_decay=-0.1", "--weight_decay must be at least 0"),
    ("--kl_coef=-0.1", "--kl_coef must be at least 0"),
    ("--max_grad_norm 0", "--max_grad_norm must be greater than 0"),
    ("--warmup_steps=-1", "--warmup_steps must be at least 0"),
    ("--reward_timeout=-1", "--reward_timeout must be greater than 0"),
    ("--reward_timeout 0", "--reward_timeout must be greater than 0"),
    ("--eval_prompts 2 --eval_samples 0", "--eval_samples must be at least 1"),
    ("--eval_prompts=-1", "--eval_prompts must be at least 0"),
    ("--checkpoint_every=-1", "--checkpoint_every must be at least 0"),
    ("--temperature 0", "--temperature must be greater than 0"),
    ("--top_p 0", "--top_p must lie in (0, 1]"),
    ("--clip_low 1", "--clip_low must lie in [0, 1)"),
    ("--reward nope", "--reward: unknown reward 'nope'"),
    ("--estimator nope", "--estimator: unknown estimator 'nope'"),
    ("--estimator rloo --group_size 1", "Change --group_size, --k or --estimator"),
    ("--estimator maxpo --k 4", "Change --group_size, --k"),
]
CASES += [
    Case(f"train-setting{i}-{flags.split()[0][2:]}", TRAIN + flags, says)
    for i, (flags, says) in enumerate(SETTINGS)
]


def _bytes(name: str, body: bytes) -> Callable[[Path, str], None]:
    def make(tmp: Path, src: str) -> None:
        (tmp / name).write_bytes(body)

    return make


ROW = b'{"prompt": "1+1=", "answer": "2"}\n'
DATA_FILES = [
    (b"", "no rows (the file is empty)"),
    (b"\n  \n", "no rows (the file is empty)"),
    (ROW + ROW + b'{"prompt": "2+2=", "answer": 4\n', "line 3: not JSON"),
    (ROW + b'{"prompt": "2+2="}\n', "line 2: missing 'answer'"),
    (ROW + b'{"answer": "4"}\n', "line 2: missing 'prompt'"),
    (ROW + b'["2+2=", "4"]\n', "line 2: a row must be a JSON object"),
    (ROW + b'{"prompt": "", "answer": "4"}\n', "line 2: 'prompt' is empty"),
    (ROW + b'{"prompt": "2+2=", "answer": null}\n', "line 2: 'answer' must be text"),
    (ROW + b'{"prompt": [{"role": "user"}], "answer": "4"}\n', "line 2: message 0 needs"),
    (ROW + b'{"prompt": [{"role": "bot", "content": "x"}], "answer": "4"}\n', "'role'"),
    (ROW + b'{"prompt": "caf\xe9", "answer": "4"}\n', "line 2: not UTF-8 (byte 0xe9"),
]
CASES += [
    Case(f"train-data{i}", TRAIN + "--data {tmp}/d.jsonl", says, _bytes("d.jsonl", body))
    for i, (body, says) in enumerate(DATA_FILES)
]


# ---- train: Lightning flags that cannot work with the trainer (test_cli.py held them)
def _trainer_flags() -> list[Case]:
    from advest.training.command import REFUSED_TRAINER_FLAGS

    return [
        Case(f"train-trainer-{flag}", TRAIN + f"--trainer.{flag} 1", REFUSED_TRAINER_FLAGS[flag])
        for flag in sorted(REFUSED_TRAINER_FLAGS)
    ]


CASES += _trainer_flags()


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model or building the embedded one fails the row."""
    import transformers

    from advest.training import embedded

    def loaded(*args: object, **kw: object) -> None:
        raise ModelLoaded

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", loaded)
    monkeypatch.setattr(embedded, "build", loaded)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_input_is_refused_in_words_before_loading_touching_nothing(
    case: Case,
    model: str,  # noqa: F811
    tmp_path: Path,
    guarded: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from advest.cli import main

    if case.cpu_only:  # on a GPU machine the refusal must still be seen, not skipped
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    case.setup(tmp_path, model)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = case.argv.format(tmp=tmp_path, model=model).split()
    before = _snapshot(tmp_path)
    outcome = "words"
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except ModelLoaded:
        outcome, code = "reached model loading", -1
    except Exception as error:  # what the table measures
        outcome, code = f"traceback ({type(error).__name__})", -1
    err = capsys.readouterr().err
    if outcome == "words" and code == 0:
        outcome = "silent (exit 0)"
    said = case.says.format(tmp=tmp_path) in err
    if REPORT:  # measuring, not asserting
        with open(REPORT, "a") as f:
            f.write(json.dumps({"id": case.id, "outcome": outcome, "expected": said}) + "\n")
        return
    assert outcome == "words" and code != 0, (outcome, err)
    assert case.code in (None, code), (code, err)
    assert said, err
    assert "Traceback" not in err, err
    assert _snapshot(tmp_path) == before


def test_every_row_has_a_unique_id() -> None:
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_demo_shows_a_k_equal_g_estimator_only_at_the_k_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tang_passk fixes K = G: the demo used to print it under any --k as if it honoured it."""
    from advest.cli import main

    assert main(["demo", "--rewards", "3", "1", "4", "1", "5", "--k", "2"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tang_passk"))
    assert "K = N only" in line and "pass --k 5" in line
    assert main(["demo", "--rewards", "3", "1", "4", "1", "5", "--k", "5"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tang_passk"))
    assert line.split()[1:6] == ["0", "0", "0", "0", "1"]


def test_prove_without_coq_says_in_its_table_that_coq_did_not_run_and_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its table used to say "FAILED: {'N': 'all', 'K': 'all'}: unknown" for each Coq claim."""
    from advest.cli import main
    from advest.proofs import coq_check as coq

    monkeypatch.setenv("PATH", NO_COQ)
    assert main(["prove", "--max_n", "1", "--unbiased_max_n", "1", "--no_progress"]) == 1
    out = capsys.readouterr().out.splitlines()
    coq_rows = [line for line in out if "  coq  " in line]
    assert len(coq_rows) == len({t.claim for t in coq.THEOREMS}) > 0
    assert all("NOT RUN: coqc not found on PATH (see below)" in row for row in coq_rows)
    assert not any("FAILED" in line for line in out)
    assert f"NOT RUN: {coq.MISSING}" in out
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    assert coq.INSTALL in readme  # the install command is the one the README runs


def test_prove_without_z3_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """z3 comes with the test extra: a core install used to end in a ModuleNotFoundError."""
    import sys

    import advest.proofs
    from advest.cli import main

    monkeypatch.setitem(sys.modules, "z3", None)  # None in sys.modules: `import z3` fails
    for name, module in list(sys.modules.items()):
        if name.startswith("advest.proofs."):  # imported afresh, restored afterwards
            monkeypatch.delitem(sys.modules, name)
            monkeypatch.setattr(advest.proofs, name.rsplit(".", 1)[1], module, raising=False)
    assert main(["prove", "--max_n", "1"]) == 2
    err = capsys.readouterr().err
    assert "the z3 prover is not installed. Install it with: pip install z3-solver" in err
