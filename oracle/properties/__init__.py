"""The properties the oracle judges, each a function returning a ``Finding``
(``findings``): ``sequence`` (on ``[B, G]``: centring, shift / scale / permutation, bad input,
accuracy), ``unbiased`` (exact enumeration), ``grouped`` and ``extremes`` (flat rows),
``order``, ``ranks`` (split over gloo processes), ``token_checks`` and ``token_padding`` (token
level), ``episodes``, ``shaping``. Where a property is also searched, its judgement is one check
of one input that the explicit rows and the search share: ``plain`` (``[B, G]``) and ``rows``
(flat rows with ids)."""
