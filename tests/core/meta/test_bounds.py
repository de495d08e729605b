"""The size bounds (scripts/bounds.py, run by ``nox -s lint``): the shipped code keeps them, and
a planted over-long function or module fails the check."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("bounds", ROOT / "scripts" / "bounds.py")
assert _spec is not None and _spec.loader is not None
bounds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bounds)


def test_the_shipped_code_keeps_the_bounds() -> None:
    assert [o for f in bounds.shipped(ROOT) for o in bounds.offences(f, ROOT)] == []


def test_every_linked_package_is_read() -> None:
    read = {f.relative_to(ROOT).parts[0] for f in bounds.shipped(ROOT)}
    assert {"advest", "fast", "oracle", "training", "experiments"} <= read


def _repo(tmp_path: Path, source: str) -> Path:
    """A repository whose one linked package holds ``source`` (as advest/fast -> ../fast)."""
    (tmp_path / "advest").mkdir()
    (tmp_path / "advest" / "__init__.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "deep").mkdir()
    (tmp_path / "pkg" / "deep" / "planted.py").write_text(source)
    (tmp_path / "advest" / "pkg").symlink_to("../pkg")
    return tmp_path


def test_a_planted_long_function_fails(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    at_bound = f"def f():\n{body}\n"  # 60 lines: allowed
    # lines 1-60, then a method one line longer (nested functions are read too) at line 64
    method = (
        "class C:\n    async def g(self):\n" + textwrap.indent(body, "    ") + "\n        y = 1\n"
    )
    root = _repo(tmp_path, at_bound + "\n\n" + method)
    assert bounds.main([str(root)]) == 1
    (found,) = [o for f in bounds.shipped(root) for o in bounds.offences(f, root)]
    assert found == "pkg/deep/planted.py:64: function g of 61 lines (bound 60)"


def test_a_planted_long_module_fails(tmp_path: Path) -> None:
    root = _repo(tmp_path, "x = 1\n" * 401)
    assert bounds.main([str(root)]) == 1
    (tmp_path / "pkg" / "deep" / "planted.py").write_text("x = 1\n" * 400)
    assert bounds.main([str(root)]) == 0


def test_the_debt_is_only_in_the_packages_being_rebuilt_and_only_shrinks(tmp_path: Path) -> None:
    assert all(f.startswith(("oracle/", "experiments/")) for f, _ in bounds.DEBT)
    assert bounds.stale(ROOT) == []
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    root = _repo(tmp_path, f"def f():\n{body}\n")  # 62 lines
    debt = {("pkg/deep/planted.py", "f"): 62}
    planted = root / "pkg" / "deep" / "planted.py"
    assert bounds.offences(planted, root, debt) == [] and bounds.stale(root, debt) == []
    assert bounds.offences(planted, root, {("pkg/deep/planted.py", "f"): 61}) != []  # grew
    planted.write_text("def f():\n    pass\n")  # split: the entry must go
    assert bounds.stale(root, debt) == ["pkg/deep/planted.py f: within the bound now"]
