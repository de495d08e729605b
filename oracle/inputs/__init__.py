"""What the oracle feeds an estimator on its explicit inputs: ``tolerance`` (the dtype-aware
allowance and the test batches), ``token_trees`` and ``episode_trees`` (small policies
enumerated exactly, the token and episode ground truth). The searched inputs are
``oracle.search``'s strategies."""
