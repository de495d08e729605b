"""Mutation score of fast/, reference/, spec/ and proofs/: cosmic-ray's mutants, the relevant tests.

    python scripts/mutation.py                                  # every mutant (hours on 2 cores)
    python scripts/mutation.py --max-mutants 40 --seed 0        # 40 per package, sampled
    python scripts/mutation.py --package fast --max-mutants 100
    python scripts/mutation.py --list                            # count the mutants, run nothing

Mutants are cosmic-ray's (``cosmic_ray.commands.init`` enumerates them, ``cosmic_ray.mutating``
applies one): arithmetic operator swaps, comparison swaps, unary operators, and/or, not, True/
False, numbers ±1, zero-iteration loops, break/continue. Bitwise and ``is`` replacements are left
out: on tensors and floats they raise at once and would only inflate the score.

Each mutant is applied to a private copy of the repository (the working tree is never touched,
so an interrupted run leaves nothing mutated) and the module's relevant tests run there
(``scripts/mutation.toml``) with ``pytest -x`` under a timeout of 3× the unmutated run + 60 s.
A mutant is killed when the tests fail or time out. Survivors listed with a reason in
``tests/mutation_survivors.md`` count as equivalent and leave the denominator; the rest are
printed. The score per package is killed / (mutants − equivalent).

This is a benchmark, not part of CI's test command.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "scripts" / "mutation.toml"
SURVIVORS = ROOT / "tests" / "mutation_survivors.md"

# cosmic-ray operators kept (see the module docstring for what is left out and why).
_ARITH = ("Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow")
_CMP = ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE")


def _kept(name: str) -> bool:
    op = name.removeprefix("core/")
    if op.startswith("ReplaceBinaryOperator_"):
        _, a, b = op.split("_")
        return a in _ARITH and b in _ARITH
    if op.startswith("ReplaceComparisonOperator_"):
        _, a, b = op.split("_")
        return a in _CMP and b in _CMP
    return op in {
        "ReplaceUnaryOperator_USub_UAdd",
        "ReplaceUnaryOperator_Delete_USub",
        "ReplaceUnaryOperator_Delete_Not",
        "AddNot",
        "ReplaceTrueWithFalse",
        "ReplaceFalseWithTrue",
        "ReplaceAndWithOr",
        "ReplaceOrWithAnd",
        "ReplaceBreakWithContinue",
        "ReplaceContinueWithBreak",
        "NumberReplacer",
        "ZeroIterationForLoop",
    }


@dataclass(frozen=True)
class Mutant:
    module: str  # repository-relative path, e.g. "fast/maxk.py"
    operator: str
    occurrence: int
    line: int
    before: str  # the mutated line, before and after
    after: str

    @property
    def package(self) -> str:
        return self.module.split("/")[0]

    @property
    def key(self) -> str:
        """Stable across line moves: module, operator and the line's text before and after."""
        return f"{self.module} | {self.operator} | {self.before} -> {self.after}"


def _config() -> dict[str, object]:
    with CONFIG.open("rb") as handle:
        return tomllib.load(handle)


def _modules(config: dict[str, object], packages: list[str]) -> list[str]:
    excluded = set(config["exclude"]["modules"])  # type: ignore[index]
    return [
        str(path.relative_to(ROOT))
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in excluded
    ]


def _tests(config: dict[str, object], module: str) -> list[str]:
    tests = config["tests"]
    by_module: dict[str, list[str]] = tests["module"]  # type: ignore[index]
    by_package: dict[str, list[str]] = tests["package"]  # type: ignore[index]
    if module in by_module:
        return by_module[module]
    # not listed: the module's own test file first (a new estimator family's
    # tests/core/estimators/test_<family>.py, found by name, as the registry finds the family),
    # then its package's list
    own = f"tests/core/estimators/test_{Path(module).stem}.py"
    first = [own] if (ROOT / own).exists() else []
    return first + [t for t in by_package[module.split("/")[0]] if t not in first]


