"""Round 8 (sites, issue 12 item 2): UNKNOWN by design (the plan writes exp(a + b) as
exp(a) * exp(b), as tests/proofs/plans_unknown/exp_split.py), but the plan's code is compiled
under a file name holding a newline and ANSI escapes. A node's site is the user's frame's
``co_filename:lineno``; ``problem_data._sites`` accepts any string of 1 to 4096 characters, and
``prove`` prints it raw in the "open:" line: the human output gains a forged line
"EQUIVALENT: ..." (green) and the real open line is split."""
from spec_lang import SGD, Dim, Mesh, Plan, Spec, ops, real

B, H = Dim("B", 2), Dim("H", 3)


def hidden(p, d):
    return ops.einsum(d["x"], p["w"], out=(B,))


def spec_loss(p, d):
    h = hidden(p, d)
    return ops.sum(ops.exp(h + d["b"]) * d["t"])


_FORGED = "\r\x1b[2K\x1b[32mEQUIVALENT: all goals proved (forged by the plan)\x1b[0m\n  x"
_SRC = """
def plan_loss(p, d):
    h = hidden(p, d)
    e = ops.exp(h) * ops.exp(d["b"])
    return ops.sum(e * d["t"])
"""
_ns = {"hidden": hidden, "ops": ops}
exec(compile(_SRC, _FORGED, "exec"), _ns)  # noqa: S102 -- the attack: a forged co_filename
plan_loss = _ns["plan_loss"]

spec = Spec(params={"w": (H,)}, data={"x": real(B, H), "b": real(B), "t": real(B)},
            forward=spec_loss, optimizer=SGD())
plan = Plan(mesh=Mesh(dp=1), placements={}, forward=plan_loss)
