"""verl 0.9.1's estimators through its own ``compute_advantage`` (``advest check verl:NAME
--dispatch``): the dispatch findings the peer page publishes, each as its own test, and
advest's adapter on flat rows inside verl's call."""

from __future__ import annotations

import warnings

import numpy as np
import torch

# imported at collection, where verl's own import-time deprecation warnings are not errors
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: F401

from advest.oracle.conventions.harness import Guard
from advest.oracle.conventions.rows import row_call
from advest.oracle.conventions.verl import dispatched
from advest.oracle.properties.grouped import describe, grouped_findings


def _rows(name: str, **algorithm: object) -> dict[str, object]:
    est = row_call(dispatched(name), "verl", Guard(), 2, dict(algorithm))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return describe(grouped_findings(est, 4, torch.float32))


def test_the_flag_reaches_grpo_but_not_grpo_vectorized() -> None:
    """verl PR 7893: compute_advantage forwards norm_adv_by_std_in_grpo to the grpo enum only."""
    assert _rows("grpo")["std division off"] == "yes"
    assert _rows("grpo_vectorized")["std division off"] == "no effect"


def test_negative_integer_uids_break_grpo_vectorized() -> None:
    """verl PR 7150: as_torch_index takes integer uids as positions."""
    assert _rows("grpo_vectorized")["ids relabelled"] == "no: raises"
    assert _rows("grpo")["ids relabelled"] == "yes"


def test_advest_through_verls_dispatch_passes_every_grouped_row() -> None:
    """advest's own estimator, registered in verl (the plug-in), reached through
    compute_advantage on ragged, relabelled and masked flat rows."""
    from advest.integrations.verl import register

    register()
    rows = _rows("advest_grpo")
    assert set(rows.values()) == {"yes"}, rows
    assert _rows("advest_rloo")["masked rows"] == "yes"


def test_the_adapter_names_a_group_too_small_by_its_uid() -> None:
    from advest.integrations.verl import adapter

    fn = adapter("maxpo", k=2)
    tlr = torch.zeros(5, 3)
    tlr[:, -1] = torch.tensor([0.0, 1.0, 0.5, 1.0, 0.25])
    index = np.array(["a", "a", "a", "b", "b"], dtype=object)
    try:
        fn(tlr, torch.ones(5, 3), index)
    except ValueError as error:
        assert "uid 'b' (verl batch rows 3, 4)" in str(error), error
    else:
        raise AssertionError("a group of 2 at K = 2 was accepted")
