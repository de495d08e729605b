"""Calling conventions and adapters: how the oracle calls a user's estimator. ``load``
imports ``MODULE:FUNCTION``; ``resolve_signature`` decides where K goes; ``Plain`` calls
``fn(rewards [B, G], ...)`` on copies (``Guard`` records changes to them) and checks the output
(``check_output``); ``Watch`` records outputs that are not finite. verl's convention is
``advest.oracle.conventions.verl.VerlCall``."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Literal, Protocol, get_args

from torch import Tensor

from ..inputs.tolerance import sample_lengths

Objective = Literal["outcome", "maxk", "maxrl"]
"""What an estimator is judged against (``advest check --family``): the mean reward, max@K, or
MaxRL's harmonic pass@k sum. Not ``registry.Entry.family`` (the module that holds an
estimator); the old name ``Family`` resolves from ``advest.oracle`` with a DeprecationWarning."""


Convention = Literal["plain", "verl", "flat", "skyrl", "nemo_rl", "prime_rl"]
"""How the oracle calls an estimator: ``plain`` on ``[B, G]``; the others on flat rows with a
group id per row, as trainers hold them (``oracle.conventions.rows``)."""

CONVENTIONS: tuple[Convention, ...] = get_args(Convention)
"""Every calling convention: ``advest check --convention``'s choices, ``advest.testing``'s."""
FAMILIES: tuple[str, ...] = (*get_args(Objective), "token", "episode", "shaping")
"""What ``advest check --family`` and ``assert_estimator(family=)`` judge: the objectives of
sequence estimators, then token-level estimators (exact token trees), episode estimators and
reward shapings (``oracle.properties.shaping``: a transform's declared invariants)."""


class OracleError(ValueError):
    """The oracle's own arguments, or what the user's callable returned, are unusable; the
    message says what was got and what was expected."""


class OutOfScope(OracleError):
    """The callable is not an estimator the oracle can judge (e.g. its advantage varies along a
    response, or it needs an input the oracle cannot make up); the message says why."""


CALL_ERRORS = (Exception,)
"""What an estimator may raise on a batch it cannot handle (verl PR 7150's negative uids raised
an IndexError; a user's division by G − 1 a ZeroDivisionError): reported as the row's verdict,
never as the oracle's failure (``attempt`` lets the oracle's own ``OracleError`` through)."""


def attempt(run: Callable[[], Tensor]) -> Tensor | str:
    """``run()``, or the text of the error it raised (the estimator's own failure is the finding;
    the oracle's ``OracleError`` passes)."""
    try:
        return run()
    except OracleError:
        raise
    except CALL_ERRORS as error:  # the estimator's own failure is the finding
        return f"{type(error).__name__}: {str(error)[:160]}"


class Estimator(Protocol):
    """A bound estimator: rewards ``[B, G]`` -> advantages ``[B, G]`` (K already bound).
    ``lengths`` ``[B, G]``: the response length of each sample, for estimators that read lengths;
    None means ``sample_lengths(rewards.shape)``."""

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor: ...


def load(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (the function may be a dotted attribute path)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ImportError(f"expected MODULE:FUNCTION, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise ImportError(f"{spec} is not callable")
    return obj  # type: ignore[no-any-return]


def _first_change(before: Tensor, after: Tensor) -> str:
    changed = ~((before == after) | (before.isnan() & after.isnan()))
    idx = tuple(int(i) for i in changed.nonzero()[0].tolist())
    return f"at {list(idx)}: {before[idx].item():.6g} → {after[idx].item():.6g}"


class Guard:
    """Records in-place modification of the inputs a callable receives (``mutations``)."""

    def __init__(self) -> None:
        self.mutations: list[str] = []

    def copies(self, **inputs: Any) -> dict[str, Any]:
        """Independent copies of the tensors (and numpy arrays) in ``inputs``."""
        return {k: (v.clone() if isinstance(v, Tensor) else _copy(v)) for k, v in inputs.items()}

    def compare(self, originals: dict[str, Any], given: dict[str, Any]) -> None:
        for name, before in originals.items():
            after = given[name]
            if isinstance(before, Tensor):
                same = before.shape == after.shape and bool(
                    ((before == after) | (before.isnan() & after.isnan())).all()
                )
                seen = any(m.startswith(f"{name} ") for m in self.mutations)
                if not same and not seen:
                    self.mutations.append(f"{name} changed in place {_first_change(before, after)}")
            elif not _equal(before, after) and len(self.mutations) < 3:
                self.mutations.append(f"{name} changed in place")


def _copy(value: Any) -> Any:
    copy = getattr(value, "copy", None)
    return copy() if callable(copy) else value


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool((a == b).all())
    except AttributeError:
        return bool(a == b)


def check_output(out: object, like: Tensor, what: str = "the output") -> Tensor:
    """``out`` itself, if it is a tensor of ``like``'s shape, dtype and device; else OracleError
    saying what was got and what was expected."""
    if not isinstance(out, Tensor):
        raise OracleError(f"{what}: got a {type(out).__name__}, expected a torch.Tensor")
    if out.shape != like.shape:
        hint = " (transposed: [G, B] instead of [B, G]?)" if out.shape == like.shape[::-1] else ""
        raise OracleError(
            f"{what}: got shape {list(out.shape)}, expected {list(like.shape)} = [B, G]{hint}"
        )
    if out.dtype != like.dtype:
        raise OracleError(f"{what}: got dtype {out.dtype}, expected {like.dtype} (the rewards')")
    if out.device != like.device:
        raise OracleError(f"{what}: got device {out.device}, expected {like.device}")
    return out


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter] | None:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return None


def resolve_signature(
    fn: Callable[..., Any], family: Objective, signature: str | None
) -> list[str]:
    """The argument order to call ``fn`` with: ``rewards``, ``k`` (positional), ``k=`` (keyword
    ``k``), ``lengths`` (``sample_lengths``). Without ``signature``, K goes only into a parameter
    named ``k``: OracleError if ``fn``'s parameter in that place has another name."""
    if signature is not None:
        parts = [p.strip() for p in signature.split(",") if p.strip()]
        bad = [p for p in parts if p not in ("rewards", "k", "k=", "lengths")]
        if "rewards" not in parts or bad:
            raise OracleError(f"--signature: use rewards, k, k= and lengths; got {signature!r}")
    else:
        parts = ["rewards"]
        params = _parameters(fn)
        if family == "maxk":
            positional = [
                p
                for p in params or []
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
            ]
            keyword_k = any(p.name == "k" and p.kind == p.KEYWORD_ONLY for p in params or [])
            if params is None or (len(positional) >= 2 and positional[1].name.lower() == "k"):
                parts.append("k")
            elif keyword_k:
                parts.append("k=")
            else:
                where = (
                    f"its second parameter is {positional[1].name!r}"
                    if len(positional) >= 2
                    else "it has no second positional parameter"
                )
                raise OracleError(
                    f"will not pass K to {getattr(fn, '__name__', fn)}: {where}, not 'k'. If K "
                    "belongs there, say so with --signature 'rewards, k' (or 'rewards, k=' for a "
                    "keyword); for an estimator without K use --family outcome"
                )
    params = _parameters(fn)
    if params is not None:
        dummy_args = [0 for p in parts if p != "k="]
        dummy_kwargs = {"k": 0} if "k=" in parts else {}
        try:
            inspect.signature(fn).bind(*dummy_args, **dummy_kwargs)
        except TypeError as error:
            raise OracleError(
                f"cannot call {getattr(fn, '__name__', fn)}{inspect.signature(fn)} with "
                f"({', '.join(parts)}): {error}"
            ) from None
    return parts


class Plain:
    """``fn(rewards [B, G], ...)`` -> ``[B, G]``, called on copies, output checked."""

    def __init__(self, fn: Callable[..., Any], parts: list[str], k: int, guard: Guard) -> None:
        self.fn, self.parts, self.k, self.guard = fn, parts, k, guard

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor:
        inputs: dict[str, Any] = {"rewards": rewards}
        if "lengths" in self.parts:
            inputs["lengths"] = sample_lengths(rewards.shape) if lengths is None else lengths
        given = self.guard.copies(**inputs)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in self.parts:
            if p == "k":
                args.append(self.k)
            elif p == "k=":
                kwargs["k"] = self.k
            else:
                args.append(given[p])
        out = self.fn(*args, **kwargs)
        self.guard.compare(inputs, given)
        return check_output(out, rewards)


class Watch:
    """``est`` itself, recording each call whose output is NaN or inf where the rewards are
    finite (``seen``: one line per such call, naming a group's rewards and output): no check may
    judge a property of an output that is not a number."""

    def __init__(self, est: Estimator) -> None:
        self.est = est
        self.seen: list[str] = []

    def __call__(self, rewards: Tensor, lengths: Tensor | None = None) -> Tensor:
        out = self.est(rewards, lengths)
        bad = rewards.isfinite().all(-1) & ~out.isfinite().all(-1)  # [B]
        if bool(bad.any()):
            g = int(bad.nonzero()[0, 0])
            kind = " and ".join(
                what
                for what, hit in (("NaN", out[bad].isnan()), ("inf", out[bad].isinf()))
                if bool(hit.any())
            )
            shown = [round(x, 6) for x in rewards[g].tolist()]
            got = [round(x, 6) for x in out[g].tolist()]
            self.seen.append(
                f"{kind} in {int(bad.sum())} of {len(bad)} groups, e.g. rewards {shown} → {got}"
            )
        return out
