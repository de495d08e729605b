"""``advest experiment NAME``: reproducible experiments on the trainer, the oracle and the
proofs; each writes its settings, metrics, plots and a summary under the folder its ``--out``
names, and has a ``--quick`` smoke mode. The experiments and what each does are declared once, in
``advest.cli.EXPERIMENTS`` (``advest experiment --help`` lists them)."""
