"""Benchmark: the normaliser's completeness on equivalent spellings (issue 12, item 1).

    python bench/completeness.py [--n 200] [--seed 0] [--family contraction] [--misses 5]

Draws ``n`` pairs per family from :mod:`rewriting.spellings` (each pair: two spellings of one
value, plus the gradients of ``sum(value * w)`` with respect to every input) and prints, per
family, how many value and gradient pairs reach one normal form, how many more the prover's
exact ``cas`` step closes, and the misses (with the first differing subterms). "Proved by
rewriting alone" = normal + cas (no z3). Also checks that every pair agrees numerically in
float64 (a disagreement is a generator bug and is printed as such).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from rewriting import Normaliser  # noqa: E402
from rewriting.normalise import first_difference, normalise  # noqa: E402
from rewriting.spellings import FAMILIES, classify, draw_pair  # noqa: E402
from spec_lang.evaluate import evaluate, sample_inputs  # noqa: E402


class _Draw:
    def __init__(self, rng: random.Random):
        self.r = rng

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def choice(self, xs):
        return self.r.choice(list(xs))

    def bool(self) -> bool:
        return self.r.random() < 0.5


def numerically_equal(a, b, binding, seed: int = 0) -> bool:
    rng = np.random.default_rng(seed)
    vals = evaluate([a, b], binding, sample_inputs([a, b], binding, rng), rng=rng)
    x, y = vals[a], vals[b]
    axes = tuple(sorted(set(x.axes) | set(y.axes)))
    p, q = x.transpose_to(axes), y.transpose_to(axes)
    shape = np.broadcast_shapes(p.shape, q.shape)
    return bool(np.allclose(np.broadcast_to(p, shape), np.broadcast_to(q, shape),
                            rtol=1e-9, atol=1e-9))


def run(n: int, seed: int, families: list[str], show: int) -> dict[str, Counter]:
    draw = _Draw(random.Random(seed))
    out: dict[str, Counter] = {}
    for fam in families:
        c: Counter = Counter()
        shown = 0
        t0 = time.perf_counter()
        for _ in range(n):
            pair = draw_pair(draw, fam)
            norm = Normaliser(pair.binding)
            for kind, (a, b) in [("value", (pair.a, pair.b))] + [("grad", g) for g in pair.grads]:
                if not numerically_equal(a, b, pair.binding):
                    c["generator bug"] += 1
                    print(f"  GENERATOR BUG {fam}: {pair.what} ({kind})")
                    continue
                r = classify(a, b, pair.binding, normaliser=norm)
                c[f"{kind} {r}"] += 1
                c[f"{kind} tried"] += 1
                if r == "miss" and shown < show:
                    shown += 1
                    (x, y), _ = normalise([a, b], pair.binding, normaliser=norm)
                    p, q = first_difference(x, y)
                    print(f"  miss {fam} / {pair.what} ({kind}):\n    {p!r:.300}\n    {q!r:.300}")
                if r == "miss":
                    c[f"miss: {pair.what} ({kind})"] += 1
        c["seconds"] = round(time.perf_counter() - t0, 1)
        out[fam] = c
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="pairs per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    ap.add_argument("--misses", type=int, default=3, help="misses to print per family")
    a = ap.parse_args()
    res = run(a.n, a.seed, a.family or list(FAMILIES), a.misses)
    print(f"\n{'family':18} {'value: tried normal cas miss':30} {'grads: tried normal cas miss':30}"
          f" {'rate':>6} {'s':>6}")
    tot = Counter()
    for fam, c in res.items():
        tried = c["value tried"] + c["grad tried"]
        ok = tried - c["value miss"] - c["grad miss"]
        tot["tried"] += tried
        tot["ok"] += ok
        v = f"{c['value tried']:5} {c['value normal']:6} {c['value cas']:3} {c['value miss']:4}"
        g = f"{c['grad tried']:5} {c['grad normal']:6} {c['grad cas']:3} {c['grad miss']:4}"
        print(f"{fam:18} {v:30} {g:30} {100 * ok / max(tried, 1):5.1f}% {c['seconds']:6}")
        for k, m in sorted(c.items()):
            if k.startswith("miss: "):
                print(f"{'':20}{m:4} x {k[6:]}")
    print(f"{'all':18} {tot['ok']} of {tot['tried']} pairs proved by rewriting alone "
          f"({100 * tot['ok'] / max(tot['tried'], 1):.1f}%)")


if __name__ == "__main__":
    main()
