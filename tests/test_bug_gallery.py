"""docs/bug_gallery.md is generated: it fails here when it drifts from a fresh run, and each
reproduced pair is a regression case for the verdict that tells its twins apart."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
}


def test_the_gallery_page_is_what_the_script_writes() -> None:
    assert gallery.main(["--check"]) == 0, "run python scripts/bug_gallery.py"


@pytest.mark.parametrize("where", sorted(CAUGHT_BY))
def test_the_oracle_tells_each_bug_from_its_fixed_twin(where: str) -> None:
    (bug,) = [b for b in gallery.BUGS if b.where == where]
    assert any(line.startswith(CAUGHT_BY[where]) for line in gallery.differences(bug))


def test_there_are_ten_cited_bugs_and_every_unreproduced_one_says_why() -> None:
    assert len(gallery.BUGS) >= 10
    for bug in gallery.BUGS:
        assert "#" in bug.where and bug.url.startswith("https://github.com/")
        assert bug.buggy is not None or bug.why_not
