"""Why a goal is open, in the user's terms, and what to do next (issue 12 item 2).

The prover records an internal reason on every open goal (``GoalResult.reason``: "normal forms
differ: EINSUM[...] vs POW[...]; z3 on ... not attempted: ..."). :func:`explain` maps it to one
of the reasons of ``docs/unknown.md`` -- a stable ``code`` (the page's anchor), a one-line
``text`` and a ``next`` step -- so that ``prove`` prints those and keeps the internal text for
``--verbose`` and ``--json``. Only the wording depends on this module; no verdict does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Explanation", "explain", "explain_unsupported", "DOC"]

DOC = "docs/unknown.md"


@dataclass(frozen=True)
class Explanation:
    """``code``: the anchor in ``docs/unknown.md``; ``text``: why, in one line; ``next``: what
    to do."""

    code: str
    text: str
    next: str

    @property
    def link(self) -> str:
        return f"{DOC}#{self.code}"


# (code, pattern on the internal reason, text, next step); the first match wins
_TABLE: tuple[tuple[str, str, str, str], ...] = (
    ("plan-refuted", r"^not attempted",
     "not attempted: another goal of the plan is already refuted",
     "fix the divergence printed above, then prove again"),
    ("same-goal", r"^same (goal|lemma) as (?P<src>[^,]+), which is open",
     "the same equation as goal {src}, which is open",
     "resolve {src} first: this goal follows it"),
    ("dropout", r"^rng:",
     "the plan's dropout draws are not a renaming of the spec's (a draw the spec does not make, "
     "or two positions sharing one)",
     "draw every dropout mask as the spec does (same name per layer and micro-batch; "
     "docs/dsl.md, 'Dropout')"),
    ("rank-literal", r"^ranks: (?P<what>argument .* no rule reads it per rank.*)",
     "a literal of your step differs on another rank and no rule reads it per rank, so the "
     "lowered program would be rank 0's: {what}",
     "compute the rank-dependent value from tensors (a shard, a collective), not from the rank "
     "number; docs/unknown.md#rank-literal"),
    ("size-literal", r"^sizes: (?P<what>.*)",
     "a literal or a dtype of your step differs at the real sizes from the sizes it was traced "
     "at, and no rule reads it at both, so the lowered program would be the trace's: {what}",
     "do not branch on tensor sizes for a dim or option (write the same dims at every size); "
     "docs/unknown.md#size-literal"),
    ("untraced-ranks", r"^ranks",
     "ranks off the mesh's axes are not traced (a mesh of more than 8 ranks with two or more "
     "axes of size > 1)",
     "prove the same code on a mesh of at most 8 ranks, or on one-axis meshes; docs/torch.md"),
    ("step-state", r"^(not lowered: )?(?P<what>.*(leaves the step as|step changes |"
     r"steps change |"
     r"to a value prove --torch cannot compare|its value leaving the step is not compared).*)",
     "the steps leave different state for the next one: {what}",
     "make both steps leave the same state (the optimizer's param_groups, the modules' "
     "attributes and train/eval mode, hooks, the train file's globals); docs/torch.md"),
    ("grads-read-apart", r"(^|: )gradients read apart: (?P<what>.*)",
     "the gradient goals are read at different points of the two steps (one before its clip, "
     "the other after it), so they are not compared: {what}",
     "clip with the same torch function on both sides (clip_grad_norm_ / "
     "clip_grads_with_norm_); the parameters and optimizer state are still compared; "
     "docs/unknown.md#grads-read-apart"),
    ("not-lowered", r"^not lowered|^no lowering rule|without a (lowering )?rule|not lowered:",
     "an operation of your step has no lowering rule, so the goals that depend on it are not "
     "compared",
     "use a supported op (docs/torch.md, 'Supported ops'), or ask for its rule"),
    ("timeout", r"^timeout",
     "the proof search ran out of time",
     "raise --timeout, or add --jobs N to prove goals in parallel"),
    ("denominator", r"denominator in the differing subterms is not shown nonzero",
     "the two sides agree only where a denominator is nonzero, and the prover cannot show it is",
     "make the denominator visibly positive (e.g. a count of tokens as sum(mask) with at least "
     "one token, or + eps), or state it as the spec does"),
    ("reduced-mesh", r"diverge|differ only on the reduced mesh|on the reduced mesh",
     "values differed on a reduced mesh but the difference could not be confirmed at the real "
     "sizes",
     "check the plan at small real sizes (a debug config) where the refuter can run whole"),
    ("rewrite-stuck", r"^normal forms differ",
     "the rewriter brings spec and plan to two different forms it cannot join, and the "
     "fallback solver could not decide them at the real sizes",
     "write the step as the spec does where they first differ (the same order of sums and "
     "products, the same reduction split); --verbose shows the two subterms"),
    ("region", r"REGION node was not lowered",
     "an internal region of the plan was not lowered (a bug in shardproof)",
     "report it with --verbose output"),
)

_FIRST_DIFF = re.compile(r"^normal forms differ: (?P<e>[A-Z_]+)\b.*? vs (?P<a>[A-Z_]+)")


def explain(reason: str) -> Explanation:
    """The user-facing explanation of an open goal's internal ``reason`` (never raises: an
    unknown reason is ``not-proved``, with the text kept for ``--verbose``)."""
    for code, pat, text, nxt in _TABLE:
        m = re.search(pat, reason)
        if m is None:
            continue
        groups = {k: v.strip() for k, v in m.groupdict().items() if v}
        if code == "rewrite-stuck":
            f = _FIRST_DIFF.search(reason)
            if f is not None:
                text += f" (first difference: {_op_words(f['e'])} in the spec, " \
                        f"{_op_words(f['a'])} in the plan)"
        return Explanation(code, text.format(**groups), nxt.format(**groups))
    return Explanation("not-proved", "no rule or solver proved the two sides equal",
                       "see docs/unknown.md#not-proved; --verbose shows the prover's reason")


_WORDS = {"EINSUM": "a sum of products", "POW": "a power", "MUL": "a product", "ADD": "a sum",
          "SHARD": "a shard", "ALL_REDUCE": "an all_reduce", "ALL_GATHER": "an all_gather",
          "REDUCE_SCATTER": "a reduce_scatter", "EXP": "an exp", "REDUCE_MAX": "a max",
          "CONCAT": "a concatenation", "CHUNK": "a slice", "RENAME": "a reshape",
          "PERMUTE": "a permutation", "INPUT": "an input", "CONST": "a constant"}


def _op_words(op: str) -> str:
    return _WORDS.get(op, op.lower())


def explain_unsupported(name: str, why: str) -> Explanation:
    """An output the front end could not lower (``Problem.unsupported``: ``(name, why)``)."""
    if name == "ranks":     # the text is the table's; the MESH line is the user's
        ex = explain(f"ranks: {why}")
        m = re.search(r"\(MESH at ([^()]+)\)", why)
        return Explanation(ex.code, ex.text + (f" (MESH at {m[1]})" if m else ""), ex.next)
    if name == "state":
        return explain(why)
    if name == "sizes":     # a literal read at the probe sizes only (real_literals, R33-2)
        return explain(f"sizes: {why}")
    if why.startswith("gradients read apart: "):   # grad_snapshot.drop_grads_read_apart
        return explain(why)
    ex = explain(f"not lowered: {why}")
    return Explanation("not-lowered", f"{ex.text} ({why})" if ex.code == "not-lowered"
                       else ex.text, ex.next)
