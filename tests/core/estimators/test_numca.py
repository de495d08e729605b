"""Numca: the notes' worked example and regex vectors, fast == reference, spec/numca.md's
properties, the detokenisation helper, bad input."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import ClassVar

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import advest.fast.group
import advest.reference.group  # noqa: F401  (binds the submodule used as reference.group)
from advest import fast, reference
from advest.fast import registry
from advest.fast.detokenize import decode_with_offsets, texts_and_offsets
from advest.fast.numca import _extract
from advest.fast.numca import numca as fast_numca
from advest.oracle.reports.catalogue import tolerance
from advest.reference.numca import baselines, join_tokens, milestones, numbers
from advest.reference.numca import numca as ref_numca
from advest.spec.tolerances import output_floor

Span = tuple[int, int]
Rollout = tuple[str, list[Span]]  # text, spans of the valid tokens

WORKED = [
    ["Area", " is", " 12", ",", " so", " 1/2", " or", " 99", " then", " done"],
    ["Area is 12 and 0.5"],
    ["Area is 13 and 3/4"],
    ["Area is 12 and 7"],
]


def _tokens(groups: Sequence[Sequence[Sequence[str]]]) -> list[list[Rollout]]:
    return [[join_tokens(r) for r in group] for group in groups]


def _pack(
    groups: Sequence[Sequence[Rollout]], t: int, places: Sequence[Sequence[list[int]]] | None = None
) -> tuple[list[list[str]], torch.Tensor, torch.Tensor]:
    """texts, offsets [B, G, T, 2] and mask; valid tokens at ``places`` (default: a prefix),
    padding offsets hold garbage that must not matter."""
    b, g = len(groups), len(groups[0])
    offsets = torch.full((b, g, t, 2), -7, dtype=torch.long)
    offsets[..., 1] = 10**6
    mask = torch.zeros((b, g, t), dtype=torch.bool)
    for i, group in enumerate(groups):
        for j, (_, spans) in enumerate(group):
            where = places[i][j] if places else list(range(len(spans)))
            if spans:
                offsets[i, j, where] = torch.tensor(spans, dtype=torch.long)
            mask[i, j, where] = True
    return [[text for text, _ in group] for group in groups], offsets, mask


def _ref(group: Sequence[Rollout], rewards: Sequence[object]) -> list[list[Fraction]]:
    return ref_numca([x for x, _ in group], [o for _, o in group], rewards)  # type: ignore[arg-type]


def test_worked_example_of_the_notes() -> None:
    group = _tokens([WORKED])[0]
    v_hat = baselines([x for x, _ in group], [o for _, o in group], [1, 1, 0, 0])[0]
    third, half = Fraction(1, 3), Fraction(1, 2)
    assert v_hat == [third] * 5 + [half] * 2 + [Fraction(1)] * 3
    adv = _ref(group, [1, 1, 0, 0])
    assert adv[0] == [1 - third] * 5 + [half] * 2 + [Fraction(0)] * 3
    assert adv[1:] == [[Fraction(2, 3)], [Fraction(-2, 3)], [Fraction(-2, 3)]]  # one token each
    for dtype in (torch.float64, torch.float32):
        texts, offsets, mask = _pack([group], 10)
        out = fast_numca(texts, offsets, mask, torch.tensor([[1.0, 1, 0, 0]], dtype=dtype))
        assert out.dtype == dtype
        want = torch.tensor([float(x) for x in adv[0]], dtype=dtype)
        assert torch.allclose(out[0, 0], want, atol=1e-7)
        assert out[0, 1:, 0].tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3])
        assert bool((out[0, 1:, 1:] == 0).all())  # padding


REGEX_VECTORS = [
    ("x = -3 and 5-3", ["-3", "5", "3"]),
    ("1,234,567 and 1,23", ["1234567", "1", "23"]),
    (r"0.50 1/2 \frac{1}{2} $\dfrac{2}{4}$ .5", ["1/2"] * 5),
    ("x2 2x 3. end", ["2", "3"]),
    ("1,2345", ["1", "2345"]),
    ("a/0 3/0", ["0"]),
    ("v1.5 -0.0", ["0"]),
    (r"-\frac{-1}{2} (3)-4 1,234.5", ["1/2", "3", "4", "2469/2"]),
]


@pytest.mark.parametrize(("text", "values"), REGEX_VECTORS)
def test_regex_vectors_of_the_notes(text: str, values: list[str]) -> None:
    assert [str(v) for _, _, v in numbers(text)] == values
    rollout, value, _ = _extract([text])
    assert len(rollout) == len(values)  # fast finds the same spans
    assert len(set(value)) == len(set(values))  # and interns equal values to one id


# Fragments of responses: numerals, separators, signs, brackets, LaTeX, several whitespaces.
FRAGMENTS = [
    "1", "2", "12", "0.5", ".5", "1/2", "2/4", "3", "99", "-", ",", ",234", "/", "/0", ".",
    "x", "a", ")", "$", "\\frac{1}{2}", "\\dfrac{", "}{", "}", " ", " ", "  ", "\n", "\u00a0",
]  # fmt: skip


@st.composite
def rollouts(draw: st.DrawFn, max_t: int = 8, numbers_ok: bool = True) -> Rollout:
    """A text and its token spans, with gaps (text in no token), empty tokens and repeated spans
    (as for a multi-byte character split over tokens)."""
    pool = FRAGMENTS if numbers_ok else [f for f in FRAGMENTS if not any(c.isdigit() for c in f)]
    piece = st.lists(st.sampled_from(pool), min_size=1, max_size=3).map("".join)
    kinds = st.sampled_from(["token"] * 6 + ["gap", "empty", "repeat"])
    text, spans = "", []
    for _ in range(draw(st.integers(0, max_t))):
        kind = draw(kinds)
        if kind == "repeat" and spans:
            spans.append(spans[-1])
        elif kind == "empty":
            spans.append((len(text), len(text)))
        else:
            p = draw(piece)
            if kind != "gap":
                spans.append((len(text), len(text) + len(p)))
            text += p
    if draw(st.booleans()):  # text after the last token (e.g. a stripped suffix)
        text += draw(piece)
    return text, spans


REWARDS = st.sampled_from([0.0, 1.0, 0.5, -1.0, 1e3, 1e3 + 1e-4])


@st.composite
def groups(draw: st.DrawFn, g: int, numbers_ok: bool = True) -> tuple[list[Rollout], list[float]]:
    rolls = [draw(rollouts(numbers_ok=numbers_ok)) for _ in range(g)]
    if all(not spans for _, spans in rolls):  # a group needs a valid token
        rolls[0] = ("7 " if numbers_ok else "a ", [(0, 1), (1, 2)])
    return rolls, draw(st.lists(REWARDS, min_size=g, max_size=g))


def _tol(want: list[list[Fraction]], dtype: torch.dtype) -> float:
    """spec/tolerances.py: rel times the output scale, max |A| over the group (never max|r|)."""
    scale = max([abs(float(x)) for row in want for x in row], default=0.0)
    return tolerance("numca", dtype) * scale + output_floor(dtype)


def _close(got: torch.Tensor, want: list[list[Fraction]], dtype: torch.dtype) -> None:
    tol = _tol(want, dtype)
    for j, row in enumerate(want):
        assert got[j, : len(row)].tolist() == pytest.approx([float(x) for x in row], abs=tol), j


@settings(max_examples=150)
@given(
    data=st.data(),
    g=st.one_of(st.integers(2, 5), st.just(33)),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_fast_equals_reference_and_groups_are_isolated(
    data: st.DataObject, g: int, dtype: torch.dtype
) -> None:
    batch = [data.draw(groups(g)) for _ in range(2)]
    t = 10
    places = [
        [sorted(data.draw(st.permutations(range(t)))[: len(s)]) for _, s in rolls]
        for rolls, _ in batch
    ]
    texts, offsets, mask = _pack([rolls for rolls, _ in batch], t, places)
    rewards = torch.tensor([r for _, r in batch], dtype=dtype)
    out = fast_numca(texts, offsets, mask, rewards)
    for i, (rolls, _) in enumerate(batch):
        want = _ref(rolls, rewards[i].tolist())
        for j, row in enumerate(want):
            got = out[i, j, places[i][j]]
            assert got.tolist() == pytest.approx([float(x) for x in row], abs=_tol(want, dtype))
    assert bool((out[~mask] == 0).all())


@given(batch=st.lists(groups(3, numbers_ok=False), min_size=1, max_size=3))
def test_no_numbers_anywhere_gives_rloo_on_every_token(
    batch: list[tuple[list[Rollout], list[float]]],
) -> None:
    for rolls, r in batch:
        loo = reference.group.rloo(r)
        assert _ref(rolls, r) == [[loo[j]] * len(s) for j, (_, s) in enumerate(rolls)]
    texts, offsets, mask = _pack([rolls for rolls, _ in batch], 8)
    rewards = torch.tensor([r for _, r in batch], dtype=torch.float64)
    out = fast_numca(texts, offsets, mask, rewards)
    want = fast.group.rloo(rewards)[..., None].expand_as(out)
    assert torch.equal(out[mask], want[mask])  # exactly


def test_a_value_in_every_other_rollout_gives_the_leave_one_out_mean() -> None:
    tokens = ["I", " got", " 42", " !", " ."]
    group = _tokens([[tokens, ["42 is it"], ["so 42 ."], ["maybe 42 too"]]])[0]
    assert milestones(*group[0])[0].available == 4
    r = [1, 0, 0.5, 0]
    loo = reference.group.rloo(r)
    assert _ref(group, r)[0] == [loo[0]] * 5
    texts, offsets, mask = _pack([group], 5)
    out = fast_numca(texts, offsets, mask, torch.tensor([r], dtype=torch.float64))
    assert out[0, 0].tolist() == pytest.approx([float(loo[0])] * 5, abs=1e-12)


def test_binary_rewards_value_only_in_correct_or_only_in_wrong_others() -> None:
    tokens = [" 5", " then", " 8", " end"]
    others = ["5 ok", "5 yes", "8 no", "8 nope"]
    for r_own in (1, 0):  # rollout 0 correct, then wrong
        group = _tokens([[tokens, *([o] for o in others)]])[0]
        r = [r_own, 1, 1, 0, 0]
        adv = _ref(group, r)[0]
        # "5" is held only by correct others (V = 1), then "8" only by wrong ones (V = 0)
        assert adv[2:4] == [Fraction(r_own - 1)] * 2
        texts, offsets, mask = _pack([group], 4)
        out = fast_numca(texts, offsets, mask, torch.tensor([r], dtype=torch.float64))
        assert out[0, 0, 2].item() == r_own - 1
    group = _tokens([[[*tokens, " ."], *([o] for o in others)]])[0]
    assert _ref(group, [1, 1, 1, 0, 0])[0][4] == 1  # after "8": V = 0


@given(grp=groups(4), c=REWARDS)
def test_all_equal_returns_give_zero_advantages_exactly(
    grp: tuple[list[Rollout], list[float]], c: float
) -> None:
    rolls, _ = grp
    assert all(x == 0 for row in _ref(rolls, [c] * 4) for x in row)
    texts, offsets, mask = _pack([rolls], 8)
    assert bool((fast_numca(texts, offsets, mask, torch.full((1, 4), c)) == 0).all())


@given(grp=groups(4), data=st.data())
def test_baseline_lies_between_the_other_returns_and_ignores_the_own_return(
    grp: tuple[list[Rollout], list[float]], data: st.DataObject
) -> None:
    rolls, r = grp
    texts, spans = [x for x, _ in rolls], [o for _, o in rolls]
    v_hat = baselines(texts, spans, r)
    for i, row in enumerate(v_hat):
        others = [Fraction(x) for j, x in enumerate(r) if j != i]
        assert all(min(others) <= v <= max(others) for v in row)
        changed = list(r)
        changed[i] = data.draw(REWARDS)
        assert baselines(texts, spans, changed)[i] == row


@given(grp=groups(3), data=st.data())
def test_baseline_at_t_depends_only_on_tokens_before_t(
    grp: tuple[list[Rollout], list[float]], data: st.DataObject
) -> None:
    rolls, r = grp
    tokens = [[text[s:e] for s, e in spans] for text, spans in rolls]  # gaps dropped
    group = [join_tokens(row) for row in tokens]
    v_hat = baselines([x for x, _ in group], [o for _, o in group], r)
    i = data.draw(st.integers(0, 2))
    t = data.draw(st.integers(0, len(tokens[i])))
    tail = data.draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4))
    replaced = [*group[:i], join_tokens(tokens[i][:t] + tail), *group[i + 1 :]]
    v_new = baselines([x for x, _ in replaced], [o for _, o in replaced], r)
    n = min(t + 1, len(v_hat[i]))
    assert v_new[i][:n] == v_hat[i][:n]


@given(data=st.data(), r=st.lists(REWARDS, min_size=3, max_size=3))
def test_equivalent_numerals_give_identical_advantages(data: st.DataObject, r: list[float]) -> None:
    forms = [" 0.5", " .5", " 0.50", " 1/2", " 2/4", " \\frac{1}{2}", " $\\dfrac{2}{4}$"]
    skeleton = [["so", "{}", " and", " 3", " end"], ["x{} y", "!"], ["3{} z"]]

    def group(fill: str) -> list[Rollout]:
        return [join_tokens([tok.format(fill) for tok in row]) for row in skeleton]

    def pick() -> str:
        return data.draw(st.sampled_from(forms))

    base = _ref(group(forms[0]), r)
    assert _ref(group(pick()), r) == base
    texts, offsets, mask = _pack([group(pick())], 5)
    out = fast_numca(texts, offsets, mask, torch.tensor([r], dtype=torch.float64))
    _close(out[0], base, torch.float64)


@given(grp=groups(4), data=st.data())
def test_permuting_rollouts_permutes_advantages(
    grp: tuple[list[Rollout], list[float]], data: st.DataObject
) -> None:
    rolls, r = grp
    perm = data.draw(st.permutations(range(4)))
    a = _ref(rolls, r)
    b = _ref([rolls[j] for j in perm], [r[j] for j in perm])
    assert b == [a[j] for j in perm]


@given(grp=groups(3))
def test_baseline_changes_only_where_a_milestone_becomes_available(
    grp: tuple[list[Rollout], list[float]],
) -> None:
    rolls, r = grp
    v_hat = baselines([x for x, _ in rolls], [o for _, o in rolls], r)
    for (text, spans), row in zip(rolls, v_hat, strict=True):
        starts = {m.available for m in milestones(text, spans)}
        assert all(t in starts for t in range(1, len(row)) if row[t] != row[t - 1])


def test_unterminated_and_unsupported_spans_are_never_used() -> None:
    group = _tokens([[["a", " 5", " b", " 6"], ["5 6 7"], ["7"]]])[0]
    r = [0, 1, 0]
    # "5" counts from token 2; "6" never ends its word; "7" is nowhere in rollout 0
    assert [m.available for m in milestones(*group[0])] == [3, None]
    assert _ref(group, r)[0] == [Fraction(-1, 2)] * 3 + [Fraction(-1)]
    assert _ref(group, r)[2] == [Fraction(-1, 2)]  # "7" is unterminated in its own rollout


def test_registry_calls_numca_by_its_input_names() -> None:
    entry = registry.entry("numca")
    assert entry.kind == "token" and entry.inputs == ("texts", "offsets", "mask", "rewards")
    texts, offsets, mask = _pack(_tokens([WORKED]), 10)
    rollout = {
        "texts": texts,
        "offsets": offsets,
        "mask": mask,
        "rewards": torch.tensor([[1.0, 1, 0, 0]]),
    }
    out = entry.fn(**{n: rollout[n] for n in entry.inputs})
    assert out[0, 0, 5].item() == pytest.approx(0.5)


def test_bad_input_raises_clear_errors() -> None:
    texts, offsets, mask = _pack(_tokens([WORKED, WORKED]), 10)
    r = torch.tensor([[1.0, 1, 0, 0], [0, 1, 0, 1]])
    bad = offsets.clone()
    bad[1, 2, 0] = torch.tensor([0, 99])
    with pytest.raises(
        ValueError, match=r"offsets of group 1, sample 2, token 0: \[0, 99\] is out"
    ):
        fast_numca(texts, bad, mask, r)
    bad = offsets.clone()
    bad[0, 0, 3] = torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"group 0, sample 0, token 3.*not non-decreasing"):
        fast_numca(texts, bad, mask, r)
    with pytest.raises(ValueError, match="offsets must have shape"):
        fast_numca(texts, offsets[:, :3], mask[:, :3], r)
    b, g, t, _ = offsets.shape  # the message names the [B, G, T] the mask must have
    with pytest.raises(ValueError, match=rf"mask must have shape \[B, G, T\] = \({b}, {g}, {t}\)$"):
        fast_numca(texts, offsets, mask[..., :4], r)
    with pytest.raises(ValueError, match="offsets is on meta but rewards is on cpu"):
        fast_numca(texts, offsets.to("meta"), mask, r)
    with pytest.raises(ValueError, match="mask must be boolean or hold only 0 and 1"):
        fast_numca(texts, offsets, mask.long() * 2, r)
    with pytest.raises(TypeError, match="offsets must be an integer tensor"):
        fast_numca(texts, offsets.float(), mask, r)
    with pytest.raises(ValueError, match=r"texts\[1\] \(group 1\) must be a list of G = 4"):
        fast_numca([texts[0], texts[1][:3]], offsets, mask, r)
    empty = mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match="mask leaves group 1 without valid tokens"):
        fast_numca(texts, offsets, empty, r)
    with pytest.raises(ValueError, match="rewards has a non-finite value in group 1"):
        fast_numca(texts, offsets, mask, torch.tensor([[1.0, 1, 0, 0], [0, float("nan"), 0, 1]]))
    with pytest.raises(ValueError, match="G >= 2"):
        fast_numca([["1 "]], offsets[:1, :1], mask[:1, :1], r[:1, :1])
    group = _tokens([WORKED])[0]
    text, spans = group[0]
    with pytest.raises(ValueError, match=r"sample 1, token 0: \[0, 99\) is out of range"):
        ref_numca([text, text], [spans, [(0, 99)]], [1, 0])
    with pytest.raises(ValueError, match="mask leaves group 0 without valid tokens"):
        ref_numca(["1 ", "2 "], [[], []], [1, 0])
    for texts_n, offsets_n in ((3, 2), (2, 3), (1, 2), (2, 1)):  # more or fewer than rewards
        with pytest.raises(ValueError, match=f"texts has {texts_n} and offsets {offsets_n} "):
            ref_numca([text] * texts_n, [spans] * offsets_n, [1, 0])
    with pytest.raises(ValueError, match="non-finite value"):
        ref_numca([text, text], [spans, spans], [1, float("nan")])
    with pytest.raises(ValueError, match="G >= 2"):
        ref_numca([text], [spans], [1])


class ByteTokenizer:
    """A toy byte-level tokenizer: id = one UTF-8 byte, decoded with replacement characters."""

    def decode(self, ids: list[int], /) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


class SpaceTokenizer:
    """A toy SentencePiece-like tokenizer: "▁" marks a space, dropped at the start of a decode."""

    vocab: ClassVar[list[str]] = ["▁Area", "▁is", "▁1", "2", ",", "▁so", "▁ok", "é"]

    def decode(self, ids: list[int], /) -> str:
        return "".join(self.vocab[i] for i in ids).replace("▁", " ").removeprefix(" ")


def test_detokenizer_gives_split_characters_to_the_token_holding_their_last_byte() -> None:
    text = "€ 12 ü 3"
    ids = list(text.encode())
    got, spans = decode_with_offsets(ids, ByteTokenizer())
    assert got == text
    assert spans[:4] == [(0, 0), (0, 0), (0, 1), (1, 2)]  # "€" is three bytes
    assert "".join(got[s:e] for s, e in spans) == text


def test_detokenizer_keeps_sentencepiece_spaces_by_decoding_in_context() -> None:
    tok = SpaceTokenizer()
    ids = [0, 1, 2, 3, 4, 5, 7, 6]
    text, spans = decode_with_offsets(ids, tok, window=4)
    assert text == tok.decode(ids) == "Area is 12, soé ok"
    assert [text[s:e] for s, e in spans] == ["Area", " is", " 1", "2", ",", " so", "é", " ok"]


def test_detokenized_batch_feeds_numca_like_the_token_strings() -> None:
    tok = SpaceTokenizer()
    rows = [[0, 1, 2, 3, 4, 5, 6], [2, 3, 6], [2, 6], [0, 5]]
    token_ids = torch.zeros(1, 4, 9, dtype=torch.long)
    mask = torch.zeros(1, 4, 9, dtype=torch.bool)
    for j, row in enumerate(rows):
        token_ids[0, j, 2 : 2 + len(row)] = torch.tensor(row)  # left padding
        mask[0, j, 2 : 2 + len(row)] = True
    texts, offsets = texts_and_offsets(token_ids, mask, tok)
    assert texts[0][:2] == ["Area is 12, so ok", "12 ok"]
    r = [1.0, 1.0, 0.0, 0.0]
    out = fast_numca(texts, offsets, mask, torch.tensor([r], dtype=torch.float64))
    pieces = [
        [tok.decode(row[: k + 1])[len(tok.decode(row[:k])) :] for k in range(len(row))]
        for row in rows
    ]
    want = _ref([join_tokens(p) for p in pieces], r)
    _close(out[0, :, 2:], want, torch.float64)
    assert out[0, 0, 2 + 6].item() == 0.0  # after "12," ends: V(12) = R_2 = 1


def test_detokenizer_matches_a_real_byte_level_bpe() -> None:
    import tokenizers  # a dependency of advest (pyproject): a missing one fails, never skips
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(["The area is 12, so 1/2 or 0.5 then done. € ü 1,234"] * 20, trainer)
    text = "Area is 12 € and 1/2 ü 99 然后 3"
    enc = tok.encode(text)
    got, spans = decode_with_offsets(enc.ids, tok)
    assert got == text == tok.decode(enc.ids)
    for k, (span, hf) in enumerate(zip(spans, enc.offsets, strict=True)):
        shared_with_next = k + 1 < len(spans) and enc.offsets[k + 1] == hf
        assert span == ((span[0], span[0]) if shared_with_next else hf), k


def test_leading_text_outside_every_token_changes_nothing_even_past_float32s_exact_range() -> None:
    """Characters before the first token hold no number a token can reach, so prefixing every
    text with N spaces and moving every span by N leaves the advantages unchanged. With 40
    rollouts of N = 2^20 + 1 leading spaces, the search keys (rollout × width + start) reach
    4·10^7, where float32 steps by 4: the char → token map must stay integer."""
    one_char = [["4", " ", "2", " ", "!"], ["7", " ", "4", " ", "2"], ["4", "2", " ", "7", " "],
                ["1", " ", "1", " ", "."]]  # fmt: skip
    groups = _tokens([one_char] * 10)  # B = 10 groups of G = 4 single-character rollouts
    texts, offsets, mask = _pack(groups, 5)
    r = torch.tensor([[1.0, 0.0, 0.5, 0.25]] * 10, dtype=torch.float64)
    want = fast_numca(texts, offsets, mask, r)
    assert bool(want.any())  # milestones and the leave-one-out mean both at work
    N = 2**20 + 1
    far = [[" " * N + text for text in row] for row in texts]
    moved = torch.where(mask.unsqueeze(-1), offsets + N, offsets)
    assert torch.equal(fast_numca(far, moved, mask, r), want)
