"""Adding an estimator to an existing family touches its spec page, its reference function and
its fast function (plus golden vectors and tests), and nothing else: this test adds a throwaway
estimator to a temporary copy of the repository, in exactly those three files, and shows that
the catalogue, ``advest list``, ``advest check`` and the documentation pick it up from its
registry entry. docs/contributing.md states the same recipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

FAST = '''

@register(
    tolerance=pair("group", CENTRED + " (a test's throwaway: Dr.GRPO under another name)"),
    claims=Claims(pg_scale=scales.n_minus_one, **FLAT),
)
def throwaway(rewards: Tensor) -> Tensor:
    """rewards: [B, G] -> [B, G]: r − mean r (tests/slow/meta/test_add_estimator.py adds this)."""
    check_rewards(rewards)
    return _centred(rewards).to(rewards.dtype)
'''
REFERENCE = '''

def throwaway(rewards: Sequence[Number]) -> list[Fraction]:
    """A_i = r_i − mean r (tests/slow/meta/test_add_estimator.py adds this)."""
    return _centred(to_fractions(rewards))
'''
SPEC = """

### `throwaway`

A_i = r_i − mean r, added by tests/slow/meta/test_add_estimator.py; unbiased for (N − 1)·∇J.
"""


CLOSINGS = ("\n\n__all__ = defined_in(__name__)", "\n\n__all__ = public(globals())")
"""A family module's last line (fast, reference): new estimators go above it, as a contributor
writes them."""


def _add(path: Path, text: str) -> None:
    """Add ``text`` to the module at ``path``: above a family module's closing line, else at
    the end."""
    source = path.read_text()
    at = max(source.rfind(closing) for closing in CLOSINGS)
    path.write_text(source[:at] + text.rstrip("\n") + source[at:] if at >= 0 else source + text)


def _copy(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in listed:
        source = ROOT / name
        if not (source.exists() or source.is_symlink()):
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


def _run(copy: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(copy), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("repo")
    _copy(dest)
    for path, text in (("fast/group.py", FAST), ("reference/group.py", REFERENCE)):
        _add(dest / path, text)
    with (dest / "spec" / "group.md").open("a") as f:
        f.write(SPEC)
    return dest


def test_the_copy_imports_its_own_advest(copy: Path) -> None:
    """Control: the subprocesses below read the copy, not this checkout."""
    out = _run(copy, "-c", "import advest; print(advest.__file__)")
    assert out.strip() == str(copy / "advest" / "__init__.py")


def test_the_catalogue_derives_a_row_with_the_declared_claims(copy: Path) -> None:
    code = (
        "from advest.oracle.reports.catalogue import rows\n"
        "(row,) = rows('throwaway')\n"
        "print(row.kind, row.centred, row.exact_zero_on_flat, row.pg_scale(5, 1),"
        " row.reference.__module__)"
    )
    assert _run(copy, "-c", code).split() == [
        "sequence", "True", "True", "4", "advest.reference.group"
    ]  # fmt: skip


def test_the_catalogue_driven_tests_run_on_it(copy: Path) -> None:
    out = _run(
        copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "throwaway",
        "tests/core/oracle/test_catalogue.py",
        "tests/core/estimators/test_fast_matches_reference.py",
        "tests/core/estimators/test_properties.py", "tests/core/experiments/test_bandit.py",
    )  # fmt: skip
    passed = int(out.strip().splitlines()[-1].split(" passed")[0].split()[-1])
    assert passed >= 10, out[-2000:]


def test_advest_list_shows_it(copy: Path) -> None:
    lines = _run(copy, "-m", "advest.cli", "list").splitlines()
    (line,) = [x for x in lines if x.startswith("throwaway ")]
    assert line.split()[1:4] == ["group", "sequence", "rewards"] and "spec/group.md" in line
    assert "(N − 1)·∇J" in line


def test_advest_check_judges_it(copy: Path) -> None:
    out = _run(copy, "-m", "advest.cli", "check", "advest.fast.group:throwaway")
    assert "| centred | yes (N = 2, 3, 8); searched: yes |" in out
    assert "N=3: yes, E[ĝ] = 2·∇J" in out


def test_the_docs_list_it_and_its_family_page(copy: Path) -> None:
    found = json.loads(_run(copy, "docs/hooks.py"))
    assert "| `throwaway` | group | sequence | rewards |" in found["estimators"]
    assert "group" in found["families"]


# One throwaway of each other kind, registered in its family's modules as an estimator would be:
# every derived list (the catalogue, the token oracle's table, the peers' one rule, verl's and
# SkyRL's skipped lists, TRL's refusal, the families) must pick each up with nothing else edited.
KINDS = {
    "fast/ktae.py": '''

@register("throwaway_token", "token", inputs=("token_ids", "mask", "rewards"), extends="grpo",
          tolerance=pair("output", "a test's throwaway"))
def throwaway_token(token_ids: Tensor, mask: Tensor, rewards: Tensor) -> Tensor:
    """[B, G, T]: grpo on every valid token."""
    return grpo(rewards).unsqueeze(-1) * mask
''',
    "reference/ktae.py": """

