"""docs/bug_gallery.md is generated: it fails here when it drifts from a fresh run, and each
reproduced pair is a regression case for the verdict that tells its twins apart. In the slow
tier: each twin gets the whole `advest check`, its search included (about 2.5 CPU minutes).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
_spec = importlib.util.spec_from_file_location("bug_gallery", ROOT / "scripts" / "bug_gallery.py")
assert _spec is not None and _spec.loader is not None
gallery = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gallery)

# the property that must tell each pair apart (a regression: losing it fails here)
CAUGHT_BY = {
    "TRL #5773": "singleton group",
    "TRL #5026": "order preserving",
    "TRL #4662": "on G = 1",
    "verl #6348": "shift invariant",
    "NeMo-RL #4161": "order preserving",
    "SkyRL #137": "on G = 1",
    "NeMo-RL #1518": "magnitude bound",
    "rLLM #916": "on G = 1",
    "AReaL #1419": "row order",
    "slime #1414 (fix #1415)": "ragged groups",
    "verl #6452": "masked rows",
    "OpenRLHF #1239": "masked rows",
    "verl #7150": "ids relabelled",
    "NeMo-RL #3837": "masked rows",
    "slime #2230": "ragged groups",
    "AReaL #1673": "magnitude bound",
    "OpenRLHF #1334": "low-precision rewards",
    "verl #6497": "response length",
    "verl #7893": "std division off",
    "TRL #3991": "couples groups",
    "verl #7244": "unbiased",
    "agent-lightning #445": "counts each episode once",
    "miles #1827": "observation tokens",
    "AReaL #1674": "unbiased",
    "prime-rl #2040": "centred",
    "prime-rl #2377": "finite",
}


def test_the_gallery_page_is_what_the_script_writes() -> None:
    assert gallery.main(["--check"]) == 0, "run python scripts/bug_gallery.py"


@pytest.mark.parametrize("where", sorted(CAUGHT_BY))
def test_the_oracle_tells_each_bug_from_its_fixed_twin(where: str) -> None:
    (bug,) = [b for b in gallery.BUGS if b.where == where]
    assert any(line.startswith(CAUGHT_BY[where]) for line in gallery.differences(bug))


def test_every_cited_bug_is_reproduced_and_every_uncaught_one_says_why() -> None:
    assert len(gallery.BUGS) >= 20
    assert set(CAUGHT_BY) == {bug.where for bug in gallery.BUGS}  # each row has its regression
    page = (ROOT / "docs" / "bug_gallery.md").read_text()
    assert "not expressible" not in page
    for bug in gallery.BUGS:
        assert "#" in bug.where and bug.url.startswith("https://github.com/")
        assert callable(bug.buggy) and callable(bug.fixed)
