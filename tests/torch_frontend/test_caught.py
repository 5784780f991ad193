"""``caught``: an exception the train file's own code catches while the capture runs it is
refused (round 38; R35d-2's family: R38a-1, R38a-2), and the instrumented train file computes
what the file computes (every except clause and with body, in seconds; the slow proves of the
plan files are in ``tests/adversarial/test_round38a.py``)."""

from __future__ import annotations

import contextlib
import textwrap

import pytest

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import caught

SRC = textwrap.dedent('''
    import contextlib

    def f(x):
        out = []
        try:
            out.append(1 / x)
        except ZeroDivisionError as e:
            out.append(type(e).__name__)
        else:
            out.append("else")
        finally:
            out.append("finally")
        with contextlib.suppress(ZeroDivisionError):
            out.append(2 / x)
        with contextlib.nullcontext(x) as y:
            if y == 3:
                return out + ["early"]
        for i in range(3):
            with contextlib.nullcontext():
                if i == 1:
                    continue
                out.append(i)
        try:
            try:
                raise ValueError("inner")
            except KeyError:
                out.append("never")
        except ValueError as e:
            out.append(str(e))
        def gen():
            with contextlib.nullcontext():
                yield 1
                yield 2
        g = gen()
        out.append(next(g))
        g.close()
        try:
            raise ExceptionGroup("g", [TypeError("t"), KeyError("k")])
        except* TypeError:
            out.append("star-type")
        except* KeyError:
            out.append("star-key")
        d = {}
        try:
            d["missing"]
        except KeyError:
            out.append("key")
        return out
''')


def _run(instrumented: bool, x: int) -> list:
    ns: dict = {}
    if instrumented:
        code = caught.compile_train_file(SRC.encode(), "train.py")
    else:
        code = compile(SRC, "train.py", "exec")
    exec(code, ns)   # noqa: S102 -- the test's own source
    return ns["f"](x)


@pytest.fixture(autouse=True)
def _empty():
    caught._FOUND.clear()
    caught._MET.clear()
    yield
    caught._FOUND.clear()
    caught._MET.clear()


@pytest.mark.parametrize("x", [0, 1, 3])
def test_the_instrumented_file_computes_what_the_file_computes(x):
    assert _run(True, x) == _run(False, x)


def test_caught_exceptions_are_recorded_with_their_lines_and_allowed_ones_are_not():
    _run(True, 0)
    lines = {ln for ln, _ in caught.found()}
    what = [w for _, w in caught.found()]
    # 1/0 met in the body of a try with a finally (6) and caught at the except line (8); 2/0
    # met by the suppress with (14); the inner
    # ValueError at the outer except (29; the inner except KeyError does not match); the
    # group's TypeError at except* TypeError (40); the KeyError group (42), the KeyError (47)
    # and the generator's GeneratorExit (its with, 33) are allowed
    assert what[0].startswith("ZeroDivisionError (division by zero)")
    assert lines == {6, 8, 14, 29, 40}, caught.found()
    with pytest.raises(PlanError, match=r"^train.py:8: the train file catches ZeroDivisionError "
                       r"\(division by zero\) at line 8 while the capture runs it: .* \(during "
                       r"the capture\)$"):
        caught.check("train.py", "during the capture")


def test_a_file_that_catches_nothing_passes():
    _run(True, 1)
    assert {ln for ln, _ in caught.found()} == {29, 40}     # the raises of the file itself
    caught._FOUND.clear()
    caught._MET.clear()
    caught.check("train.py", "when imported")


