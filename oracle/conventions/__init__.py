"""How the oracle calls an estimator: ``harness`` (a user's callable on ``[B, G]`` rewards, on
copies, its output checked), ``rows`` (flat rows with a group id per row, every trainer's
convention adapted to one call), ``tokens`` (token-level estimators, advest's form and verl's),
``verl`` and ``skyrl`` (the peers' registries and signatures)."""
