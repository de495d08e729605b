"""Names renamed so that each means one thing keep working for one release, with a
DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("advest.proofs.coq", "THEOREMS", "advest.proofs.coq_check"),
        ("advest.oracle", "Family", "advest.oracle.Objective"),
        ("advest.training.train", "parser", "advest.training.command"),
        ("advest.training.train", "main", "advest.training.command"),
        ("advest.training.train", "trainer_arguments", "advest.training.command"),
        ("advest.training.train", "REFUSED_TRAINER_FLAGS", "advest.training.command"),
        ("advest.proofs.unbiased", "ESTIMATORS", "estimators"),
    ],
)
def test_an_old_name_still_resolves_and_warns(module: str, name: str, new: str) -> None:
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=new.rsplit(".", 1)[-1]):
        value = getattr(old, name)
    assert value is not None
    with pytest.raises(AttributeError):
        old.never_a_name  # noqa: B018


def test_the_old_names_are_the_new_objects() -> None:
    import warnings

    from advest.oracle import Objective
    from advest.training import command

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import advest.oracle
        import advest.training.train

        assert advest.oracle.Family is Objective
        assert advest.training.train.parser is command.parser
