"""How findings read: the verdict table (``table``: one row per property, one column per dtype)
and the report's evidence lines (``evidence_line``), a searched "no" with its shrunk input."""

from __future__ import annotations

from ..properties.findings import Finding


def table(findings: list[Finding]) -> str:
    """Rows: properties; one column per dtype; verdicts merged over N where they agree."""
    dtypes = list(dict.fromkeys(f.dtype for f in findings if f.dtype))
    props = list(dict.fromkeys(f.prop for f in findings))
    cells: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        cells.setdefault((f.prop, f.dtype), []).append(f)
    lines = ["| property | " + " | ".join(dtypes or ["all"]) + " |"]
    lines.append("|---" * (1 + max(len(dtypes), 1)) + "|")
    for prop in props:
        row = [_cell(cells.get((prop, d)) or cells.get((prop, ""), [])) for d in dtypes or [""]]
        lines.append(f"| {prop} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _cell(got: list[Finding]) -> str:
    """One cell: the explicit verdicts merged over N where they agree, then the search's
    ("searched: yes", or its first counterexample's verdict)."""
    explicit = [f for f in got if not f.searched]
    found = [f for f in got if f.searched]
    verdicts = list(dict.fromkeys(f.verdict for f in explicit))
    if not explicit:
        text = ""
    elif len(verdicts) == 1:
        ns = [str(f.n) for f in explicit if f.n is not None]
        text = verdicts[0] + (f" (N = {', '.join(ns)})" if ns else "")
    else:
        text = "; ".join(f"N={f.n}: {f.verdict}" for f in explicit)
    if found:
        no = [f.verdict for f in found if f.counterexample is not None]
        searched = f"searched: {no[0] if no else found[0].verdict}"  # "no" where that holds
        text = f"{text}; {searched}" if text else searched
    return text


def evidence_line(f: Finding) -> str:
    """The report's line for ``f``: its evidence, and for a searched "no" the shrunk input to
    paste, the expected and the measured output, each on its own line."""
    at = [x for x in (f.dtype, "" if f.n is None else f"N={f.n}") if x]
    if f.searched:
        at.append(f"searched {f.searched} inputs")
    where = f" [{', '.join(at)}]" if at else ""
    if f.counterexample is None:
        return f"- {f.prop}{where}: {f.evidence}"
    c = f.counterexample
    return (
        f"- {f.prop}{where}: {f.verdict}; the smallest input found:\n"
        f"      {c['input']}\n      expected: {c['expected']}\n      measured: {c['measured']}"
    )
