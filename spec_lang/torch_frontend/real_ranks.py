"""Every traced rank at the real sizes too (adversarial finding R4-7).

The plan is lowered from the all-zero coordinate's trace at probe sizes; the other ranks are
traced at probe sizes and :class:`~spec_lang.torch_frontend.literals.Traces` checks they run
the same ops, reading their own blocks and rank-dependent literals; the real sizes are traced
on the zero coordinate only, to lift size literals. A rank whose program differs only at the
real sizes (``t4_04_rank1_real_size.py``: rank 1 doubles its averaged gradient when its local
batch is the real 4, not the probe 5) was never seen: EQUIVALENT for a plan whose ranks drift
apart.

:func:`check_real_ranks` compares, for each other rank ``c``, its trace at the real sizes with
the zero coordinate's at the real sizes, the way the probe traces of the two compare:

* the same ops node by node (the real-size traces of two ranks have the same nodes, as the
  probe traces do);
* each literal argument differs between the two ranks at the real sizes exactly where it
  differs between them at the probe sizes (a literal equal on every rank at probe sizes is
  equal at real sizes: R4-7's ``mul_(2.0)``; a rank-dependent one stays rank-dependent, so a
  rule that read it per rank at probe sizes read the rank's own value);
* each argument reads block ``j`` of a split on rank ``c`` at real sizes exactly where it does
  at probe sizes;
* the constants captured (``get_attr``) are the same, and so are the process groups per axis.

The probe and real traces are aligned node by node (:func:`analysis.align_sizes`: the
computing nodes one to one, the data movement between two of them by what it does, so that
``clone`` + ``_unsafe_view`` at one size and ``view`` at the other align); a node left without
a twin must differ on no rank at either size. Anything else raises
:class:`~spec_lang.torch_frontend.literals.GraphMismatch` naming the node and the user's line.
The zero coordinate's own probe and real traces are compared by
:func:`~spec_lang.torch_frontend.real_moves.check_real_moves` (R24-1).

The *values* of a rank-dependent literal at the real sizes on the other ranks (a block offset
``r * n``: round 32b, R32b-4, ``r * n + 1`` on rank 1 at the real sizes only) are read by the
rules that accept it, through ``literals.Traces.real_map`` (the twins) and
``RankValues.real_values`` (``indexing.block_of``, ``rules_index._block``, ``lower._piece``):
each checks every rank's real value, and a literal whose node has no counterpart at the real sizes is refused there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch.fx as fx

from spec_lang.torch_frontend.analysis import align_sizes, node_site
from spec_lang.torch_frontend.captured_constants import constant_differs_text, same_constant
from spec_lang.torch_frontend.literals import (GraphMismatch, _arg, _check_refs, _check_same,
                                               _literal_differences, _user_site)

__all__ = ["check_real_ranks"]


def _alignment(probe: list[fx.Node], real: list[fx.Node]
               ) -> tuple[dict[int, int], list[int], list[int]]:
    """Probe full index -> real full index for the aligned nodes, and the full indices (probe,
    real) of the data-movement nodes that cannot be aligned (:func:`analysis.align_sizes`).

    Raises:
        GraphMismatch: the computing nodes differ (the zero coordinate's traces were checked to
            agree on them already: this is a second line of defence).
    """
    ip = {n: i for i, n in enumerate(probe)}
    ir = {n: i for i, n in enumerate(real)}
    try:
        aligned, loose_p, loose_r = align_sizes(probe, real)
    except ValueError:
        raise GraphMismatch("the main trace's computing nodes differ at the real sizes") from None
    return ({ip[x]: ir[y] for x, y in aligned.items()}, [ip[x] for x in loose_p],
            [ir[y] for y in loose_r])


def _same_ops(a: list[fx.Node], b: list[fx.Node], where: str, path: str) -> None:
    """``a`` and ``b`` run the same ops node by node; else the first that differs, with the
    user's line (``literals._check_same``, with the site).

    Raises:
        GraphMismatch: naming the node and its ``file:line``.
    """
    for x, y in zip(a, b):
        if x.op != y.op or x.target != y.target:
            raise GraphMismatch(f"{where} runs {y.target} ({node_site(y, path)}) where the zero "
                                f"coordinate runs {x.target} ({node_site(x, path)}): the rank "
                                "runs another program at the real sizes",
                                site=_user_site(x, path))
    if len(a) != len(b):
        extra = (b if len(b) > len(a) else a)[min(len(a), len(b))]
        raise GraphMismatch(f"{where} has {len(b)} nodes, the zero coordinate {len(a)} (the "
                            f"first extra: {extra.target}, {node_site(extra, path)}): the rank "
                            "runs another program at the real sizes",
                            site=_user_site(extra, path))
    _check_same(a, b, where, path)


def check_real_ranks(path: str, probe0: Any, real0: Any,
                     ranks: Sequence[tuple[Mapping[str, int], Any, Any]],
                     groups: Sequence[tuple[Mapping[str, str], Mapping[str, str]]] = (),
                     groups0: Mapping[str, str] | None = None) -> None:
    """Check every other rank's real-size trace against the zero coordinate's (module
    docstring).

    Args:
        path: the train file (for the user's line in the message).
        probe0, real0: the zero coordinate's graph modules at probe and at real sizes.
        ranks: ``(coords, graph module at probe sizes, graph module at real sizes)`` of every
            other traced rank.
        groups: per rank (same order), its process groups per axis at probe and at real sizes.
        groups0: the zero coordinate's process groups at real sizes (group name -> axis).

    Raises:
        GraphMismatch: naming the rank, the node, the argument and the user's ``file:line``.
    """
    fp0, fr0 = list(probe0.graph.nodes), list(real0.graph.nodes)
    ip0, ir0 = {n: i for i, n in enumerate(fp0)}, {n: i for i, n in enumerate(fr0)}
    m, loose_p, loose_r = _alignment(fp0, fr0)
    lp, lr = set(loose_p), set(loose_r)
    for k, (c, pgm, rgm) in enumerate(ranks):
        where = f"rank {dict(c)} at the real sizes"
        if k < len(groups) and dict(groups[k][0]) != dict(groups[k][1]):
            raise GraphMismatch(f"{where} uses other process groups than at the probe sizes")
        fpc, frc = list(pgm.graph.nodes), list(rgm.graph.nodes)
        _same_ops(fr0, frc, where, path)
        blocks_r = {(ir0[x], p): v for (x, p), v in _check_refs(fr0, frc, where).items()}
        probe_blocks = _check_refs(fp0, fpc, f"rank {dict(c)}")
        blocks_p = {(m[ip0[x]], p): v for (x, p), v in probe_blocks.items() if ip0[x] in m}
        loose_blocks = [x for x, _ in probe_blocks if ip0[x] in lp]
        if blocks_r != blocks_p or loose_blocks or any(i in lr for i, _ in blocks_r):
            node = next((fr0[i] for i, _ in sorted(set(blocks_r) ^ set(blocks_p))), fr0[0])
            raise GraphMismatch(f"{where}: the blocks of a split it reads differ from the ones "
                                f"it reads at the probe sizes (node {node.name}, "
                                f"{node_site(node, path)}): the program depends on the sizes "
                                "and the rank together")
        for pi, ri in sorted(m.items(), key=lambda kv: kv[1]):
            d_probe = set(_literal_differences(fp0[pi], fpc[pi]))
            d_real = set(_literal_differences(fr0[ri], frc[ri]))
            if d_probe != d_real:
                key = sorted(d_probe ^ d_real, key=str)[0]
                x, y = fr0[ri], frc[ri]
                raise GraphMismatch(
                    f"{where}: argument {key} of node {x.name} ({x.target}, "
                    f"{node_site(x, path)}) is {_arg(x, key)!r} on the zero coordinate and "
                    f"{_arg(y, key)!r} on this rank, where at the probe sizes it is "
                    f"{_arg(fp0[pi], key)!r} and {_arg(fpc[pi], key)!r}: the rank runs "
                    "another program at the real sizes")
        for pi in loose_p:
            if _literal_differences(fp0[pi], fpc[pi]):
                raise GraphMismatch(f"{where}: node {fp0[pi].name} ({fp0[pi].target}, "
                                    f"{node_site(fp0[pi], path)}) reads rank-dependent "
                                    "literals and has no counterpart at the real sizes")
        for ri in loose_r:
            if _literal_differences(fr0[ri], frc[ri]):
                raise GraphMismatch(f"{where}: node {fr0[ri].name} ({fr0[ri].target}, "
                                    f"{node_site(fr0[ri], path)}) differs from the zero "
                                    "coordinate's, and has no counterpart at the probe sizes")
        gc = dict(groups[k][1]) if k < len(groups) else {}
        for x in fr0:
            if x.op == "get_attr" and not same_constant(getattr(real0, x.target, None),
                                                        getattr(rgm, x.target, None),
                                                        dict(groups0 or {}), gc):
                raise GraphMismatch(f"{where}: " + constant_differs_text(
                    getattr(real0, x.target, None), x.target, "from the zero coordinate's"))