def test_the_recorder_is_no_name_the_file_can_shadow_or_rebind():
    """R38c-3: a parameter named like a recorder, or a global swapped around the try, changes
    nothing: the recorder is a constant of the compiled code."""
    src = textwrap.dedent('''
        def shadowed(x, __shardproof_caught__=lambda line: None):
            try:
                return 1 / x
            except ZeroDivisionError:
                return "fallback"

        BaseException = KeyError      # the guards' except type is a constant, not this name

        def swapped(x):
            g = globals()
            for k in list(g):
                if "shardproof" in k:
                    g[k] = lambda *a: None
            try:
                return 1 / x
            except ZeroDivisionError:
                return "fallback"
    ''')
    ns: dict = {}
    exec(caught.compile_train_file(src.encode(), "train.py"), ns)   # noqa: S102
    assert ns["shadowed"](0) == "fallback" and ns["swapped"](0) == "fallback"
    assert [ln for ln, _ in caught.found()] == [5, 17], caught.found()
    assert not [k for k in ns if "shardproof" in k]


def test_a_missing_attribute_is_recorded_unless_getattr_takes_a_default():
    """R38c-5 / r38d_09: an AttributeError caught by the train file is recorded, even
    ``nn.Module.__getattr__``'s (a name built from ``type(g)`` misses in the capture only);
    ``getattr(m, "module", m)`` swallows it in C, past no frame of the file: not recorded (the
    refusal's message says to write it so)."""
    src = textwrap.dedent('''
        def unwrap(m):
            try:
                return m.module
            except AttributeError:
                return m

        def unwrap_default(m):
            return getattr(m, "module", m)
    ''')
    ns: dict = {}
    exec(caught.compile_train_file(src.encode(), "train.py"), ns)   # noqa: S102
    import torch
    m = torch.nn.Linear(2, 2)
    assert ns["unwrap_default"](m) is m and caught.found() == []
    assert ns["unwrap"](m) is m and [ln for ln, _ in caught.found()] == [5]
    with pytest.raises(PlanError, match=r"getattr\(obj, name, default\)"):
        caught.check("train.py", "during the capture")


SWALLOWED = textwrap.dedent('''
    import contextlib

    def finally_return(x):
        try:
            return 1 / x
        finally:
            return "swallowed"

    def loop_break(x):
        for _ in range(2):
            try:
                1 / x
            finally:
                break
        return "broken"

    @SWALLOW()
    def decorated(x):
        return 1 / x

    class P:
        @property
        def value(self):
            return 1 / self.x

    def has(x):
        p = P()
        p.x = x
        return hasattr(p, "value")

    def documented():
        """doc"""
        return documented.__doc__

    def gen():
        yield 1
        yield 2
''')


class SWALLOW(contextlib.ContextDecorator):
    """A decorator of another module's that swallows what the function raises."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


@pytest.mark.parametrize("name,arg,line", [
    ("finally_return", 0, 5), ("loop_break", 0, 12), ("decorated", 0, 19)])
def test_exceptions_swallowed_without_an_except_clause_are_recorded(name, arg, line):
    """A ``finally`` that returns or breaks, ``contextlib.suppress`` as a decorator: no except
    clause of the file's catches, yet the error is gone; the wrapped bodies recorded it."""
    ns: dict = {"SWALLOW": SWALLOW}
    exec(caught.compile_train_file(SWALLOWED.encode(), "train.py"), ns)   # noqa: S102
    plain: dict = {"SWALLOW": SWALLOW}
    exec(compile(SWALLOWED, "train.py", "exec"), plain)   # noqa: S102
    assert ns[name](arg) == plain[name](arg)
    assert [w for _, w in caught.found()][:1] == ["ZeroDivisionError (division by zero)"]
    assert line in {ln for ln, _ in caught.found()}, caught.found()
    with pytest.raises(PlanError, match=r"ZeroDivisionError \(division by zero\) was raised "
                       r"through line \d+ of the train file and did not end the capture"):
        caught.check("train.py", "during the capture")


def test_docstrings_generators_and_allowed_exits_are_kept():
    ns: dict = {"SWALLOW": SWALLOW}
    exec(caught.compile_train_file(SWALLOWED.encode(), "train.py"), ns)   # noqa: S102
    assert ns["documented"]() == "doc"
    g = ns["gen"]()
    assert next(g) == 1
    g.close()                                   # GeneratorExit: allowed
    assert list(ns["gen"]()) == [1, 2]          # StopIteration: allowed
    assert caught.found() == []


