"""One rule decides which estimators a peer can run (integrations/peers.py), from each registry
entry's inputs and statefulness; the three adapters use it, and the peer options that pick a
GRPO variant are looked up once."""

from __future__ import annotations

import pytest

from advest.fast import registry
from advest.integrations import peers, skyrl, verl


def test_a_peer_runs_exactly_the_estimators_whose_inputs_it_passes() -> None:
    for peer in (peers.VERL, peers.SKYRL, peers.TRL):
        for name in registry.names():
            entry = registry.entry(name)
            fed = set(entry.inputs) <= peer.passes
            keeps = not entry.stateful or not peer.stateless_because
            assert (name not in peer.cannot_run()) == (fed and keeps), (peer.name, name)


def test_verl_and_skyrl_refuse_what_the_rule_refuses() -> None:
    assert peers.VERL.cannot_run() == verl.SKIPPED
    assert skyrl.skipped() == peers.SKYRL.cannot_run()
    assert "kae" in verl.SKIPPED and "kae" not in peers.TRL.cannot_run()  # TRL keeps its state
    assert "prompt id" in verl.SKIPPED["kae"] and "split" in skyrl.skipped()["kae"]
    with pytest.raises(ValueError, match="advest_ktae cannot run inside verl: needs token ids"):
        verl.adapter("ktae")


def test_the_std_option_picks_a_grpo_variant_and_is_refused_elsewhere() -> None:
    assert [peers.with_std("grpo", v, "o", "w") for v in (True, False, "batch")] == [
        "grpo",
        "dr_grpo",
        "grpo_batch_std",
    ]
    assert peers.with_std("maxpo", True, "o", "w") == "maxpo"
    with pytest.raises(ValueError, match="opt=off has no meaning for advest_maxpo"):
        peers.with_std("maxpo", False, "opt=off", "advest_maxpo")
    with pytest.raises(ValueError, match="takes"):
        peers.with_std("grpo", "sideways", "opt=sideways", "w")


def test_k_comes_from_the_config_then_the_default() -> None:
    assert peers.k_for("maxpo", 3, 2, "how") == 3
    assert peers.k_for("maxpo", None, 2, "how") == 2
    assert peers.k_for("grpo", 3, 2, "how") is None
    with pytest.raises(ValueError, match="advest_maxpo is a max@K estimator: set it"):
        peers.k_for("maxpo", None, None, "set it")
