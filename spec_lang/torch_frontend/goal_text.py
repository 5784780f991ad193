"""How a goal is described: the user's parallelisation of its tensor, the line that produced
it, the data sharding assumed (split out of :mod:`frontend`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec_lang.torch_frontend.analysis import node_site

__all__ = ["_style_of", "_producing_site", "_data_assumptions", "_placement_text"]

_DTENSOR_NAMES = (("SS(", "_StridedShard("), ("S(", "Shard("), ("P(", "Partial("))


def _placement_text(axes: list[str], placements: tuple[str, ...]) -> str:
    """``"dp: Shard(0), tp: Replicate()"``: the goal's placement per mesh axis in DTensor's
    names (``placement_str``'s compact ``S(0)`` / ``R`` / ``P(sum)`` / ``SS(0,2)`` spelled
    out, as the DSL prints them); a plain tensor when there is no mesh axis."""
    def shown(p: str) -> str:
        if p == "R":
            return "Replicate()"
        for short, long in _DTENSOR_NAMES:
            if p.startswith(short):
                return long + p[len(short):]
        return p
    return ", ".join(f"{a}: {shown(p)}" for a, p in zip(axes, placements)) \
        or "a plain tensor (the same program on every rank)"


def _style_of(styles: Mapping[str, tuple[str, str]], param: str | None) -> str:
    """How the user parallelised ``param``'s module (its style and the data-parallel wrapper
    around it), with the user's lines."""
    if not param:
        return ""
    parts = param.split(".")
    got = []
    for k in range(len(parts) - 1, -1, -1):
        mod = ".".join(parts[:k])
        if mod in styles:
            st, site = styles[mod]
            kind = "dp" if st.startswith(("fully_shard", "replicate")) else "tp"
            if not any(g[0] == kind for g in got):
                got.append((kind, f"{st} at {site}" + (f" on {mod}" if mod else " on the model")))
    return "; ".join(g[1] for g in got)


def _producing_site(n: Any, path: str) -> str:
    """The user's line of the op that computed an output (through clones, views, waits)."""
    from spec_lang.torch_frontend.analysis import is_data_movement
    seen = 0
    while n is not None and seen < 64:
        name = str(n.target) if n.op == "call_function" else ""
        if n.op == "call_function" and (is_data_movement(n) or name in (
                "aten.clone.default", "_c10d_functional.wait_tensor.default")
                or n.target is __import__("operator").getitem):
            nxt = n.args[0] if n.args else None
            while isinstance(nxt, (list, tuple)) and nxt:
                nxt = nxt[0]
            n = nxt if hasattr(nxt, "op") else None
            seen += 1
            continue
        break
    return node_site(n, path) if n is not None else path


def _data_assumptions(cap: Any) -> list[str]:
    plan = cap.plans[0]
    out = []
    for r in plan.inputs:
        if r.kind == "data":
            sh = [f"dim {pl[2:-1]} over {ax!r}" for ax, pl in zip(plan.mesh, r.placements)
                  if pl.startswith("S(")]
            line = (f"data {r.name!r}: " + (", ".join(sh) if sh else "replicated on every rank")
                       + (" (DATA_SHARDING)" if cap.tf.data_sharding is not None else
                          " (default: the batch dim over the dp axes)"))
            if line not in out:      # (a pipelined step: one copy of the batch per stage)
                out.append(line)
    return out


def _missing_text(tf: Any, missing: list[str]) -> str:
    """The error for goals of the single-device step the parallel step does not produce,
    placed at ``parallelize``'s line (its plan): a gradient left None names its parameters and
    the usual causes (stop 54's new user: a detached activation read "does not produce" at
    line 1)."""
    from spec_lang.torch_frontend.contract import _def_line

    src = tf.source.decode("utf-8", errors="replace")
    where = f"{tf.path}:{_def_line(tf.module, 'parallelize', src)}"
    grads = [n.split(":", 1)[1] for n in missing if n.startswith("grad:")]
    if grads:
        return (f"{where}: the parallel step leaves no gradient on {grads[:4]} (.grad is None "
                "after its backward) where the single-device step computes one: its forward "
                "cuts them off the loss (a .detach(), torch.no_grad(), a hook or a parallel "
                "style returning a tensor without grad); the plan is wrong for them")
    return f"{where}: the parallel step does not produce {missing[:4]}"
