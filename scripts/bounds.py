"""The size bounds of shipped code (STYLE.md, rule 21): no module of an installed package over
400 lines, no function over 60. ``nox -s lint`` runs it; it prints each offender and exits 1.

Ruff cannot hold either bound: it has no rule on a module's or a function's length in lines
(``PLR0915`` counts statements, which a long call spread over many lines escapes), so this reads
the syntax tree. A function is counted from its ``def`` line to its last line, docstring
included: its decorators are left out, since an estimator's ``@register(...)`` is its registry
entry (rule 25), data that is declared there and nowhere else.

    python scripts/bounds.py [ROOT]   # ROOT: the repository (default: this script's)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 400
FUNCTION_LINES = 60


def shipped(root: Path) -> list[Path]:
    """Every Python file of the installed packages: ``advest/`` itself and the folders its links
    name (``advest/fast -> ../fast``, ...), which pyproject.toml maps into the wheel."""
    folders = [root / "advest"]
    folders += [root / p.name for p in sorted((root / "advest").iterdir()) if p.is_symlink()]
    return [f for folder in folders for f in sorted(folder.rglob("*.py")) if not f.is_symlink()]


def offences(path: Path, root: Path) -> list[str]:
    """``path:line: what`` for each bound the file breaks."""
    text = path.read_text()
    name = path.relative_to(root).as_posix()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES:
        found.append(f"{name}:1: module of {lines} lines (bound {MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                found.append(
                    f"{name}:{node.lineno}: function {node.name} of {length} lines "
                    f"(bound {FUNCTION_LINES})"
                )
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    found = [line for path in shipped(root) for line in offences(path, root)]
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} over the bounds: split by job (a module) or by step (a function)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
