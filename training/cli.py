"""The ``advest`` command line: one subcommand per job; heavy imports happen inside each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from training.demo import run

    run(args.rewards, args.k)
    return 0


def _bench(args: argparse.Namespace) -> int:
    from fast.bench import run

    run(repeats=args.repeats, quick=args.quick, device=args.device, threads=args.threads)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="advest", description="Verified advantage estimators for LLM RL."
    )
    sub = parser.add_subparsers(dest="command", required=True)
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
    bench.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ValueError as error:  # bad user input: say what, no traceback
        print(f"advest: error: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