def throwaway_token(token_ids: object, mask: object, rewards: object) -> object:
    raise NotImplementedError("a test's throwaway")
""",
    "fast/gdpo.py": '''

@register("throwaway_multi", "multi_reward", inputs=("reward_parts", "reward_weights"),
          tolerance=pair("output", "a test's throwaway"))
def throwaway_multi(reward_parts: Tensor, reward_weights: object = None) -> Tensor:
    """[B, G, R] -> [B, G]: grpo of the summed parts."""
    return grpo(reward_parts.sum(-1))
''',
    "reference/gdpo.py": """

def throwaway_multi(reward_parts: object, reward_weights: object = None) -> object:
    raise NotImplementedError("a test's throwaway")
""",
    "fast/kae.py": """

@register("throwaway_history", "history", inputs=("prompt_ids", "rewards"), stateful=True,
          tolerance=pair("output", "a test's throwaway"))
class throwaway_history:  # noqa: N801
    def __call__(self, prompt_ids: Tensor, rewards: Tensor) -> Tensor:
        return rewards - rewards.mean(-1, keepdim=True)
""",
    "reference/kae.py": """

class throwaway_history:  # noqa: N801
    pass
""",
    "fast/episode.py": '''

@register("throwaway_episode", "episode", inputs=("turn_rewards", "turn_ids"), one_turn="rloo",
          tolerance=pair("output", "a test's throwaway"))
def throwaway_episode(turn_rewards: Tensor, turn_ids: Tensor) -> Tensor:
    """[B, G, T]: turn_rloo under another name."""
    return turn_rloo(turn_rewards, turn_ids)
''',
    "reference/episode.py": """

def throwaway_episode(turn_rewards: object) -> object:
    return turn_rloo(turn_rewards)  # type: ignore[arg-type]
""",
}


def test_every_derived_list_picks_up_an_estimator_of_each_kind(tmp_path: Path) -> None:
    _copy(tmp_path)
    for path, text in KINDS.items():
        _add(tmp_path / path, text)
    code = """
import json
from advest.fast import registry
from advest.integrations import peers, skyrl, verl
from advest.oracle.reports import catalogue, token_report
names = ["throwaway_token", "throwaway_multi", "throwaway_history", "throwaway_episode"]
print(json.dumps({
    "kinds": [registry.entry(n).kind for n in names],
    "token table": [row[0] for row in token_report.ADVEST if row[1] in names],
    "history catalogue": [r.name for r in catalogue.HISTORY_CATALOGUE if r.name in names],
    "catalogue": [r.name for r in catalogue.CATALOGUE if r.name in names],
    "episode oracle": [n for n in catalogue.EPISODE_NAMES if n in names],
    "verl skips": [n for n in names if n in verl.SKIPPED],
    "skyrl skips": [n for n in names if n in skyrl.skipped()],
    "trl runs": [n for n in names if n not in peers.TRL.cannot_run()],
}))
"""
    found = json.loads(_run(tmp_path, "-c", code))
    assert found == {
        "kinds": ["token", "multi_reward", "history", "episode"],
        "token table": ["throwaway_token"],
        "history catalogue": ["throwaway_history"],
        "catalogue": ["throwaway_multi"],
        "episode oracle": ["throwaway_episode"],
        # an episode estimator's turns come from the response mask there (peers.per_token)
        "verl skips": ["throwaway_token", "throwaway_multi", "throwaway_history"],
        "skyrl skips": ["throwaway_token", "throwaway_multi", "throwaway_history"],
        "trl runs": ["throwaway_history"],
    }
