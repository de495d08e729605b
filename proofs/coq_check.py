"""General-N proofs in Coq + MathComp (``proofs/coq/*.v``), checked by ``coqc``.

The .v files are compiled in a fresh temporary directory (never next to the sources), then
``Print Assumptions`` runs on every theorem listed in ``THEOREMS``. A theorem counts as proved
only when Coq answers "Closed under the global context": an ``Admitted`` proof, an ``Axiom`` or
a ``Parameter`` anywhere below it shows up there and the record is ``unknown``, never ``proved``.

Coq is a system package (Debian: ``coq libcoq-mathcomp-ssreflect libcoq-mathcomp-algebra
libcoq-mathcomp-algebra-tactics libcoq-mathcomp-zify``), installed by the test command; without
``coqc`` every Coq record is ``unknown`` (and the tests fail rather than skip).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .coq_theorems import (  # noqa: F401  (re-exported: coq.THEOREMS etc.)
    BASELINES,
    MAXRL,
    MAXRL_SPEC,
    PREFIX,
    SYMMETRY,
    THEOREMS,
    TURNS,
    UNBIASED,
    UNBIASED_SPEC,
    Theorem,
)
from .records import Record

COQ_DIR = Path(__file__).resolve().parent / "coq"
LOGICAL_ROOT = "Advest"
FILES = (
    "Counting.v",
    "Evaluation.v",
    "Sorted.v",
    "Symmetry.v",
    "Binary.v",
    "Unbiased.v",
    "Biased.v",
    "MaxRL.v",
    "Baselines.v",
    "Prefix.v",
    "Turns.v",
)  # in dependency order
CLOSED = "Closed under the global context"


INSTALL = (
    "apt-get update && apt-get install -y --no-install-recommends coq libcoq-mathcomp-ssreflect "
    "libcoq-mathcomp-algebra libcoq-mathcomp-algebra-tactics libcoq-mathcomp-zify"
)
"""How to install Coq 8.16 + MathComp on Debian or Ubuntu (the README's test command)."""

MISSING = f"coqc not found on PATH: Coq is not installed. Install it with: {INSTALL}"
"""``Record.missing`` of every Coq record when ``coqc`` is absent."""


def coqc() -> str | None:
    """Path of ``coqc``, or None when Coq is not installed."""
    return shutil.which("coqc")


def _compile(workdir: Path, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["coqc", "-q", "-Q", ".", LOGICAL_ROOT, name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )


STATEMENTS = COQ_DIR / "statements.json"
"""The pinned statements: each theorem of ``THEOREMS`` as ``Check`` prints it (with its claim and
spec row beside it) and each ``Definition`` of the .v files as ``Print`` prints it. Regenerate
with ``python -m advest.proofs.coq_check`` after a deliberate change; a theorem whose printed
statement, or any definition whose printed body, differs from this file is not counted as
proved."""

# Printed with MathComp's notations, so that a statement reads as the .v file writes it.
_PRELUDE = (
    "Require Import Coq.Strings.String.\n"
    "From mathcomp Require Import all_ssreflect all_algebra perm.\n"
    "Import GRing.Theory Num.Theory.\nOpen Scope ring_scope.\n"
)


@dataclass(frozen=True)
class Printed:
    """What one ``coqc`` run of the .v files printed: per theorem its assumptions and its
    statement, per definition its body (whitespace collapsed), the seconds and any error."""

    assumptions: dict[str, str]
    statements: dict[str, str]
    definitions: dict[str, str]
    seconds: float
    error: str


# A definition in any form a .v file can write one: indented, with attributes (#[local]),
# Local/Global/Program, Fixpoint, inside a section. Coq prints the body of the printable kinds;
# a Let (gone when its section closes) or a notation cannot be printed, so its source sentence is
# pinned instead. Either way an edit to the body changes the pin.
_PRINTABLE = r"Definition|Fixpoint|CoFixpoint"
_SOURCE_ONLY = r"Let|Notation|Infix|Reserved\s+Notation"
_DEFINITION = re.compile(
    r"^[ \t]*(?:#\[[^\]]*\][ \t]*)?(?:(?:Local|Global|Program)\s+)*"
    rf"(?P<kind>{_PRINTABLE}|{_SOURCE_ONLY})\s+(?P<name>\"[^\"]*\"|[\w']+)",
    re.M,
)


def _sentence(text: str, start: int) -> str:
    """The Coq sentence that begins at ``start``: up to the first period followed by white space,
    whitespace collapsed."""
    end = re.compile(r"\.(\s|$)").search(text, start)
    return " ".join(text[start : end.end() if end else len(text)].split())


def _scan(source_dir: Path) -> tuple[list[str], dict[str, str]]:
    """(the printable definitions as File.name, {File.kind name: source sentence} of the rest)."""
    printable: list[str] = []
    source: dict[str, str] = {}
    for f in FILES:
        text = (source_dir / f).read_text()
        for m in _DEFINITION.finditer(text):
            if re.fullmatch(_PRINTABLE, m["kind"]):
                printable.append(f"{f[:-2]}.{m['name']}")
            else:
                key = f"{f[:-2]}.{m['kind'].split()[-1]} {m['name']}"
                # A section may reuse a Let's name: number the repeats so none hides another.
                while key in source:
                    key += "'"
                source[key] = "source: " + _sentence(text, m.start("kind"))
    return printable, source


def definitions(source_dir: Path = COQ_DIR) -> list[str]:
    """Every definition of the .v files, in any form (see ``_DEFINITION``): File.name for those
    Coq prints, File.kind name for the Lets and notations pinned by their source."""
    printable, source = _scan(source_dir)
    return printable + list(source)


def printed(source_dir: Path = COQ_DIR, theorems: tuple[Theorem, ...] = THEOREMS) -> Printed:
    """Compile the .v files of ``source_dir`` in a temporary copy, then print the assumptions and
    the statement of every theorem and the body of every definition."""
    start = time.perf_counter()
    defs, source = _scan(source_dir)
    with tempfile.TemporaryDirectory(prefix="advest-coq-") as tmp:
        work = Path(tmp)
        for name in FILES:
            shutil.copy(source_dir / name, work / name)
        for name in FILES:
            done = _compile(work, name)
            if done.returncode != 0:
                error = f"{name}: {done.stderr or done.stdout}"
                return Printed({}, {}, {}, time.perf_counter() - start, error)
        # One marker line before each answer, so every answer is attributed to its source.
        lines = [f"From {LOGICAL_ROOT} Require Import {' '.join(f[:-2] for f in FILES)}."]
        for t in theorems:
            lines += [f'Eval compute in "@@ {t.name}"%string.', f"Print Assumptions {t.name}."]
            lines += [f'Eval compute in "@@check {t.name}"%string.', f"Check {t.name}."]
        for d in defs:
            # Qualified by the root: "Print Sorted." would parse as "Print Sorted Universes".
            lines += [f'Eval compute in "@@print {d}"%string.', f"Print {LOGICAL_ROOT}.{d}."]
        (work / "Assumptions.v").write_text(_PRELUDE + "\n".join(lines) + "\n")
        done = _compile(work, "Assumptions.v")
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            return Printed({}, {}, {}, seconds, f"Assumptions.v: {done.stderr or done.stdout}")
        answers = _split_answers(done.stdout)
        return Printed(
            {t.name: answers.get(("", t.name), "") for t in theorems},
            {t.name: answers.get(("check", t.name), "") for t in theorems},
            {d: answers.get(("print", d), "") for d in defs} | source,
            seconds,
            "",
        )


def assumptions(
    source_dir: Path = COQ_DIR, theorems: tuple[Theorem, ...] = THEOREMS
) -> tuple[dict[str, str], float, str]:
    """({theorem: what Print Assumptions printed}, seconds, error text or "")."""
    out = printed(source_dir, theorems)
    return out.assumptions, out.seconds, out.error


def _split_answers(out: str) -> dict[tuple[str, str], str]:
    answers: dict[tuple[str, str], str] = {}
    current: tuple[str, str] | None = None
    for line in out.splitlines():
        marker = re.search(r'"@@(\w*) ([\w.]+)"', line)
        if marker:
            current = (marker.group(1), marker.group(2))
            answers[current] = ""
        elif current is not None and not line.startswith("     : string"):
            answers[current] += line.strip() + " "
    return {k: " ".join(v.split()) for k, v in answers.items()}


def pinned(path: Path = STATEMENTS) -> dict[str, dict[str, dict[str, str] | str]]:
    """The pinned statements file: {"theorems": {name: {coq, math, spec}}, "definitions":
    {name: body}}."""
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def write_statements(path: Path = STATEMENTS, source_dir: Path = COQ_DIR) -> None:
    """Pin what the .v files of ``source_dir`` (the shipped ones) print now (run after a
    deliberate change, then review the diff: a statement that became weaker shows there)."""
    out = printed(source_dir)
    if out.error:
        raise RuntimeError(out.error)
    theorems = {
        t.name: {"coq": out.statements[t.name], "math": t.statement, "spec": t.spec}
        for t in THEOREMS
    }
    path.write_text(
        json.dumps(
            {"theorems": theorems, "definitions": out.definitions}, indent=1, ensure_ascii=False
        )
        + "\n"
    )


def check(source_dir: Path = COQ_DIR, theorems: tuple[Theorem, ...] = THEOREMS) -> list[Record]:
    """One record per theorem: ``proved`` only when its assumptions are closed, its statement is
    the pinned one and every definition is the pinned one."""
    missing = MISSING if coqc() is None else ""
    out = Printed({}, {}, {}, 0.0, missing) if missing else printed(source_dir, theorems)
    pins = pinned()
    pinned_theorems: dict[str, dict[str, str]] = pins["theorems"]  # type: ignore[assignment]
    pinned_defs: dict[str, str] = pins["definitions"]  # type: ignore[assignment]
    changed = [
        d
        for d in out.definitions.keys() | pinned_defs
        if out.definitions.get(d) != pinned_defs.get(d)
    ]
    changed = sorted(changed) if not out.error else []
    records = []
    for t in theorems:
        answer = out.assumptions.get(t.name, "")
        statement = out.statements.get(t.name, "")
        pin = pinned_theorems.get(t.name, {}).get("coq")
        # Every failed condition is named: assumptions first, then the statement, then the
        # definitions (a proof by an axiom can also change the statement Coq prints).
        said = answer or out.error or "no answer"
        failed = [] if answer == CLOSED else [f"Print Assumptions: {said}"]
        if answer and statement != pin:
            failed.append(f"statement differs from {STATEMENTS.name}: {statement}; pinned: {pin}")
        if answer and changed:
            failed.append(f"definitions differ from {STATEMENTS.name}: {', '.join(changed)}")
        evidence = "; ".join(failed) or f"Print Assumptions: {CLOSED}"
        proved = answer == CLOSED and statement == pin and not changed
        records.append(
            Record(
                t.claim,
                t.statement,
                t.spec,
                "coq (MathComp)",
                {"N": "all", "K": "all"},
                "proved" if proved else "unknown",
                out.seconds / len(theorems),
                evidence=evidence[:2000],
                notes=[t.name],
                missing=missing,
            )
        )
    return records


def check_shipped() -> tuple[Record, ...]:
    """``check()`` of the shipped .v files, once per process and ``coqc`` (``advest prove`` and
    the tests): a later call with Coq installed or removed does not see a stale answer."""
    return _check_shipped(coqc())


@functools.cache
def _check_shipped(coqc_path: str | None) -> tuple[Record, ...]:
    return tuple(check())


if __name__ == "__main__":
    write_statements()
    print(f"wrote {STATEMENTS}")
