"""``python -m advest.experiments.cost.bench_sort`` times every general max@K form against
``torch.sort`` and the binary counting path against grpo; here it runs at a tiny size in this
process (numbers are never asserted: only that every form is timed and printed)."""

from __future__ import annotations

import pytest

from advest.experiments.cost import bench_sort
from advest.fast import registry


def test_the_general_forms_are_the_max_at_k_entries_taking_k_on_any_rewards() -> None:
    general, binary = bench_sort.general_forms(), bench_sort.binary_forms()
    assert "canonical" in general and "bagirov_zscore" in general
    assert "chen_passk" in binary and "chen_passk" not in general  # 0/1 rewards only
    assert "tang_passk" not in binary  # no K to choose
    assert set(general) < set(binary)
    assert all(registry.entry(n).family == "maxk" for n in binary)


def test_every_form_is_timed_against_its_reference_and_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = bench_sort.measure((6, 16), 2, min_rounds=1, max_rounds=2)
    bench_sort.print_table((6, 16), 2, {"default": result})
    lines = capsys.readouterr().out.splitlines()
    assert result["rounds"] == 2
    ratio = result["ratio"]
    assert ratio["general"][bench_sort.SORT] == ratio["binary"][bench_sort.GRPO] == 1.0
    expected = {
        "general": [bench_sort.SORT, bench_sort.KEY_SORT, *bench_sort.general_forms()],
        "binary": [bench_sort.GRPO, *bench_sort.binary_forms()],
    }
    for kind, names in expected.items():
        assert list(ratio[kind]) == names
        assert all(r > 0 for r in ratio[kind].values())
        start = next(i for i, line in enumerate(lines) if line.startswith(f"{kind} rewards"))
        printed = [line.split()[0] for line in lines[start + 2 : start + 2 + len(names)]]
        assert printed == [name.split()[0] for name in names], kind
