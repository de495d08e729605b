"""The documentation site builds in strict mode, with every page it promises.

The build (``mkdocs build --strict``, configured in mkdocs.yml, pages assembled by docs/hooks.py)
fails on any warning: a broken link or anchor, a page missing from the nav, an unresolved
docstring cross-reference, a command whose ``--help`` fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).parents[2]


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("advest_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


def test_the_site_builds_with_readme_spec_commands_api_and_local_mathjax(site: Path) -> None:
    index = (site / "index.html").read_text()
    assert "Verified advantage estimators" in index and 'href="spec/maxk/"' in index
    for spec in sorted((ROOT / "spec").glob("*.md")):
        page = (site / "spec" / spec.stem / "index.html").read_text()
        assert 'class="arithmatex"' in page, f"{spec.name}: no math rendered"
    maxk = (site / "spec" / "maxk" / "index.html").read_text()
    assert "assets/mathjax/tex-svg-full.js" in maxk and "cdn" not in maxk.lower()
    assert (site / "assets" / "mathjax" / "tex-svg-full.js").stat().st_size > 1_000_000
    for command in ("train", "eval", "check", "prove", "bench", "demo", "experiment"):
        page = (site / "cli" / command / "index.html").read_text()
        assert f"usage: advest {command}" in page, f"the `{command}` page has no --help text"
    for module in ("advest", "advest.fast.maxk", "advest.reference.maxk", "advest.oracle"):
        page = (site / "api" / module / "index.html").read_text()
        assert f'id="{module}"' in page, f"no API page for {module}"
    assert "Keep a Changelog" in (site / "CHANGELOG" / "index.html").read_text()


def test_the_configuration_is_strict_and_treats_broken_links_and_unlisted_pages_as_errors() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    assert config["validation"]["nav"]["omitted_files"] == "warn"
    assert config["validation"]["links"]["not_found"] == "warn"
    assert config["validation"]["links"]["anchors"] == "warn"


def test_every_command_the_cli_dispatches_gets_a_page() -> None:
    hooks = _hooks()
    from advest.cli import COMMANDS, EXPERIMENTS

    top = hooks.subcommands(())
    assert top == [c.name for c in COMMANDS]
    assert {"train", "eval", "list", "check", "prove", "bench"} <= set(top)
    assert hooks.subcommands(("experiment",)) == [e.name for e in EXPERIMENTS]
    assert hooks.subcommands(("bench",)) == []


def test_doctests_in_docstrings_become_python_sessions_and_fenced_ones_are_left_alone() -> None:
    hooks = _hooks()
    text = ["Text.", "", "    >>> f(1)", "    [2]", "", "```python", ">>> g()", "```"]
    assert hooks.fence_doctests(text) == [
        "Text.",
        "",
        "    ```pycon",
        "    >>> f(1)",
        "    [2]",
        "    ```",
        "",
        "```python",
        ">>> g()",
        "```",
    ]
