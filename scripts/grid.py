"""The repository's pass/fail grid: ``advest experiment grid`` with its per-run files in
``docs/results/grid/``, and after each finished run ``docs/choosing.md`` and the README's
blocks regenerated (``scripts/choosing.py``, in a fresh interpreter: the code as it is on disk
now, not as this long process imported it) and the files committed. A maintainers' tool: it
writes into the repository that ``--repo`` names, and nowhere else.

    python scripts/grid.py --repo . run DESIGN [grid flags...]   # scripts/grid.sh starts it
    python scripts/grid.py --repo . land PILOT_RESULTS [--commit]  # a pilot's files, kept
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from advest.experiments import grid

HERE = Path(__file__).resolve().parent


def commit(repo: Path, paths: list[Path], message: str) -> None:
    """Commit ``paths`` only (by path: others' staged work is left alone), retrying while
    another git command holds the index."""
    names = [str(p.resolve().relative_to(repo.resolve())) for p in paths]
    for _ in range(30):
        if not (repo / ".git" / "index.lock").exists():
            add = subprocess.run(["git", "-C", str(repo), "add", *names], capture_output=True)
            done = subprocess.run(
                ["git", "-C", str(repo), "commit", "-q", "-m", message, "--", *names],
                capture_output=True,
                text=True,
            )
            if add.returncode == 0 and done.returncode == 0:
                return
            print(f"commit failed, retrying: {done.stderr.strip()}", flush=True)
        time.sleep(5)
    print(f"could not commit {names}; commit them by hand", flush=True)


def regenerate(repo: Path) -> bool:
    """``scripts/choosing.py --repo REPO`` in a fresh interpreter. Whether it worked."""
    command = [sys.executable, str(HERE / "choosing.py"), "--repo", str(repo)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        print(f"the page was not regenerated: {done.stderr.strip()[-400:]}", flush=True)
    return done.returncode == 0


def uncommitted(repo: Path) -> list[Path]:
    """Run files under ``docs/results/grid/`` that git does not track: a grid stopped between
    writing a run and committing it (the run is finished, so a restart skips it)."""
    where = repo / "docs" / "results" / "grid"
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "--others", "--exclude-standard", "--", str(where)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [repo / name for name in listed.stdout.split()]


def run(repo: Path, argv: list[str]) -> int:
    """The grid into ``repo``'s results, each finished run committed with the page; first the
    runs an earlier, stopped grid finished but did not commit."""

    def finished(files: list[Path], message: str) -> None:
        if regenerate(repo):
            files = [*files, repo / "docs" / "choosing.md", repo / "README.md"]
        commit(repo, files, message)

    left = uncommitted(repo)
    if left:
        names = ", ".join(str(p.relative_to(repo)) for p in left)
        finished(left, f"grid: runs finished before a restart, committed now ({names})")
    results = ["--results", str(repo / "docs" / "results" / "grid")]
    return grid.main([*results, *argv], finished)


def land(repo: Path, results: Path, keep: bool) -> None:
    """Copy a pilot's files into ``repo``'s ``docs/results/pilots/`` (and commit them)."""
    to = repo / "docs" / "results" / "pilots" / results.name
    shutil.copytree(results, to, dirs_exist_ok=True)
    if keep:
        commit(repo, [to], f"pilot {results.name}: per-prompt counts before and after training")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser("scripts/grid.py", description=__doc__)
    p.add_argument("--repo", type=Path, required=True, help="the repository's root")
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("run", help="run a grid design (flags after it go to the grid)")
    pilot = sub.add_parser("land", help="copy a pilot's results into the repository")
    pilot.add_argument("results", type=Path, help="the pilot's RESULTS/DESIGN folder")
    pilot.add_argument("--commit", action="store_true", help="and commit the copy")
    a, rest = p.parse_known_args(argv)
    if a.what == "run":
        design = ["--design", rest.pop(0)] if rest and not rest[0].startswith("-") else []
        return run(a.repo, design + rest)
    land(a.repo, a.results, a.commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