@functools.cache
def _operators() -> dict[str, object]:
    import cosmic_ray.plugins

    return {
        name.removeprefix("core/"): cosmic_ray.plugins.get_operator(name)()
        for name in cosmic_ray.plugins.operator_names()
        if _kept(name)
    }


def enumerate_mutants(modules: list[str]) -> Iterator[Mutant]:
    """Every kept mutant of ``modules``, as cosmic-ray's init numbers them (operator, occurrence);
    the mutated line's text is filled in later (:func:`describe`), for the chosen ones only."""
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    operators = _operators()
    for module in modules:
        tree = get_ast_from_path(ROOT / module)
        nodes = list(ast_nodes(tree))
        lines = (ROOT / module).read_text().splitlines()
        for name, operator in operators.items():
            positions = [
                start
                for node in nodes
                for start, _ in operator.mutation_positions(node)  # type: ignore[attr-defined]
            ]
            for occurrence, (line, _col) in enumerate(positions):
                yield Mutant(module, name, occurrence, line, lines[line - 1].strip(), "")


def describe(mutant: Mutant) -> Mutant | None:
    """The mutant with its mutated line filled in; None if the mutation changes nothing."""
    from cosmic_ray.mutating import mutate_code

    source = (ROOT / mutant.module).read_text()
    mutated = mutate_code(source, _operators()[mutant.operator], mutant.occurrence)
    if mutated is None or mutated == source:
        return None
    new_lines = mutated.splitlines()
    after = new_lines[mutant.line - 1].strip() if mutant.line - 1 < len(new_lines) else ""
    return Mutant(
        mutant.module, mutant.operator, mutant.occurrence, mutant.line, mutant.before, after
    )


def _apply(copy: Path, mutant: Mutant) -> None:
    from cosmic_ray.mutating import mutate_code

    source = (ROOT / mutant.module).read_text()
    mutated = mutate_code(source, _operators()[mutant.operator], mutant.occurrence)
    assert mutated is not None, mutant
    (copy / mutant.module).write_text(mutated)


