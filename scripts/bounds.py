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

DEBT: dict[tuple[str, str], int] = {}
"""Offenders allowed for now, only in the two packages being rebuilt (issue 52: ``oracle/``;
issue 54: ``experiments/``): ``(file, function name, or "" for the module)`` → its length in
lines when it was let in. An entry may not grow, and must go once it is within the bound (the
check fails on a stale entry), so this only shrinks. Empty when written: nothing shipped was
over either bound once ``training/evaluate.py``'s ``pass_counts`` was split."""


def shipped(root: Path) -> list[Path]:
    """Every Python file of the installed packages: ``advest/`` itself and the folders its links
    name (``advest/fast -> ../fast``, ...), which pyproject.toml maps into the wheel."""
    folders = [root / "advest"]
    folders += [root / p.name for p in sorted((root / "advest").iterdir()) if p.is_symlink()]
    return [f for folder in folders for f in sorted(folder.rglob("*.py")) if not f.is_symlink()]


def lengths(path: Path, root: Path) -> list[tuple[str, str, int, int]]:
    """``(file, name, first line, lines)`` of the module (name ``""``) and of every function in
    it, nested ones and methods included."""
    text = path.read_text()
    name = path.relative_to(root).as_posix()
    out = [(name, "", 1, len(text.splitlines()))]
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            out.append((name, node.name, node.lineno, length))
    return out


def offences(path: Path, root: Path, debt: dict[tuple[str, str], int] | None = None) -> list[str]:
    """``path:line: what`` for each bound the file breaks beyond its ``debt`` entries."""
    allowed = DEBT if debt is None else debt
    found = []
    for name, function, line, length in lengths(path, root):
        bound = FUNCTION_LINES if function else MODULE_LINES
        if length <= bound or length <= allowed.get((name, function), 0):
            continue
        what = f"function {function}" if function else "module"
        found.append(f"{name}:{line}: {what} of {length} lines (bound {bound})")
    return found


def stale(root: Path, debt: dict[tuple[str, str], int] | None = None) -> list[str]:
    """The ``debt`` entries that are no longer over their bound (or no longer exist)."""
    allowed = DEBT if debt is None else debt
    over = {
        (name, function)
        for path in shipped(root)
        for name, function, _, length in lengths(path, root)
        if length > (FUNCTION_LINES if function else MODULE_LINES)
    }
    return [f"{name} {function}: within the bound now" for name, function in allowed.keys() - over]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    found = [line for path in shipped(root) for line in offences(path, root)]
    found += [f"DEBT entry {line}: remove it" for line in stale(root)]
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} over the bounds: split by job (a module) or by step (a function)")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
