"""A torch goal's placement is printed in DTensor's names, as the DSL prints it."""

from spec_lang.torch_frontend.goal_text import _placement_text


def test_placements_are_spelled_as_dtensor_names():
    assert _placement_text(["dp", "tp"], ("S(0)", "R")) == "dp: Shard(0), tp: Replicate()"
    assert _placement_text(["dp"], ("P(sum)",)) == "dp: Partial(sum)"
    assert _placement_text(["dp", "tp"], ("SS(0,2)", "S(1)")) == \
        "dp: _StridedShard(0,2), tp: Shard(1)"
    assert _placement_text([], ()) == "a plain tensor (the same program on every rank)"
