"""The README's generated blocks (scripts/readme.py) and the one command table they share with
``advest --help``: ``advest.cli.COMMANDS`` and ``EXPERIMENTS`` give ``advest --help``, ``advest
experiment --help``, the README's Commands section and the documentation's command pages, so a
command added to the table appears in each, and runs; the registry gives the family table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from advest import cli

ROOT = Path(__file__).resolve().parents[3]


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def planted(argv: list[str]) -> int:
    """The run of the planted commands below."""
    print("planted ran", *argv)
    return 0


def test_the_readme_blocks_are_generated() -> None:
    readme = (ROOT / "README.md").read_text()
    assert _load(ROOT / "scripts" / "readme.py").render(readme) == readme, (
        "run python scripts/readme.py"
    )


def test_the_family_table_has_every_family_and_estimator() -> None:
    from advest.fast import registry

    table = _load(ROOT / "scripts" / "readme.py").families()
    for family in registry.families():
        assert f"(`{family}`)" in table
    for name in registry.names():
        assert f"`{name}`" in table


def test_every_command_has_a_parser_and_a_run_where_the_table_says() -> None:
    for prog, (table, _) in cli.groups().items():
        for c in table:
            assert callable(cli._at(c.run)), (prog, c.name)
            assert c.parser is None or callable(cli._at(c.parser)), (prog, c.name)
            assert c.argv or c.parser is not None, (prog, c.name)


def test_a_planted_command_and_experiment_appear_everywhere_and_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    here = f"{__name__}:planted"
    top = cli.Command("plantedcmd", "a planted command", None, here, argv=True)
    exp = cli.Command("plantedexp", "a planted experiment", None, here, argv=True)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, top))
    monkeypatch.setattr(cli, "EXPERIMENTS", (*cli.EXPERIMENTS, exp))
    assert "plantedcmd  a planted command" in cli.usage("advest")
    assert "plantedexp  a planted experiment" in cli.usage("advest experiment")
    readme = _load(ROOT / "scripts" / "readme.py").render((ROOT / "README.md").read_text())
    assert "* `advest plantedcmd`: a planted command." in readme
    assert "  * `advest experiment plantedexp`: a planted experiment." in readme
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        hooks = _load(ROOT / "docs" / "hooks.py")
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert hooks.subcommands(())[-1] == "plantedcmd"
    assert hooks.subcommands(("experiment",))[-1] == "plantedexp"
    assert cli.main(["plantedcmd", "a"]) == 0 and cli.main(["experiment", "plantedexp", "b"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["planted ran a", "planted ran b"]


def test_an_unknown_command_lists_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nope"]) == 2
    assert cli.main(["experiment", "nope"]) == 2
    err = capsys.readouterr().err
    assert "valid: " + ", ".join(c.name for c in cli.COMMANDS) in err
    assert "valid: " + ", ".join(e.name for e in cli.EXPERIMENTS) in err
