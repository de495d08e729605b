"""The public API and its policy (docs/api.md): the page is the source's public names, and every
name a release shipped (tests/core/meta/api/VERSION.txt, written by ``python scripts/api.py
--release``) still resolves, under a DeprecationWarning naming the version that removes it, or
is listed under a *Removed* heading of the CHANGELOG. A planted removal fails."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from advest import _moved

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("api", ROOT / "scripts" / "api.py")
assert _spec is not None and _spec.loader is not None
api: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(api)


def released() -> dict[str, list[str]]:
    """Every release's public names, ``{module: names}`` (a later release adds to an earlier)."""
    out: dict[str, list[str]] = {}
    for file in sorted((Path(__file__).parent / "api").glob("*.txt")):
        for line in file.read_text().splitlines():
            module, _, names = line.partition(": ")
            out.setdefault(module, [])
            out[module] += [n for n in names.split() if n not in out[module]]
    return out


def removed(changelog: str) -> set[str]:
    """The dotted names under the CHANGELOG's *Removed* headings (a module covers its names)."""
    sections = re.split(r"^### ", changelog, flags=re.M)
    found: set[str] = set()
    for section in sections:
        if section.startswith("Removed\n"):
            body = re.split(r"^## ", section, flags=re.M)[0]
            found |= set(re.findall(r"`(advest(?:\.\w+)+)`", body))
    return found


def _warns(module: str, name: str) -> str | None:
    """Why ``module.name``, which the module's ``__getattr__`` serves, is not a kept deprecation;
    None when it warns and names the version that removes it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            getattr(importlib.import_module(module), name)
        except AttributeError:
            return "gone"
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    if not any(re.search(r"removed in \d+\.\d+\.\d+", m) for m in said):
        return f"no DeprecationWarning naming the version that removes it: {said}"
    return None


def unaccounted(root: Path, shipped: dict[str, list[str]], gone: set[str]) -> list[str]:
    """The shipped names that neither resolve in ``root`` nor are listed as removed."""
    files = api.modules(root)
    out = []
    for module, names in shipped.items():
        if module in gone:
            continue
        file = files.get(_moved.MOVED.get(module, module))
        if file is None:
            out.append(f"{module}: module gone")
            continue
        tree = ast.parse(file.read_text())
        here = api.bound(tree, imported=True) | set(api.names(file))
        getter = "__getattr__" in here
        for name in names:
            if name in here or f"{module}.{name}" in gone or name in api.modules(root):
                continue
            why = _warns(module, name) if getter and root == ROOT else "gone"
            if why is not None:
                out.append(f"{module}.{name}: {why}")
    return out


def test_the_api_page_is_the_source() -> None:
    assert api.render(api.surface(ROOT)) == (ROOT / "docs" / "api.md").read_text(), (
        "run python scripts/api.py"
    )


def test_the_page_lists_the_modules_the_api_reference_renders() -> None:
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    assert list(api.modules(ROOT)) == sorted(hooks.public_modules())


def test_every_released_name_resolves_or_is_listed_as_removed() -> None:
    gone = removed((ROOT / "CHANGELOG.md").read_text())
    assert unaccounted(ROOT, released(), gone) == []


def test_a_planted_removal_fails_until_the_changelog_lists_it(tmp_path: Path) -> None:
    (tmp_path / "advest").mkdir()
    shutil.copytree(ROOT / "fast", tmp_path / "fast")
    (tmp_path / "advest" / "fast").symlink_to("../fast")
    registry = tmp_path / "fast" / "registry.py"
    registry.write_text(registry.read_text().replace("def names(", "def _names("))
    shipped = {"advest.fast.registry": ["entry", "names"]}
    assert unaccounted(tmp_path, shipped, set()) == ["advest.fast.registry.names: gone"]
    assert unaccounted(tmp_path, shipped, {"advest.fast.registry.names"}) == []
    assert removed("## [0.3.0]\n### Removed\n- `advest.fast.registry.names`\n") == {
        "advest.fast.registry.names"
    }


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_a_module_0_2_0_shipped_imports_under_its_old_name_with_a_warning(
    old: str, new: str
) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"removed in {_moved.REMOVED_IN}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_a_module_under_a_moved_package_imports_as_its_new_one() -> None:
    """advest.experiments.grid came after 0.2.0; under the old package's name it is still the
    one module, not a second copy loaded by the path finder."""
    sys.modules.pop("advest.training.experiments.grid", None)
    with pytest.warns(DeprecationWarning, match="advest.experiments.grid"):
        module = importlib.import_module("advest.training.experiments.grid")
    assert module is importlib.import_module("advest.experiments.grid")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("advest.training.experiments.never_a_module")