def test_a_lambdas_error_swallowed_outside_the_file_is_recorded():
    """R38d-1: a lambda has no statements; its body is called through a guard. Values,
    closures, defaults and keyword arguments are as before."""
    src = textwrap.dedent('''
        def values(k):
            f = lambda a, b=2, *r, c=3, **kw: a + b + c + k + len(r) + len(kw)
            return f(1), f(1, 1, 9, c=0, z=1), sorted([3, 1, 2], key=lambda v: -v)

        def swallowed(x):
            return SWALLOW()(lambda: 1 / x)()
    ''')
    ns: dict = {"SWALLOW": SWALLOW}
    exec(caught.compile_train_file(src.encode(), "train.py"), ns)   # noqa: S102
    plain: dict = {"SWALLOW": SWALLOW}
    exec(compile(src, "train.py", "exec"), plain)   # noqa: S102
    assert ns["values"](10) == plain["values"](10) == (16, 14, [3, 2, 1])
    assert caught.found() == []
    assert ns["swallowed"](0) is None
    assert [w for _, w in caught.found()] == ["ZeroDivisionError (division by zero)"]


def test_lambdas_reading_their_frame_are_left_as_written():
    """R38e-2 / R38e-3: ``locals()`` and zero-argument ``super()`` in a lambda read its own
    frame; the guard's inner lambda would change them, so such a lambda is not rewritten.
    R38e-4: a nested generator lambda does not unguard the outer one."""
    src = textwrap.dedent('''
        class A:
            def f(self):
                return "A"

        class B(A):
            g = lambda self: super().f()

        def values():
            return (lambda a: sorted(locals()))(1), B().g()

        def swallowed(x):
            return SWALLOW()(lambda: ((lambda: (yield)), 1 / x))()
    ''')
    ns: dict = {"SWALLOW": SWALLOW}
    exec(caught.compile_train_file(src.encode(), "train.py"), ns)   # noqa: S102
    assert ns["values"]() == (["a"], "A")
    assert ns["swallowed"](0) is None
    assert [w for _, w in caught.found()] == ["ZeroDivisionError (division by zero)"]


def test_a_generator_expression_swallowed_outside_the_file_is_recorded():
    """R38e-1: a generator expression runs where it is consumed; its element and conditions
    are guarded. Values as before."""
    src = textwrap.dedent('''
        def values(xs):
            return list(x * 2 for x in xs if x > 1), sum(y for y in range(4))

        def swallowed(x):
            with SWALLOW():
                g = (1 / v for v in [x])
            return SWALLOW()(list)(g)
    ''')
    ns: dict = {"SWALLOW": SWALLOW}
    exec(caught.compile_train_file(src.encode(), "train.py"), ns)   # noqa: S102
    assert ns["values"]([1, 2, 3]) == ([4, 6], 6) and caught.found() == []
    assert ns["swallowed"](0) is None
    assert [w for _, w in caught.found()] == ["ZeroDivisionError (division by zero)"]


def test_torchs_checkpoint_stop_is_let_through():
    """R38e-6: non-reentrant activation checkpointing stops a recomputation with
    ``_StopRecomputationError`` through the file's forward, in both runs alike."""
    from torch.utils.checkpoint import _StopRecomputationError

    src = b"def f():\n    raise STOP()\n"
    ns: dict = {"STOP": _StopRecomputationError}
    exec(caught.compile_train_file(src, "train.py"), ns)   # noqa: S102
    with pytest.raises(_StopRecomputationError):
        ns["f"]()
    assert caught.found() == []


def test_line_numbers_of_the_file_are_kept():
    code = caught.compile_train_file(b"def f():\n    x = 1\n    raise RuntimeError(x)\n",
                                     "train.py")
    ns: dict = {}
    exec(code, ns)   # noqa: S102
    with pytest.raises(RuntimeError) as e:
        ns["f"]()
    assert e.traceback[-1].lineno + 1 == 3
