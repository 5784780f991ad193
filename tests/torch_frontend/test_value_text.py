"""``value_text.digest_texts``: the digest of a module's global texts (stop 58's faster form of
``sha1(repr(texts))``): one-to-one on what it is given, blind to how equal strings are held
(interned or not, shared or not), and it refuses any object marshal does not write itself (a
subclass of str, tuple or dict, any other object), so no value's own code can run in it."""

from __future__ import annotations

import sys

import pytest

from spec_lang.torch_frontend.value_text import digest_texts


def test_equal_texts_give_equal_digests_however_held():
    a = "fn:torch.nn.functional.linear"
    b = "".join(["fn:torch.nn.", "functional.linear"])      # equal, not the same object
    assert a == b and a is not b
    shared = [(a, a), (a, a)]
    fresh = [(b, "".join([a])), ("".join(["fn:", a[3:]]), b)]
    assert digest_texts(shared) == digest_texts(fresh)
    assert digest_texts([(sys.intern("k"), "v")]) == digest_texts([("".join(["k"]), "v")])


@pytest.mark.parametrize("left, right", [
    ([("a", "b")], [("a", "c")]),                  # one text differs
    ([("ab", "c")], [("a", "bc")]),                # the same characters split elsewhere
    ([("a", "b"), ("c", "d")], [("c", "d"), ("a", "b")]),   # order
    ([("a", ("b", "c"))], [("a", ("b", ("c",)))]),  # nesting
    ([("a", None)], [("a", "None")]),              # None is not its name
    ([("a", ())], [("a", [])]),                    # a tuple is not a list
    ([], [("", "")]),
    ([("\udc80", "x")], [("\ufffd", "x")]),        # a lone surrogate is not its replacement
])
def test_different_texts_give_different_digests(left, right):
    assert digest_texts(left) != digest_texts(right)


@pytest.mark.parametrize("bad", [
    [(type("S", (str,), {})("k"), "v")],             # a str subclass: its code never runs
    [("k", object())],
    [("k", type("D", (dict,), {})(a="b"))],        # a dict subclass
    [("k", type("T", (tuple,), {})(("b",)))],
])
def test_anything_but_exact_texts_is_refused(bad):
    with pytest.raises(ValueError):
        digest_texts(bad)


def test_lru_cache_fields_read_from_memory_match_cache_info():
    """``special_values._lru_fields`` (stop 58, R58d-1/R58d-2): on this interpreter the layout
    is checked at import (``_LRU_READABLE``), and a wrapper's typed flag, maxsize and
    statistics read from its memory are what ``cache_info`` says, with no call."""
    import functools

    from spec_lang.torch_frontend import special_values as sv

    assert sv._LRU_READABLE is True
    w = functools.lru_cache(maxsize=5, typed=True)(lambda x: x)
    for x in (1, 1, 1.0, 2):
        w(x)
    f, info = sv._lru_fields(w), w.cache_info()
    assert (f["typed"], f["maxsize"], f["hits"], f["misses"]) == (1, 5, 1, 3) \
        == (1, info.maxsize, info.hits, info.misses)
    assert f["info"] == id(functools._CacheInfo)


class _Counter:
    def __init__(self) -> None:
        self.n = 0


def _f(*args: object) -> None:
    return None


def test_a_partial_reads_its_tuple_arguments_and_c_methods_objects() -> None:
    """R58h-3, R58h-4: a box inside a tuple argument, and the object of a C method the partial
    calls, are read with their attributes; nesting past the depth limit is TOO_DEEP."""
    import functools

    from spec_lang.torch_frontend.value_text import TOO_DEEP, object_text

    box = _Counter()
    for p in (functools.partial(_f, (box,)), functools.partial(box.__eq__),
              functools.partial(_f, k=(1, (box,)))):
        before = object_text(p)
        box.n += 1
        assert object_text(p) != before and TOO_DEEP not in before
    deep: object = box
    for _ in range(9):
        deep = (deep,)
    assert TOO_DEEP in object_text(functools.partial(_f, deep))
    assert TOO_DEEP not in object_text(functools.partial(_f, (((1,),),)))


def test_deep_text_reads_what_values_hold_but_not_the_steps_own_state() -> None:
    """R59b-1: a namedtuple's, a methodcaller's, a closure's and an attribute's contents are
    read; a module, optimizer or tensor a handler holds (a checkpoint-on-SIGTERM partial) is
    read by identity and own attributes only (the step trains them); a value holding more
    than the budget is TOO_DEEP."""
    import collections
    import functools
    import operator

    import torch

    from spec_lang.torch_frontend.value_text import TOO_DEEP, deep_text

    box = _Counter()
    pair = collections.namedtuple("Pair", "a b")
    inner = _Counter()
    box.inner = inner

    def closure() -> int:
        return box.n

    for v in (pair(box, 1), operator.methodcaller("m", box), closure, box):
        before = deep_text(v)
        inner.n += 1
        assert deep_text(v) != before and TOO_DEEP not in before
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handler = functools.partial(_f, model, opt)
    before = deep_text(handler)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    assert deep_text(handler) == before
    assert TOO_DEEP in deep_text([list(range(30_000))])
