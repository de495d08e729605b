"""The ``advest`` command line: one subcommand per job; heavy imports happen inside each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from advest.training.demo import run

    run(args.rewards, args.k)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from advest.fast.bench import run

    run(
        repeats=args.repeats,
        quick=args.quick,
        device=args.device,
        threads=args.threads,
        clock=args.clock,
    )
    from advest.training.bench import run as run_tokens

    run_tokens(T=64 if args.quick else 256, repeats=3 if args.quick else 5)
    return 0


def _prove(args: argparse.Namespace) -> int:
    from pathlib import Path

    from advest.proofs.run import print_table, run, write_json

    records = run(args.max_n, args.unbiased_max_n, progress=not args.no_progress)
    print_table(records)
    if args.json:
        write_json(records, Path(args.json))
        print(f"wrote {len(records)} records to {args.json}")
    failed = [r for r in records if r.status != r.expected]
    print(f"{len(records) - len(failed)} of {len(records)} claims as expected")
    return 1 if failed else 0


def _check(args: argparse.Namespace) -> int:
    import json

    from advest.spec import oracle

    try:
        fn = oracle.load(args.target)
    except (ImportError, AttributeError) as error:
        print(f"advest check: cannot import {args.target}: {error}", file=sys.stderr)
        return 2
    try:
        findings = oracle.check(fn, args.family, args.k, args.signature)
    except Exception as error:  # the user's callable could not be called at all
        print(
            f"advest check: cannot call {args.target}: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return 2
    width = max(len(f.prop) for f in findings)
    print(f"advest check {args.target} (family {args.family}, K={args.k})\n")
    for f in findings:
        print(f"{f.prop:<{width}}  {f.verdict}\n{'':<{width}}  ({f.evidence})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(oracle.as_json(findings), out, indent=1)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advest", description="Verified advantage estimators for LLM RL."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("train", help="RL training with any registered estimator (see: advest train -h)")
    sub.add_parser("eval", help="held-out pass@k curves of a checkpoint (see: advest eval -h)")
    sub.add_parser(
        "experiment",
        help="reproduce the papers' claims: bandit, compare, values (advest experiment NAME -h)",
    )
    demo = sub.add_parser("demo", help="print the max@K estimators side by side on one group")
    demo.add_argument(
        "--rewards",
        type=float,
        nargs="+",
        default=[3.0, 1.0, 4.0, 1.0, 5.0],
        help="one group of rewards (default: 3 1 4 1 5)",
    )
    demo.add_argument("--k", type=int, default=2, help="comparator size K (default: 2)")
    demo.set_defaults(func=_demo)
    bench = sub.add_parser("bench", help="benchmarks that print numbers and ratios")
    bench.add_argument("what", choices=["estimators"], help="what to benchmark")
    bench.add_argument("--repeats", type=int, default=15, help="timed rounds (median per cell)")
    bench.add_argument("--quick", action="store_true", help="smaller shapes, for a smoke run")
    bench.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    bench.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all)")
    bench.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall: elapsed time; cpu: process CPU time (a loaded machine, with --threads 1)",
    )
    bench.set_defaults(func=_bench)
    prove = sub.add_parser("prove", help="run the machine-checked proofs and print the claims")
    prove.add_argument("--max-n", type=int, default=7, help="largest N for the z3 proofs (7)")
    prove.add_argument(
        "--unbiased-max-n", type=int, default=4, help="largest N for the bandit identities (4)"
    )
    prove.add_argument("--json", default=None, help="write every record to this file")
    prove.add_argument("--no-progress", action="store_true", help="no progress bar")
    prove.set_defaults(func=_prove)
    check = sub.add_parser("check", help="report the properties of any advantage estimator")
    check.add_argument("target", help="MODULE:FUNCTION, a callable on rewards [B, G] (and K)")
    check.add_argument("--family", choices=["outcome", "maxk"], default="outcome")
    check.add_argument("--k", type=int, default=2, help="K for the max@K family (2)")
    check.add_argument(
        "--signature",
        default=None,
        help="argument order, e.g. 'rewards, k' (maxk default), 'rewards' (outcome default), "
        "'rewards, k=', 'rewards, lengths'",
    )
    check.add_argument("--json", default=None, help="also write the findings to this file")
    check.set_defaults(func=_check)
    return parser


PASS_THROUGH = {
    "train": "advest.training.train",
    "eval": "advest.training.evaluate",
    "experiment": "advest.training.experiments",
}
"""Subcommands with their own (jsonargparse) parser: the rest of the line goes to them."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASS_THROUGH:
        import importlib

        module = importlib.import_module(PASS_THROUGH[argv[0]])
        code: int = module.main(argv[1:])
        return code
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
    except ValueError as error:  # bad user input: say what, no traceback
        print(f"advest: error: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