def _copy_repository() -> Path:
    """The tracked and untracked (not ignored) files, symlinks kept, in a fresh directory."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    target = Path(tempfile.mkdtemp(prefix="advest-mutation-"))
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src, dst = ROOT / rel, target / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    return target


def _pytest(copy: Path, tests: list[str], timeout: float) -> tuple[str, float]:
    """("passed" | "failed" | "timeout", seconds) for ``pytest -x`` on ``tests`` in ``copy``."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-x", "-q", "--no-header", "-p", "no:randomly"]
    try:
        done = subprocess.run(
            [*command, *tests], cwd=copy, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    return ("passed" if done.returncode == 0 else "failed"), time.perf_counter() - start


def equivalent_keys() -> dict[str, str]:
    """Survivors judged equivalent: ``- `key` — reason`` lines of tests/mutation_survivors.md."""
    if not SURVIVORS.exists():
        return {}
    pattern = re.compile(r"^- `(.+?)` — (.+)$")
    return {
        m.group(1): m.group(2)
        for line in SURVIVORS.read_text().splitlines()
        if (m := pattern.match(line))
    }


_LINE = re.compile(r"^\[\d+/\d+\] (killed|survived) +\d+s  ((\w+)/[^|]+ \| .*)$")


def _score_log(text: str) -> int:
    """Per-package score of the ``[n/N] outcome seconds key`` lines of a (partial) run's log."""
    equivalent = equivalent_keys()
    rows: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        if m := _LINE.match(line):
            rows.setdefault(m.group(3), []).append((m.group(1), m.group(2)))
    failed = False
    for package, results in rows.items():
        killed = sum(1 for outcome, _ in results if outcome == "killed")
        live = [k for o, k in results if o == "survived" and k not in equivalent]
        denominator = killed + len(live)
        score = killed / denominator if denominator else 1.0
        print(
            f"{package}: {killed}/{denominator} non-equivalent mutants killed ({score:.1%}); "
            f"{len(results) - denominator} equivalent, {len(live)} surviving"
        )
        for key in live:
            print(f"  SURVIVOR `{key}`")
        failed |= score < 0.95
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--package", action="append", choices=["fast", "reference", "spec", "oracle", "proofs"]
    )
    parser.add_argument("--module", action="append", help="only these files, e.g. fast/maxk.py")
    parser.add_argument("--max-mutants", type=int, help="sample at most N mutants per package")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="count mutants per package and exit")
    parser.add_argument(
        "--timeout",
        type=float,
        help="seconds per mutant instead of 3x a measured unmutated run + 60 (skips that run)",
    )
    parser.add_argument(
        "--from-log",
        type=Path,
        help="score the per-mutant lines of an earlier run's output against the survivors file",
    )
    args = parser.parse_args(argv)
    if args.from_log is not None:
        return _score_log(args.from_log.read_text())

    config = _config()
    packages = args.package or ["fast", "reference", "spec", "proofs"]
    modules = args.module or _modules(config, packages)
    every = list(enumerate_mutants(modules))
    by_package: dict[str, list[Mutant]] = {}
    for mutant in every:
        by_package.setdefault(mutant.package, []).append(mutant)
    if args.list:
        for package, mutants in by_package.items():
            print(f"{package}: {len(mutants)} mutants")
        return 0

    rng = random.Random(args.seed)
    per_package: list[list[Mutant]] = []
    for package, mutants in by_package.items():
        take = (
            mutants
            if args.max_mutants is None
            else rng.sample(mutants, min(args.max_mutants, len(mutants)))
        )
        described = [d for m in take if (d := describe(m)) is not None]
        per_package.append(sorted(described, key=lambda m: (m.module, m.line, m.operator)))
        print(f"{package}: {len(take)} of {len(mutants)} mutants ({len(take) / len(mutants):.0%})")

    # round-robin over the packages, so that an interrupted run has scored every package
    chosen = [m for row in itertools.zip_longest(*per_package) for m in row if m is not None]
    equivalent = equivalent_keys()
    # SIGTERM unwinds like Ctrl-C, so the private copy is removed (the working tree is never
    # mutated in the first place)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    copy = _copy_repository()
    started = time.perf_counter()
    try:
        baseline: dict[str, float] = {}
        for module in sorted({m.module for m in chosen}):
            module_tests = _tests(config, module)
            key = " ".join(module_tests)
            if args.timeout is not None:
                baseline[key] = (args.timeout - 60) / 3
            elif key not in baseline:
                status, seconds = _pytest(copy, module_tests, timeout=1800)
                if status != "passed":
                    print(f"the unmutated tests fail for {module}: {key}", file=sys.stderr)
                    return 2
                baseline[key] = seconds
        results: dict[str, list[tuple[Mutant, str]]] = {}
        for n, mutant in enumerate(chosen, 1):
            tests = _tests(config, mutant.module)
            _apply(copy, mutant)
            try:
                timeout = 3 * baseline[" ".join(tests)] + 60
                status, seconds = _pytest(copy, tests, timeout)
            finally:
                shutil.copy2(ROOT / mutant.module, copy / mutant.module)
            outcome = "survived" if status == "passed" else "killed"
            results.setdefault(mutant.package, []).append((mutant, outcome))
            print(f"[{n}/{len(chosen)}] {outcome:8} {seconds:5.0f}s  {mutant.key}", flush=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)

    print(f"\nrun time {time.perf_counter() - started:.0f} s (baselines included)")
    failed = False
    for package, rows in results.items():
        killed = sum(1 for _, outcome in rows if outcome == "killed")
        survivors = [m for m, outcome in rows if outcome == "survived"]
        eq = [m for m in survivors if m.key in equivalent]
        live = [m for m in survivors if m.key not in equivalent]
        denominator = len(rows) - len(eq)
        score = killed / denominator if denominator else 1.0
        print(
            f"{package}: {killed}/{denominator} non-equivalent mutants killed ({score:.1%}); "
            f"{len(eq)} equivalent, {len(live)} surviving"
        )
        for m in live:
            print(f"  SURVIVOR {m.module}:{m.line}  `{m.key}`")
        failed |= score < 0.95
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
