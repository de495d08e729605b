"""advest installs and imports as a library: one ``advest`` namespace, and a production path
that never loads the exact references or the test catalogue."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Calls every registered estimator once on inputs of the documented shapes (fast.registry's
# INPUTS table), then lists the advest modules that the calls loaded.
CALL_EVERY_ESTIMATOR = r"""
import json, sys
import torch
import advest
from advest.fast.registry import INPUTS

B, G, T, D = 2, 6, 5, 4
gen = torch.Generator().manual_seed(0)
alphabet = "0123456789+= "
chars = torch.randint(len(alphabet), (B, G, T), generator=gen)
starts = torch.arange(T)
inputs = {
    "rewards": (torch.arange(G).repeat(B, 1) % 2).double(),
    "k": 2,
    "lengths": torch.full((B, G), T),
    "token_ids": chars + 3,
    "mask": torch.ones(B, G, T, dtype=torch.bool),
    "logprobs": -torch.rand(B, G, T, generator=gen),
    "hidden": torch.randn(B, G, T, D, generator=gen),
    "texts": [["".join(alphabet[int(c)] for c in chars[b, g]) for g in range(G)] for b in range(B)],
    "offsets": torch.stack([starts, starts + 1], -1).expand(B, G, T, 2).contiguous(),
    "prompt_ids": torch.arange(B),
    "reward_parts": torch.rand(B, G, 3, generator=gen),
    "reward_weights": torch.tensor([1.0, 0.5, 2.0]),
    "sum_pi_squared": torch.full((B, G, T), 0.5),  # Σ_v π(v)², in [π², 1]
    "turn_rewards": torch.rand(B, G, 2, generator=gen),
    "turn_ids": torch.tensor([0, 0, -1, 1] + [-1] * (T - 4)).expand(B, G, T).contiguous(),
}
assert set(inputs) | {"advantages"} == set(INPUTS), "a new input name needs a test value here"
called = []
for name in advest.names():
    entry = advest.entry(name)
    args = {i: inputs[i] for i in entry.inputs if i != "advantages"}
    if "advantages" in entry.inputs:
        args["advantages"] = advest.get("grpo")(inputs["rewards"])
    fn = entry.fn() if entry.stateful else entry.fn
    out = fn(**args)
    out = getattr(out, "advantages", out)
    assert out.shape[:2] == (B, G), (name, out.shape)
    called.append(name)
loaded = sorted(m for m in sys.modules if m.startswith("advest"))
print(json.dumps({"called": called, "modules": loaded}))
"""


def _python(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_calling_every_estimator_loads_neither_the_references_nor_the_catalogue(
    tmp_path: Path,
) -> None:
    out = json.loads(_python(CALL_EVERY_ESTIMATOR, tmp_path).splitlines()[-1])
    import advest

    assert out["called"] == advest.names() and len(out["called"]) >= 20
    loaded = out["modules"]
    assert "advest.fast.maxk" in loaded and "advest.fast.hista" in loaded  # the calls happened
    offenders = [
        m
        for m in loaded
        if m.startswith(("advest.reference", "advest.proofs", "advest.training"))
        or m in ("advest.oracle.reports.catalogue", "advest.oracle")
    ]
    assert not offenders, f"the production path loaded {offenders}"


def test_grpo_alone_loads_only_the_fast_modules(tmp_path: Path) -> None:
    code = (
        "import sys, advest; advest.get('grpo'); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('advest'))))"
    )
    loaded = _python(code, tmp_path).split()
    # advest._moved: the finder of 0.2.0's moved modules (the standard library only)
    assert all(
        m in ("advest", "advest._moved", "advest.spec")
        or m.startswith(("advest.fast", "advest.spec."))
        for m in loaded
    ), loaded
    assert not [m for m in loaded if m.startswith("advest.spec.") and m not in PURE_SPEC], loaded


PURE_SPEC = tuple(
    f"advest.spec.{path.stem}"
    for path in sorted((ROOT / "spec").glob("*.py"))
    if path.stem != "__init__"
)
"""Every module of spec/: pure definitions, each importing nothing of advest (the layers
contract in pyproject.toml enforces it too; this test runs each in a fresh interpreter)."""


@pytest.mark.parametrize("module", [m.rsplit(".", 1)[1] for m in PURE_SPEC])
def test_the_shared_definitions_import_nothing_from_advest(module: str) -> None:
    source = (ROOT / "spec" / f"{module}.py").read_text()
    assert not re.search(r"^\s*(from|import) advest", source, re.M)


def _readme_python_example() -> str:
    readme = (ROOT / "README.md").read_text()
    use = readme.split("## Use", 1)[1]
    return use.split("```python", 1)[1].split("```", 1)[0]
