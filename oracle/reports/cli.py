"""``advest check``: its options (``add_arguments``) and the command (``command``), which
imports and checks the estimator in a child process stopped after ``--timeout`` seconds."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..conventions.harness import CONVENTIONS, FAMILIES, Convention, OracleError, OutOfScope, load
from ..inputs.tolerance import DTYPES, rule
from ..properties.findings import NON_FINITE, Finding
from ..search import Budget, add_search_arguments
from . import schema
from .report import check
from .verdicts import evidence_line, table

TIMEOUT_S = 300.0
"""``advest check --timeout``'s default: the whole check of an ordinary estimator takes seconds
(measured on a shared 2-core machine, command start to end: ``advest.fast.maxk:maxpo`` 9 s at
K = 2, 12 s at K = 4), so five minutes leaves room for slow pure-Python estimators while still
ending a hang."""


def add_arguments(parser: Any, switch: Callable[[Any, str, bool, str], None] | None = None) -> None:
    """``advest check``'s options, on any argparse-compatible parser (argparse, jsonargparse).
    ``switch(parser, name, default, help)`` adds a boolean option (advest's command line: a
    ``--name`` / ``--no_name`` pair); by default a plain ``store_true`` flag."""
    parser.add_argument(
        "target",
        nargs="?",
        default=None,
        help="MODULE:FUNCTION (a callable on rewards [B, G], and K for --family maxk), or "
        "verl:NAME for an estimator from verl's registry (implies --convention verl)",
    )
    parser.add_argument(
        "--family",
        choices=list(FAMILIES),
        default="outcome",
        help="outcome: a baseline on rewards; maxk: a max@K / pass@K estimator that takes K; "
        "maxrl: unbiasedness for MaxRL's Σ_{k≤N} (1/k)·pass@k, on pass/fail rewards; token: "
        "per-token advantages [B, G, T] judged on exact token trees (spec/oracle.md); episode: "
        "multi-turn episodes, fn(turn_rewards [B, G, K], turn_ids [B, G, T]) -> [B, G, T], "
        "judged on exact episode trees (spec/episode.md)",
    )
    parser.add_argument(
        "--one_turn",
        default=None,
        help="--family episode: the registered sequence estimator it equals on one-turn "
        "episodes (e.g. rloo), compared on the returns",
    )
    parser.add_argument(
        "--extends",
        default=None,
        help="--family token: the registered sequence estimator it claims to extend (e.g. grpo), "
        "compared where no token discriminates",
    )
    parser.add_argument("--k", type=int, default=2, help="K for the max@K family (2)")
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=None,
        help="group sizes N to check (several allowed); default N = K, K+1 and max(2K+2, 8) "
        "for maxk, 2, 3 and 8 for outcome",
    )
    _add_run_options(parser, switch or _store_true)


def _store_true(parser: Any, name: str, default: bool, help: str) -> None:
    parser.add_argument(f"--{name}", action="store_true", default=default, help=help)


def _add_run_options(parser: Any, switch: Callable[[Any, str, bool, str], None]) -> None:
    """How the estimator is called (dtype, convention, signature, verl's dispatch and
    algorithm), then what the check writes (``_add_output_options``)."""
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="the estimator's own dtype (float32); float64 is checked too when accepted",
    )
    parser.add_argument(
        "--convention",
        choices=list(CONVENTIONS),
        default="plain",
        help="plain: fn(rewards [B, G], ...) -> [B, G]; flat: fn(rewards [N], index [N], "
        "valid=[N] bool) -> [N], one group id per row (any ids, groups of any size; a parameter "
        "named valid, valid_mask or mask takes the valid-row mask); verl: fn(token_level_rewards, "
        "response_mask, index, config=...) -> (advantages, returns); skyrl: the same with "
        "grpo_norm_by_std, gamma, lambd; nemo_rl: fn(rewards [N], prompt_ids [N, L], valid_mask "
        "[N]) -> [N]; prime_rl: fn(list of [G_i] groups) -> list of [G_i]. Every convention but "
        "plain also gets the grouped rows: ids relabelled, row order, ragged groups, masked rows, "
        "dropped groups (spec/oracle.md)",
    )
    parser.add_argument(
        "--signature",
        default=None,
        help="argument order for --convention plain, e.g. 'rewards, k' (passes K even to a "
        "parameter not named k), 'rewards', 'rewards, k=', 'rewards, lengths'",
    )
    switch(
        parser,
        "dispatch",
        False,
        "verl:NAME only: call it through verl's compute_advantage, as verl's trainer does "
        "(with norm_adv_by_std_in_grpo and the algorithm config), not the registered function",
    )
    parser.add_argument(
        "--algorithm",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="verl and SkyRL conventions: overrides of verl's algorithm config (AlgoConfig), e.g. "
        "norm_adv_by_std_in_grpo=false; the 'std division off' row always checks that option",
    )
    _add_output_options(parser)


def _add_output_options(parser: Any) -> None:
    """What the check writes and how long it may take: --json, --compare, --timeout."""
    add_search_arguments(parser)
    parser.add_argument(
        "--json",
        default=None,
        help="also write the findings to this file (schema advest-check/1, docs/testing.md)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        default=None,
        metavar=("OLD.json", "NEW.json"),
        help="instead of checking, name every verdict that differs between two --json reports "
        "(exit 0: none, 1: some)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        help="seconds the whole check may take, import included; the estimator runs in a child "
        f"process that is stopped after this ({TIMEOUT_S:g}). Exit codes: 0 a report, 1 a "
        "report of NaN or inf outputs for finite rewards, 2 a usage, import or call error, 3 no "
        "answer in time",
    )


def load_target(
    target: str, dispatch: bool = False
) -> tuple[Callable[..., Any], Convention | None]:
    """The callable ``target`` names, and ``"verl"`` when it came from verl's registry
    (``dispatch``: reached through verl's ``compute_advantage``, as its trainer reaches it), or
    ``"skyrl"`` for ``skyrl:NAME`` (through SkyRL's ``compute_advantages_and_returns``)."""
    if target.startswith("verl:"):
        from ..conventions.verl import dispatched, verl_estimator

        name = target.removeprefix("verl:")
        return (dispatched(name) if dispatch else verl_estimator(name)), "verl"
    if target.startswith("skyrl:"):  # SkyRL's estimators: always through its dispatch
        from ..conventions import skyrl

        return skyrl.dispatched(target.removeprefix("skyrl:")), "skyrl"
    if dispatch:
        raise ImportError("--dispatch is for verl:NAME targets (verl's compute_advantage)")
    return load(target), None


def parse_algorithm(pairs: list[str] | None) -> dict[str, Any]:
    """``--algorithm KEY=VALUE ...`` as a dict: VALUE read as JSON (true, false, numbers,
    strings in quotes) or, failing that, Python's True/False or a bare string."""
    import json

    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--algorithm takes KEY=VALUE; got {pair!r}")
        literal = {"True": True, "False": False, "None": None}
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = literal.get(raw, raw)
    return out


def _child(conn: Any, target: str, options: dict[str, Any]) -> None:
    """The child process of ``advest check``: import ``target``, check it, and send back
    ``("stage", what)`` messages, then one ``(kind, payload)``: ``("ok", (findings,
    convention))`` or an error kind (``import``, ``oracle``, ``call``) with its one-line text
    (``oracle`` also for an estimator out of the oracle's scope, saying why)."""
    import os
    import sys

    if os.getcwd() not in sys.path:  # a user's module beside them, as `python -m` would find it
        sys.path.insert(0, os.getcwd())
    convention: Convention = options.pop("convention")
    dispatch = bool(options.pop("dispatch", False))
    conn.send(("stage", f"importing {target}"))
    try:
        fn, forced = load_target(target, dispatch)
    except Exception as error:  # a syntax error or an exception raised by the module's import
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        conn.send(("import", f"cannot import {target}: {type(error).__name__}{where}: {error}"))
        return
    convention = forced or convention
    conn.send(("stage", f"calling {target} (the checks)"))
    try:
        if options["family"] == "token":  # the token oracle: oracle/reports/token_report.py
            from .token_report import check_tokens

            findings = check_tokens(
                fn, convention=convention, extends=options.get("extends"), budget=options["budget"]
            )
        elif options["family"] == "episode":  # the episode oracle: oracle/properties/episodes.py
            findings = _episode_report(fn, options.get("one_turn"), options["budget"])
        elif options["family"] == "shaping":  # a shaped advantage (rewards, lengths)
            from ..search.shaping import checked

            findings = checked(fn, options["budget"])
        else:
            findings = check(fn, convention=convention, **options)
    except OutOfScope as error:
        conn.send(("oracle", f"{target} is out of scope: {error}"))
        return
    except OracleError as error:
        conn.send(("oracle", f"{target}: {error}"))
        return
    except Exception as error:  # the user's callable could not be called at all
        conn.send(("call", f"cannot call {target}: {type(error).__name__}: {error}"))
        return
    conn.send(("ok", (findings, convention)))


def _episode_report(fn: Any, one_turn: str | None, budget: Budget | None) -> list[Finding]:
    from advest.fast import registry

    from ..properties.episodes import report
    from ..search.episodes import searched as searched_episodes

    if one_turn is not None and one_turn not in registry.names():
        valid = ", ".join(n for n in registry.names() if registry.entry(n).kind == "sequence")
        raise OracleError(f"--one_turn {one_turn!r} is not a registered sequence estimator; "
                          f"valid: {valid}")  # fmt: skip
    findings = report(fn, registry.get(one_turn) if one_turn else None, one_turn)
    return findings + (searched_episodes(fn, findings, budget) if budget else [])


def run_in_child(
    target: str,
    options: dict[str, Any],
    timeout: float,
    child: Callable[[Any, str, dict[str, Any]], None] | None = None,
) -> tuple[str, Any, str]:
    """``child`` (default ``_child``; another must speak its protocol) in a fresh interpreter
    (spawned: torch's thread pools do not survive a fork), stopped after ``timeout`` seconds.
    Returns ``(kind, payload, stage)``: the child's answer, or kind ``timeout`` / ``died``
    (payload: the exit code) with the stage it had reached."""
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    # not a daemon: the "split over ranks" row starts processes of its own, which a daemon may
    # not; the finally below stops the child on every way out
    proc = ctx.Process(target=child or _child, args=(send, target, options), daemon=False)
    stage = "starting the child process"
    deadline = time.monotonic() + timeout
    proc.start()
    send.close()  # the child holds the only writer: its death ends recv() with EOFError
    try:
        while receive.poll(max(deadline - time.monotonic(), 0)):
            try:
                kind, payload = receive.recv()
            except EOFError:
                proc.join()
                return "died", proc.exitcode, stage
            if kind != "stage":
                return kind, payload, stage
            stage = payload
        return "timeout", None, stage
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receive.close()


def _options(args: Any, target: str) -> dict[str, Any]:
    """What the child process checks, from the parsed ``args``; ValueError for a bad
    ``--examples`` or ``--algorithm``."""
    options: dict[str, Any] = {
        "budget": Budget(args.examples, args.seed, args.database, target),
        "family": args.family,
        "k": args.k,
        "signature": args.signature,
        "ns": args.n,
        "dtype": args.dtype,
        "convention": args.convention,
    }
    if args.family == "token":
        options["extends"] = getattr(args, "extends", None)
    elif args.family == "episode":
        options["one_turn"] = getattr(args, "one_turn", None)
    else:
        options["algorithm"] = parse_algorithm(getattr(args, "algorithm", None))
    options["dispatch"] = bool(getattr(args, "dispatch", False))
    return options


def command(args: Any) -> int:
    """Run ``advest check`` from parsed ``args``: print the report. Exit codes: 0 a report; 1 a
    report in which the estimator returned NaN or inf for finite rewards; 2 a usage, import or
    call error; 3 no answer within ``--timeout`` seconds (the estimator hangs), or the child
    process died."""
    import sys

    if args.compare:
        return _compare(*args.compare)
    if args.target is None:
        print("advest check: give MODULE:FUNCTION, or --compare OLD.json NEW.json", file=sys.stderr)
        return 2
    target: str = args.target
    timeout = float(args.timeout)
    if not (math.isfinite(timeout) and timeout > 0):
        print(
            f"advest check: --timeout must be a finite number > 0; got {timeout}", file=sys.stderr
        )
        return 2
    try:
        options = _options(args, target)
    except ValueError as error:
        print(f"advest check: {error}", file=sys.stderr)
        return 2
    kind, payload, stage = run_in_child(target, options, timeout)
    if kind == "timeout":
        print(
            f"advest check: {target}: no answer within --timeout {timeout:g} s while {stage}: "
            "it hangs, or needs a longer --timeout; stopped it",
            file=sys.stderr,
        )
        return 3
    if kind == "died":
        print(
            f"advest check: {target}: the process checking it died (exit code {payload}) while "
            f"{stage}: the estimator crashed the interpreter or exited",
            file=sys.stderr,
        )
        return 3
    if kind != "ok":
        print(f"advest check: {payload}", file=sys.stderr)
        return 2
    findings, convention = payload
    return _report(target, args, findings, convention)


def _report(target: str, args: Any, findings: list[Finding], convention: str) -> int:
    """Print the report of ``findings`` (and write ``--json``); 1 when the estimator returned
    NaN or inf for finite rewards, else 0."""
    import json
    import sys

    ns = sorted({f.n for f in findings if f.n is not None})
    print(f"advest check {target} (family {args.family}, K={args.k}, N={ns}, {convention})")
    dtypes = list(dict.fromkeys(f.dtype for f in findings if f.dtype))
    if dtypes:  # the episode oracle's rows are float64 and say their own tolerance
        print("tolerance: " + "; ".join(rule(DTYPES[d]) for d in dtypes) + " (spec/oracle.md)\n")
    print(table(findings))
    print()
    for f in findings:
        print(evidence_line(f))
    if args.json:
        with open(args.json, "w") as out:
            context = {"target": target, "family": args.family, "k": args.k}
            json.dump(schema.document(findings, **context, convention=convention), out, indent=1)
    bad = [f for f in findings if f.prop == "finite output" and f.verdict == NON_FINITE]
    if bad:
        print(
            f"advest check: {target} returns non-finite advantages for finite rewards "
            f"({bad[0].dtype}, N={bad[0].n}: {bad[0].evidence}); the checks that saw them say "
            f"{NON_FINITE!r}",
            file=sys.stderr,
        )
        return 1
    return 0


def _compare(old_path: str, new_path: str) -> int:
    """``advest check --compare``: every changed verdict, one per line; 1 if any, 2 if a file is
    not a report."""
    import sys

    try:
        changes = schema.compare(schema.load(old_path), schema.load(new_path))
    except OracleError as error:
        print(f"advest check: {error}", file=sys.stderr)
        return 2
    print(f"{len(changes)} verdict(s) changed from {old_path} to {new_path}")
    for line in changes:
        print(f"- {line}")
    return 1 if changes else 0
