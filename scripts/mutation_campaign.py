"""A measured mutation score: a seeded uniform sample of each package's mutants, run cheaply.

    python scripts/mutation_campaign.py run --per-package 200 --seed 33   # resumable
    python scripts/mutation_campaign.py report                            # scores, 95% intervals

``run`` draws, per package of ``scripts/mutation.toml``'s ``[packages]``, a uniform random
sample of the package's whole mutant population (``scripts/mutation.py`` enumerates it; a drawn
mutant that changes nothing is skipped and the next one drawn), writes the draw to the plan file,
and runs each mutant's targeted tests. One worker process imports torch, pytest and the test
dependencies once, then per mutant writes the mutated source into a private copy of the
repository and forks: the child runs ``pytest.main`` there, so a mutant pays for its tests and
for advest's own modules, never for importing torch. Each outcome is appended to the results
file as it finishes, so a restarted run skips what is done (a result counts only while its
module's source is unchanged).

``report`` scores the results against ``tests/mutation_survivors.md``: killed / (mutants −
equivalent), with Wilson's 95% interval; kills by timeout are counted apart.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation  # the sibling script: enumeration, application, the survivors file
import mutation_report  # the sibling script: results and the report
from mutation import ROOT, Mutant
from mutation_report import REPOSITORY_CHECKS

RESULTS = ROOT / "scripts" / "mutation_results"
CHILD_FAILED = ".failed"  # where a child writes the first failing test's id
# third-party modules the tests import: loaded once in the worker, before any fork
_PRELOAD = ("torch", "numpy", "hypothesis", "pytest", "sympy", "scipy", "lightning", "transformers")


def _sha(module: str, root: Path = ROOT) -> str:
    return hashlib.sha256((root / module).read_bytes()).hexdigest()[:16]


def _population(package: str) -> list[Mutant]:
    config = mutation._config()
    entries: list[str] = config["packages"][package]  # type: ignore[index]
    modules: list[str] = []
    excluded = set(config["exclude"]["modules"])  # type: ignore[index]
    for entry in entries:
        found = [entry] if entry.endswith(".py") else mutation._modules(config, [entry])
        modules += [m for m in found if m not in excluded]
    return list(mutation.enumerate_mutants(modules))


def draw(package: str, size: int, seed: int) -> dict[str, object]:
    """The package's population size and a uniform sample of ``size`` real mutants: the
    population shuffled by a seeded generator, read in order, no-op mutants skipped."""
    population = _population(package)
    order = list(population)
    random.Random(f"{seed}:{package}").shuffle(order)
    chosen: list[dict[str, object]] = []
    no_ops = 0
    for mutant in order:
        if len(chosen) == size:
            break
        described = mutation.describe(mutant)
        if described is None:
            no_ops += 1
            continue
        chosen.append(
            asdict(described)
            | {"key": described.key, "package": package, "sha": _sha(mutant.module)}
        )
    return {"package": package, "population": len(population), "no_ops_drawn": no_ops,
            "seed": seed, "mutants": chosen}  # fmt: skip


def _plan(packages: list[str], size: int, seed: int) -> list[dict[str, object]]:
    """The draw for each package, from the plan file when it was drawn with these settings."""
    path = RESULTS / "plan.json"
    if path.exists():
        plan: list[dict[str, object]] = json.loads(path.read_text())
        if [p["package"] for p in plan] == packages and all(
            p["seed"] == seed and len(p["mutants"]) == size  # type: ignore[arg-type]
            for p in plan
        ):
            return plan
    plan = [draw(package, size, seed) for package in packages]
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1) + "\n")
    return plan


def _append(row: dict[str, object]) -> None:
    with (RESULTS / "results.jsonl").open("a") as handle:
        handle.write(json.dumps(row) + "\n")


def _preload() -> None:
    for name in _PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)


def _child(copy: Path, tests: list[str], write_bytecode: bool) -> None:
    """In the forked child: run the tests in the copy and exit with pytest's status."""
    import pytest

    os.setpgrp()  # its own group, so that a timeout kills whatever the tests started
    sys.dont_write_bytecode = not write_bytecode  # a mutant's bytecode must never be cached
    # the last child's output, kept for reading when a baseline fails
    log = os.open(RESULTS / "last_child.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)

    class FirstFailure:
        def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
            if report.failed and not (copy / CHILD_FAILED).exists():
                (copy / CHILD_FAILED).write_text(report.nodeid)

        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            if report.failed and not (copy / CHILD_FAILED).exists():
                (copy / CHILD_FAILED).write_text(f"collecting {report.nodeid}")

    try:
        import advest  # noqa: F401  as advest's pytest plugin would, but with a known status
    except Exception:  # the mutant breaks importing advest: every user's import fails
        traceback.print_exc()
        os._exit(2)  # pytest's "interrupted", as a module that raises at collection
    try:
        # hypothesis is preloaded, so pytest cannot rewrite its plugin's asserts: harmless
        quiet = "ignore::pytest.PytestAssertRewriteWarning"
        skip = [arg for check in REPOSITORY_CHECKS for arg in ("--deselect", check)]
        # the installed advest may register a pytest plugin this checkout does not have yet
        # (an editable install of another checkout): then leave it out instead of failing
        plugin = [] if (copy / "oracle" / "pytest_plugin.py").exists() else ["-p", "no:advest"]
        args = ["-x", "-q", "-p", "no:randomly", *plugin, "-W", quiet, *skip, *tests]
        code = int(pytest.main(args, [FirstFailure()]))
    except BaseException:
        traceback.print_exc()
        code = 3
    os._exit(code)


def run_tests(
    copy: Path, tests: list[str], timeout: float, write_bytecode: bool
) -> dict[str, object]:
    """Fork a child that runs ``tests``; its exit status, seconds and first failure."""
    (copy / CHILD_FAILED).unlink(missing_ok=True)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        _child(copy, tests, write_bytecode)
    status: int | None = None
    try:
        while time.perf_counter() - start < timeout:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
                break
            time.sleep(0.05)
    finally:
        if status is None:  # a timeout, or the worker itself stopped: no orphaned tests
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    failed = copy / CHILD_FAILED
    return {
        "rc": status,
        "seconds": round(time.perf_counter() - start, 2),
        "first_failure": failed.read_text() if failed.exists() else None,
    }


def _outcome(rc: int | None) -> str:
    # pytest: 0 passed, 1 a test failed, 2 interrupted (a collection error: the mutated module
    # raised on import), 4 a conftest failed to import (it imports advest); anything else is
    # the harness's failure, reported apart. A kill is confirmed against the unmutated copy.
    if rc is None:
        return "timeout"
    return {0: "survived", 1: "killed", 2: "killed", 4: "killed"}.get(rc, "error")


def _round_robin(plan: list[dict[str, object]]) -> Iterator[dict[str, object]]:
    # package by package in turn, so that an interrupted run has scored every package alike
    lists: list[list[dict[str, object]]] = [p["mutants"] for p in plan]  # type: ignore[misc]
    for row in itertools.zip_longest(*lists):
        yield from (m for m in row if m is not None)


class Checks:
    """What the unmutated copy is known to do, learnt as the run goes instead of by a full
    baseline run per test list (minutes each on a loaded machine, and as many as there are
    lists): a kill counts only once the test that failed is seen to pass unmutated, and a
    list's timeout is 3x its slowest surviving run + 30 s (before any survivor, 900 s)."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self.passes: dict[str, bool] = {}  # test id (or "collecting <file>") -> passes unmutated
        self.slowest: dict[str, float] = {}  # test list -> slowest surviving run, seconds

    def timeout(self, tests: list[str]) -> float:
        slowest = self.slowest.get(" ".join(tests))
        return 900.0 if slowest is None else 3 * slowest + 30

    def survived(self, tests: list[str], seconds: float) -> None:
        key = " ".join(tests)
        self.slowest[key] = max(self.slowest.get(key, 0.0), seconds)

    def fails_unmutated(self, failure: str | None, tests: list[str]) -> bool:
        """Whether the failure a mutant caused also happens without it (then it is no kill)."""
        # no test named: the run failed before any test (a conftest's import), so collecting
        # the same tests unmutated is the check
        target = failure or "collecting " + " ".join(tests)
        if target not in self.passes:
            if target.startswith("collecting "):
                args = [*target.removeprefix("collecting ").split(), "--collect-only"]
            else:
                args = [target]
            result = run_tests(self.copy, args, 3600, write_bytecode=True)
            self.passes[target] = result["rc"] == 0 or (result["rc"] == 4 and self._new(target))
            _append({"key": f"unmutated | {target}", "baseline": True, **result})
        return not self.passes[target]

    def _new(self, target: str) -> bool:
        """Whether a test pytest did not find unmutated (its usage error) is one the mutant made,
        a parameter id it changed: then the test's file collects unmutated."""
        if target.startswith("collecting "):
            return False
        file = target.split("::")[0]
        return run_tests(self.copy, [file, "--collect-only"], 3600, write_bytecode=True)["rc"] == 0


def _mutate(copy: Path, mutant: Mutant, pristine: str) -> None:
    """Write the mutant of the copy's own (pristine) source, with no cached bytecode left to
    shadow it: the checkout may change while a run goes on; the copy does not."""
    from cosmic_ray.mutating import mutate_code

    target = copy / mutant.module
    for cached in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        cached.unlink()
    mutated = mutate_code(pristine, mutation._operators()[mutant.operator], mutant.occurrence)
    assert mutated is not None and mutated != pristine, mutant
    target.write_text(mutated)


def _restore(copy: Path, module: str, pristine: str) -> None:
    import py_compile

    (copy / module).write_text(pristine)
    py_compile.compile(str(copy / module))  # so that the next children load it from bytecode


def _todo(plan: list[dict[str, object]], copy: Path, retry: bool) -> list[dict[str, object]]:
    """The planned mutants with no result yet, of modules the copy has as they were drawn (a
    module changed since the draw needs a new draw: ``--redraw``)."""
    done = mutation_report.results(RESULTS)
    equivalent = mutation.equivalent_keys()  # argued survivors: a retry could not change them
    todo, stale = [], 0
    for m in _round_robin(plan):
        if _sha(str(m["module"]), copy) != m["sha"]:
            stale += 1
        elif (
            not ((row := done.get(str(m["key"]))) and row.get("sha") == m["sha"])
            or row["outcome"] == "error"  # the harness failed: no outcome yet
            or row.get("first_failure") in REPOSITORY_CHECKS  # before they were left out
            or (retry and row["outcome"] == "survived" and str(m["key"]) not in equivalent)
        ):
            todo.append(m)
    print(f"{len(todo)} mutants to run; {stale} stale (module changed since the draw)", flush=True)
    return todo


def _start(copy: Path) -> None:
    """Make the copy this process's working directory and import root, compiled once."""
    import compileall
    import importlib.util

    os.chdir(copy)
    sys.path.insert(0, str(copy))
    # the copy carries no results: tests/core/oracle/test_mutation.py checks the survivors file
    # against them, which is about the last run, not about the mutated code
    shutil.rmtree(copy / "scripts" / "mutation_results", ignore_errors=True)
    found = importlib.util.find_spec("advest")
    assert found and str(found.origin).startswith(str(copy)), found  # never the checkout's
    compileall.compile_dir(copy, quiet=2, workers=1)


def work(
    packages: list[str],
    size: int,
    seed: int,
    retry_survivors: bool,
    only: list[str] | None,
    shard: tuple[int, int] = (1, 1),
) -> int:
    """Run every planned mutant that has no result for its module's drawn source."""
    plan = _plan(packages, size, seed)
    for p in plan:
        print(f"{p['package']}: {len(p['mutants'])} drawn of {p['population']}", flush=True)  # type: ignore[arg-type]
    config = mutation._config()
    (RESULTS / "worker.pid").write_text(f"{os.getpid()}\n")  # to stop it: kill -TERM <pid>
    _preload()
    copy = mutation._copy_repository()
    # SIGTERM unwinds like Ctrl-C, so that the private copy is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    pristine: dict[str, str] = {}
    checks = Checks(copy)
    try:
        _start(copy)
        k, n_shards = shard  # worker k of n takes every n-th mutant (one results folder each)
        todo = _todo(plan, copy, retry_survivors)[k - 1 :: n_shards]
        for n, m in enumerate(todo, 1):
            fields = {k: m[k] for k in ("module", "operator", "occurrence", "line", "before")}
            mutant = Mutant(**fields, after=str(m["after"]))  # type: ignore[arg-type]
            source = pristine.setdefault(mutant.module, (copy / mutant.module).read_text())
            tests = only or mutation._tests(config, mutant.module)
            _mutate(copy, mutant, source)
            try:
                result = run_tests(copy, tests, checks.timeout(tests), write_bytecode=False)
            finally:
                _restore(copy, mutant.module, source)
            outcome = _outcome(result["rc"])  # type: ignore[arg-type]
            if outcome == "survived":
                checks.survived(tests, float(result["seconds"]))  # type: ignore[arg-type]
            failure = result["first_failure"]
            if outcome == "killed" and checks.fails_unmutated(failure, tests):  # type: ignore[arg-type]
                outcome = "error"  # the tests fail without the mutant too: no kill
            _append({"key": mutant.key, "package": m["package"], "sha": m["sha"],
                     "outcome": outcome, "tests": tests, **result})  # fmt: skip
            print(f"[{n}/{len(todo)}] {outcome:8} {result['seconds']:6.1f}s  {mutant.key}",
                  flush=True)  # fmt: skip
    finally:
        os.chdir(ROOT)
        shutil.rmtree(copy, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["run", "report"])
    parser.add_argument("--package", action="append", help="default: every [packages] entry")
    parser.add_argument("--per-package", type=int, default=200)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--retry-survivors", action="store_true", help="rerun survived mutants")
    parser.add_argument(
        "--tests", action="append", help="run these for every mutant (a plant check of new tests)"
    )
    parser.add_argument("--redraw", action="store_true", help="draw anew (sources changed)")
    parser.add_argument("--results", type=Path, default=None, help="plan and results folder")
    parser.add_argument(
        "--shard",
        default="1/1",
        help="K/N: run every N-th mutant from the K-th, so that N workers (one per core, each "
        "with its own --results folder holding the same plan) share one package's draw",
    )
    args = parser.parse_args(argv)
    global RESULTS
    RESULTS = (args.results or RESULTS).resolve()
    if args.command == "report":
        return mutation_report.report(RESULTS)
    if args.redraw:
        (RESULTS / "plan.json").unlink(missing_ok=True)
    packages = args.package or list(mutation._config()["packages"])  # type: ignore[call-overload]
    k, _, n = str(args.shard).partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        parser.error(f"--shard must be K/N with 1 <= K <= N; got {args.shard!r}")
    shard = (int(k), int(n))
    return work(packages, args.per_package, args.seed, args.retry_survivors, args.tests, shard)


if __name__ == "__main__":
    sys.exit(main())
