"""The README's list of commands, rewritten from the command table (``advest.cli.COMMANDS`` and
the experiments under it); tests/core/meta/test_commands.py fails while the two differ.

    python scripts/commands.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's advest, run from anywhere

OPEN = "<!-- commands: generated from advest.cli.COMMANDS -->\n"
CLOSE = "<!-- /commands -->\n"


def render(readme: str) -> str:
    """``readme`` with the list between its markers generated from the table."""
    from advest.cli import markdown

    head, rest = readme.split(OPEN, 1)
    _, tail = rest.split(CLOSE, 1)
    return head + OPEN + markdown() + CLOSE + tail


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = ROOT / "README.md"
    text = path.read_text()
    if render(text) == text:
        return 0
    if "--check" in args:
        print("README.md's command list is stale: run python scripts/commands.py")
        return 1
    path.write_text(render(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
