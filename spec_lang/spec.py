"""The spec: one device, full tensors, one training iteration.

A :class:`Spec` holds the parameters (name -> dims, no placement), the data inputs (token ids
and labels in the ``index`` domain, masks in the ``mask`` domain), the forward+loss function and
the optimizer. :func:`spec_lang.iteration.trace_spec` turns it into terms: forward, loss,
reverse-mode gradients, optimizer update.

The forward function has the signature ``forward(params: Params, data: Mapping[str, Tensor])
-> Tensor`` and returns the scalar loss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spec_lang.dims import Dim
from spec_lang.errors import SpecError
from spec_lang.tensor import Tensor, fail, user_site
from spec_lang.term import INPUT_DOMAINS, DimSpec, Op, Term, term

__all__ = ["Data", "real", "positive", "mask", "index", "Params", "Spec", "input_term"]


@dataclass(frozen=True, slots=True)
class Data:
    """Declaration of a data input: its dims, value domain and (for ``index``) the index range.

    Use the helpers :func:`real`, :func:`positive`, :func:`mask`, :func:`index`.
    """

    dims: tuple[Dim, ...]
    domain: str = "real"
    range: Dim | None = None

    def __post_init__(self) -> None:
        if self.domain not in INPUT_DOMAINS:
            raise SpecError(f"{user_site(3)}: data domain {self.domain!r}: one of {INPUT_DOMAINS}")
        if (self.domain == "index") != (self.range is not None):
            raise SpecError(f"{user_site(3)}: an index input needs range=Dim (its values are in "
                            "[0, size)), and only index inputs take a range")
        for d in self.dims:
            if not isinstance(d, Dim):
                raise SpecError(f"{user_site(3)}: data dims must be Dim objects, got {d!r}")


def real(*dims: Dim) -> Data:
    """A real-valued data input (e.g. activations fed to a stage)."""
    return Data(tuple(dims), "real")


def positive(*dims: Dim) -> Data:
    """A data input with values > 0."""
    return Data(tuple(dims), "positive")


def mask(*dims: Dim) -> Data:
    """A 0/1 token mask (the loss weight; an ignored label is a 0)."""
    return Data(tuple(dims), "mask")


def index(*dims: Dim, range: Dim) -> Data:  # noqa: A002 -- the field's word
    """Integer ids in ``[0, |range|)``: tokens and labels (``index(B, S, range=V)``)."""
    return Data(tuple(dims), "index", range)


def input_term(name: str, kind: str, domain: str, dims: tuple[Dim, ...],
               index_dim: Dim | None = None) -> Term:
    """The spec's ``INPUT`` term (hash-consed: the plan's lineage refers to the same node)."""
    attrs: tuple[Any, ...] = (name, kind, domain)
    if index_dim is not None:
        attrs += (index_dim.name,)
    return term(Op.INPUT, (), attrs, tuple(DimSpec(d.name) for d in dims))


class Params(Mapping[str, Tensor]):
    """Parameters by dotted name, with scoped views: ``p.scope("layers.0")["attn.wq"]``."""

    def __init__(self, tensors: Mapping[str, Tensor], prefix: str = ""):
        self._t = dict(tensors)
        self._prefix = prefix

    @property
    def prefix(self) -> str:
        """The scope's dotted prefix, ``""`` or e.g. ``"layers.3."``."""
        return self._prefix

    def scope(self, prefix: str) -> Params:
        """The view of the parameters under ``prefix.`` (nested scopes join with dots)."""
        return Params(self._t, f"{self._prefix}{prefix}.")

    def __getitem__(self, key: str) -> Tensor:
        full = self._prefix + key
        if full not in self._t:
            near = [k for k in self._t if k.startswith(self._prefix)][:8]
            raise fail(f"no parameter {full!r}; parameters here: {near}")
        return self._t[full]

    def __iter__(self) -> Iterator[str]:
        n = len(self._prefix)
        return (k[n:] for k in self._t if k.startswith(self._prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True, kw_only=True)
class Spec:
    """A single-device training iteration.

    Attributes:
        params: name -> dims (``{"layers.0.mlp.w1": (H, F)}``), in a fixed order.
        data: name -> :class:`Data` (tokens, labels, masks).
        forward: ``forward(params, data) -> loss`` (scalar Tensor).
        optimizer: :class:`spec_lang.optim.SGD` or :class:`spec_lang.optim.AdamW`.
        assumptions: extra facts the verdict relies on, in words.
        param_domains: optional name -> domain for parameters (default ``"real"``).
        clip_grad_norm: ``None`` or the max global L2 norm: gradients are scaled by
            ``min(1, max_norm / (||g|| + 1e-6))`` before the optimizer (PyTorch's
            ``clip_grad_norm_``); the iteration then also outputs ``grad_norm``.
        clip_groups: ``None`` or group name -> parameter names (a partition of ``params``):
            with ``clip_grad_norm``, each group is clipped by *its own* norm (``clip_grad_norm_``
            called once per group, as a pipeline trainer that clips each stage's parameters,
            docs/trainer.md); the iteration outputs ``grad_norm:<group>`` per group instead of
            ``grad_norm``.
    """

    params: Mapping[str, tuple[Dim, ...]]
    data: Mapping[str, Data]
    forward: Callable[[Params, Mapping[str, Tensor]], Tensor]
    optimizer: Any
    assumptions: tuple[str, ...] = ()
    param_domains: Mapping[str, str] = field(default_factory=dict)
    clip_grad_norm: Any = None
    clip_groups: Mapping[str, Sequence[str]] | None = None
    site: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.site:
            object.__setattr__(self, "site", user_site(3))
        clash = set(self.params) & set(self.data)
        if clash:
            raise SpecError(f"{self.site}: names {sorted(clash)} are both parameters and data")
        for k, dims in self.params.items():
            if not all(isinstance(d, Dim) for d in dims):
                raise SpecError(f"{self.site}: parameter {k!r} dims must be Dim objects, got {dims}")
            names = [d.name for d in dims]
            if len(set(names)) != len(names):
                raise SpecError(f"{self.site}: parameter {k!r} repeats a dim: {names}")
        if not callable(self.forward):
            raise SpecError(f"{self.site}: forward must be a function (params, data) -> loss")
        if self.clip_grad_norm is not None:
            from spec_lang.optim import max_norm_value
            max_norm_value(self.clip_grad_norm, self.site, SpecError)
        if self.clip_groups is not None:
            seen = [k for names in self.clip_groups.values() for k in names]
            if self.clip_grad_norm is None or sorted(seen) != sorted(self.params):
                raise SpecError(f"{self.site}: clip_groups must partition the parameters (each "
                                "in exactly one group) and needs clip_grad_norm")

    def param_term(self, name: str) -> Term:
        return input_term(name, "param", self.param_domains.get(name, "real"), self.params[name])

    def data_term(self, name: str) -> Term:
        d = self.data[name]
        return input_term(name, "data", d.domain, d.dims, d.range)
