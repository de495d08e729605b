"""The numeric-span grammar Numca reads milestones with, and each match's exact value.

Shared by ``reference.numca`` and ``fast.numca`` (one grammar, so the two cannot drift apart);
it imports neither, so the fast path never loads the exact references.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["NUMBER", "canonical"]

_LEAD = r"(?:(?<![A-Za-z0-9_)\]}])(?P<sign>-)|(?<![A-Za-z0-9_.]))"
_SIMPLE = r"(?:\d+(?:\.\d+)?|\.\d+)"
_GRAMMAR = r"""
LEAD (?: \\d?frac\{(?P<tn>-?SIMPLE)\}\{(?P<td>-?SIMPLE)\}     # \frac{a}{b}, \dfrac{a}{b}
       | (?P<pn>\d+)/(?P<pd>\d+)                               # a/b
       | (?P<th>\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?!\d)            # 1,234,567.5
       | (?P<dec>SIMPLE) )                                     # 42, 3.14, .5
"""
NUMBER = re.compile(_GRAMMAR.replace("LEAD", _LEAD).replace("SIMPLE", _SIMPLE), re.VERBOSE)
"""The numeric-span grammar of spec/numca.md, step 1 (LEAD, SIMPLE substituted; re.VERBOSE)."""


def canonical(m: re.Match[str]) -> Fraction | None:
    """The canonical value of one match (spec/numca.md, step 2); None for a zero denominator."""
    if m["tn"] is not None:
        num, den = Fraction(m["tn"]), Fraction(m["td"])
    elif m["pn"] is not None:
        num, den = Fraction(m["pn"]), Fraction(m["pd"])
    elif m["th"] is not None:
        num, den = Fraction(m["th"].replace(",", "")), Fraction(1)
    else:
        num, den = Fraction(m["dec"]), Fraction(1)
    if den == 0:
        return None
    value = num / den
    return -value if m["sign"] else value  # Fraction has no −0: "-0.0" is 0
