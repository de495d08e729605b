"""What the oracle feeds an estimator on its explicit inputs: ``tolerance`` (the dtype-aware
allowance and the test batches), ``token_trees`` and ``episode_trees`` (small policies
enumerated exactly, the token and episode ground truth), ``values`` (the reward values a
trainer can hand an estimator, as hypothesis strategies, and their literals); the searched
inputs built from them are ``oracle.search``'s strategies."""
