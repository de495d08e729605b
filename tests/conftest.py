"""Hypothesis profiles: ``dev`` (default), ``ci`` (chosen when CI is set), ``exhaustive``.

Select one with HYPOTHESIS_PROFILE=exhaustive.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.maxk_paths import forced_path

# A user's project, run by tests/core/oracle/test_testing.py in a venv of its own: one of its tests
# fails on purpose (the broken estimator), so this session does not collect it.
collect_ignore = ["user_project"]

# 25 examples per test: ~470 property tests run per registered estimator, and at 40 (ci) they
# held the core session over its 5 minutes on 2 cores; `exhaustive` searches deeper
settings.register_profile(
    "dev", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "exhaustive", max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# --- both max@K paths ---------------------------------------------------------------------------
# A test module that declares ``pytestmark = pytest.mark.usefixtures("maxk_path")`` runs each of
# its tests twice, with every max@K estimator forced onto the sorted path and onto the counting
# path (tests/maxk_paths.py's forced_path): the same differential and property checks hold on
# both. Variants where the path cannot matter (the exact reference, group rows, the estimators
# that never sort, tests that call no sorted estimator) run once, as "sorted".

MAXK_PATHS = ("sorted", "counts")
_NEVER_SORTS = {"tang_passk", "chen_passk"}
_PATH_FREE_TESTS = {
    "test_exact_closed_form_equals_subset_definition",
    "test_dense_seed_forms_equal_the_reference",
    "test_group_golden_vectors",
    "test_gdpo_golden_vectors",
    "test_episode_golden_vectors",
    "test_group_baseline_relations",
    "test_grpo_without_eps_meets_samuelson_bound",
    "test_opo_baseline_is_length_weighted_centred",
    "test_k_equal_n_gives_the_gap_to_the_runner_up_on_a_unique_argmax",
    "test_normalised_chen_at_k1_is_grpo_with_population_std_and_no_eps",
    "test_k_equal_n_golden_vectors_and_domain_errors",
    "test_building_block_identities_i1_i2_i5_i8_i13",
    "test_pkpo_binary_form_and_chen_sigma",
    "test_l2o_maps_any_comparator_only_baseline_to_canonical",
}


# Module scope: hypothesis refuses function-scoped fixtures under @given (they are not reset
# between examples); the path is the same for every example anyway.
@pytest.fixture(scope="module")
def maxk_path(request: pytest.FixtureRequest) -> Iterator[str]:
    path = request.param
    with forced_path(path):
        yield path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "maxk_path" in metafunc.fixturenames:
        metafunc.parametrize("maxk_path", MAXK_PATHS, indirect=True, scope="module")


def _path_cannot_matter(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    if callspec is None or callspec.params.get("maxk_path") != "counts":
        return False
    params = callspec.params
    row = params.get("row")
    if row is not None and (row.k_domain is None or row.name in _NEVER_SORTS):
        return True
    if params.get("impl") == "reference" or params.get("exact") is True:
        return True
    return getattr(item, "originalname", "") in _PATH_FREE_TESTS


# --- tiers by folder ----------------------------------------------------------------------------
# A test's tier is the folder it stands in (tests/<tier>/...; tests/core/ for the unmarked
# rest): each test gets its folder's marker here, and noxfile.py's sessions select by marker.
# The folder is the one source of truth (tests/core/meta/test_tiers.py: no file writes a tier
# marker itself, and every folder is a tier).
TESTS = Path(__file__).resolve().parent
CORE = "core"


def tier_of(path: Path) -> str | None:
    """The tier folder ``path`` stands in (``core`` included), or None outside tests/<tier>/."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(Path(str(item.path)))
        if tier is not None and tier != CORE:
            item.add_marker(getattr(pytest.mark, tier))
    dropped = [item for item in items if _path_cannot_matter(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not _path_cannot_matter(item)]


@pytest.fixture
def no_model_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a model loads: bad settings must be refused before any model does."""

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("a model was loaded before the settings were checked")

    monkeypatch.setattr("advest.training.module.load_policy", refuse)
    monkeypatch.setattr("advest.training.embedded.build", refuse)
