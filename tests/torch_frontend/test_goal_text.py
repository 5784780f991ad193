"""A torch goal's placement is printed in DTensor's names, as the DSL prints it."""

from spec_lang.torch_frontend.goal_text import _placement_text


def test_placements_are_spelled_as_dtensor_names():
    assert _placement_text(["dp", "tp"], ("S(0)", "R")) == "dp: Shard(0), tp: Replicate()"
    assert _placement_text(["dp"], ("P(sum)",)) == "dp: Partial(sum)"
    assert _placement_text(["dp", "tp"], ("SS(0,2)", "S(1)")) == \
        "dp: _StridedShard(0,2), tp: Shard(1)"
    assert _placement_text([], ()) == "a plain tensor (the same program on every rank)"


def test_a_gradient_the_parallel_step_leaves_none_names_its_parameters_at_parallelize():
    """Stop 54's new user: a detached activation read "does not produce ['grad:...']" at line
    1; the error names the parameters at ``parallelize``'s line, other goals as before."""
    import types

    from spec_lang.torch_frontend.goal_text import _missing_text

    src = b"import torch\n\n\ndef parallelize(model, mesh):\n    return model\n"
    tf = types.SimpleNamespace(path="t.py", source=src, module=None)
    text = _missing_text(tf, ["grad:w1.weight", "grad:w2.bias"])
    assert text.startswith("t.py:4: the parallel step leaves no gradient on "
                           "['w1.weight', 'w2.bias'] (.grad is None"), text
    assert _missing_text(tf, ["state:x"]) == \
        "t.py:4: the parallel step does not produce ['state:x']"
