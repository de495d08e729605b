"""The properties the oracle judges, each a function returning a ``Finding``: ``sequence`` (on
``[B, G]``: centring, shift / scale / permutation, bad input, accuracy), ``unbiased`` (exact
enumeration), ``grouped`` and ``extremes`` (flat rows), ``order``, ``ranks`` (split over gloo
processes), ``token_checks`` and ``token_padding`` (token level), ``episodes``, ``shaping``."""
