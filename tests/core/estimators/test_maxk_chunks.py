"""The sorted max@K path on CPU (fast/_maxk_core.py): groups go by chunks of rows, each chunk's
intermediates in per-thread scratch buffers (fast/_scratch.py). Splitting a batch into chunks
never moves a result, the in-place evaluation is ``spec.maxk_weights.evaluate`` bit for bit (the
function the proofs are about), and no two threads ever share a buffer."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import torch

from advest.fast import _maxk_core, _scratch, maxk, registry
from advest.spec.maxk_weights import FORM_DEFINITIONS, FORMS, evaluate
from tests.maxk_paths import forced_path

SORTED_FAMILY = [
    name
    for name in registry.names()
    if registry.entry(name).k_range is not None and name not in ("tang_passk", "chen_passk")
]


def _estimator(name: str) -> Callable[[torch.Tensor, int], torch.Tensor]:
    fn: Callable[[torch.Tensor, int], torch.Tensor] = getattr(maxk, name)
    return fn


def _hostile(B: int, G: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """``[B, G]``: uniform, flat, 1e6 + tiny spread, ties, and mixed signs in only some rows (so
    that a chunk of non-negative rows sorts in a batch that needs the sign flip)."""
    gen = torch.Generator().manual_seed(seed)
    r = torch.rand(B, G, generator=gen, dtype=torch.float64)
    r[1] = 2.5  # flat
    r[2] = 1e6 + 1e-4 * torch.randint(0, 3, (G,), generator=gen)  # offset, ties
    r[B - 2] = torch.randint(-2, 3, (G,), generator=gen) * 0.25  # signs, ties
    r[B - 1, : G // 2] = -0.0
    return r.to(dtype)


@pytest.fixture
def rows_per_chunk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], None]]:
    def use(rows: int) -> None:
        monkeypatch.setattr(_maxk_core, "chunk_rows", lambda B, G, device: rows)

    yield use


def _defined(name: str, G: int) -> bool:
    """Whether the estimator is defined on groups of G (the forms that need K <= G − 1 are not at
    G = 1): such pairs are left out of the parametrisation rather than skipped."""
    entry = registry.entry(name)
    return max(entry.claims.min_n, 2 if entry.k_max(1) < 1 else 1) <= G


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    ("name", "G"), [(n, G) for n in SORTED_FAMILY for G in (1, 8, 64) if _defined(n, G)]
)
def test_chunks_of_any_size_give_the_one_chunk_result(
    name: str, G: int, dtype: torch.dtype, rows_per_chunk: Callable[[int], None]
) -> None:
    """11 groups as one chunk, or in chunks of 1, 3 (a ragged last chunk) and 4 rows: the same
    values to within a few float64 ulps of the group's scale (every step is row-local; only the
    matrix-vector product may add up in another order for another row count)."""
    fn, B, entry = _estimator(name), 11, registry.entry(name)
    r = _hostile(B, G, seed=G, dtype=dtype)
    for k in sorted({1, max(1, G // 4), entry.k_max(G)}):
        with forced_path("sorted"):
            rows_per_chunk(B)
            whole = fn(r, k).double()
            for rows in (1, 3, 4):
                rows_per_chunk(rows)
                got = fn(r, k).double()
                scale = r.double().abs().amax(1, keepdim=True) + whole.abs().amax(1, keepdim=True)
                ulps = 8 * torch.finfo(dtype).eps if dtype != torch.float64 else 1e-14
                assert bool(((got - whole).abs() <= ulps * scale).all()), (k, rows)
                assert torch.equal(got == 0, whole == 0), (k, rows)  # exact zeros stay exact


@pytest.mark.parametrize("G", [1, 2, 7, 64])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_sorted_evaluation_is_spec_evaluate_bit_for_bit(form: str, G: int) -> None:
    """``_evaluate_sorted`` (in place, into scratch) against ``spec.maxk_weights.evaluate`` (what
    proofs/ and Coq's Evaluation.v are about) on shifted sorted rows with ties: equal values
    (``torch.equal``, which counts −0.0 equal to +0.0)."""
    gen = torch.Generator().manual_seed(G)
    x = torch.randint(0, 5, (9, G), generator=gen).double() * torch.rand(9, 1, generator=gen)
    x = x.sort(dim=-1).values
    x = x - x[:, -1:]  # <= 0, the top at 0
    for k in range(1, G + 1 - FORM_DEFINITIONS[form][1]):  # the forms needing K <= G − 1
        c = _maxk_core._coefficients(form, G, k, x.device)
        want = evaluate(
            c.diag[None], c.step[None], c.above[:, None], x, lambda v: torch.cumsum(v, dim=-1)
        )[..., 0, :]
        assert torch.equal(_maxk_core._evaluate_sorted(c, x), want), (form, k)


def test_scratch_buffers_are_per_thread_reused_and_released() -> None:
    cpu = torch.device("cpu")
    a = _scratch.buffer("probe", (4, 8), torch.float64, cpu)
    assert _scratch.buffer("probe", (2, 8), torch.float64, cpu).data_ptr() == a.data_ptr()
    assert _scratch.buffer("other", (4, 8), torch.float64, cpu).data_ptr() != a.data_ptr()
    seen: list[int] = []
    worker = threading.Thread(
        target=lambda: seen.append(_scratch.buffer("probe", (4, 8), torch.float64, cpu).data_ptr())
    )
    worker.start()
    worker.join()
    assert seen and seen[0] != a.data_ptr()
    big = (1, _scratch.MAX_ELEMENTS + 1)
    assert _scratch.buffer("big", big, torch.float64, cpu).data_ptr() != (
        _scratch.buffer("big", big, torch.float64, cpu).data_ptr()
    )
    _scratch.release()
    kept = _scratch._BUFFERS.held
    assert not kept


def test_threads_calling_at_once_get_their_own_results(
    rows_per_chunk: Callable[[int], None],
) -> None:
    """Two threads run canonical and bagirov_zscore on different batches at once (torch drops
    the GIL inside each operation, so their chunks interleave): each result equals the same
    call made alone."""
    rows_per_chunk(5)
    batches = [_hostile(64, 32, seed=s, dtype=torch.float64) for s in (1, 2)]
    names = ("canonical", "bagirov_zscore")
    with forced_path("sorted"):
        alone = [_estimator(n)(b, 4) for n, b in zip(names, batches, strict=True)]
        bad: list[str] = []

        def work(index: int) -> None:
            for _ in range(30):
                if not torch.equal(_estimator(names[index])(batches[index], 4), alone[index]):
                    bad.append(names[index])

        threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not bad


@pytest.mark.parametrize("threads", [1, 2, 64])
def test_chunk_rows_holds_whole_groups_within_the_scratch_bound(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    cpu, meta = torch.device("cpu"), torch.device("meta")
    for G in (1, 8, 64, 1024):
        rows = _maxk_core.chunk_rows(10**6, G, cpu)
        least = min(max(_maxk_core.CHUNK_ELEMENTS, 2**16 * threads), _scratch.MAX_ELEMENTS)
        assert least <= rows * G <= _scratch.MAX_ELEMENTS, G
    assert _maxk_core.chunk_rows(10**6, _scratch.MAX_ELEMENTS * 2, cpu) == 1  # one huge group
    assert _maxk_core.chunk_rows(300, 64, meta) == 300  # other devices: the whole batch
    assert _maxk_core.chunk_rows(0, 64, meta) == 1
