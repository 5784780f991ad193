"""Lineage of each placement (structure and values) and the placement checks."""

from __future__ import annotations

import numpy as np
import pytest

from sl_helpers import values
from spec_lang.dims import Dim
from spec_lang.errors import PlanError
from spec_lang.mesh import Mesh
from spec_lang.placement import (
    Partial, Replicate, Shard, describe_placements, expected_through, lineage, placement_errors,
)
from spec_lang.spec import input_term
from spec_lang.term import DimSpec, Op

H, F = Dim("H", 4), Dim("F", 8)
MESH = {"dp": 2, "tp": 2}
SIZES = {"H": 4, "F": 8, **MESH}
W = input_term("w", "param", "real", (H, F))
WV = np.arange(32.0).reshape(4, 8)


def test_replicate_is_the_spec_tensor() -> None:
    assert lineage(W, {"tp": Replicate()}, MESH) is W
    assert lineage(W, {}, MESH) is W


def test_shard_is_the_ranks_block() -> None:
    t = lineage(W, {"tp": Shard(F)}, MESH)
    assert t.op is Op.SHARD and t.attrs == ("F", "tp") and t.args[0] is W
    assert t.dims == (DimSpec("H"), DimSpec("F", ("tp",)))
    v = values([t], SIZES, {"w": WV})[t]
    assert v.axes[0] == "@tp"
    np.testing.assert_array_equal(v.transpose_to(("@tp", "H", "F"))[1], WV[:, 4:])


def test_two_axes_on_one_dim_nest_in_mesh_order() -> None:
    t = lineage(W, {"tp": Shard(F), "dp": Shard("F")}, MESH)  # dict order is irrelevant
    assert t.op is Op.SHARD and t.attrs == ("F", "tp")
    assert t.args[0].op is Op.SHARD and t.args[0].attrs == ("F", "dp")
    assert t.dim("F") == DimSpec("F", ("dp", "tp"))
    v = values([t], SIZES, {"w": WV})[t].transpose_to(("@dp", "@tp", "H", "F"))
    # dp splits F into halves, tp splits each half: rank (dp=1, tp=0) holds columns 4..5
    np.testing.assert_array_equal(v[1, 0], WV[:, 4:6])


def test_partial_sum_addends_sum_to_the_value() -> None:
    t = lineage(W, {"dp": Partial("sum")}, MESH)
    assert t.op is Op.PART and t.attrs == ("dp",)
    v = values([t], SIZES, {"w": WV})[t].transpose_to(("@dp", "H", "F"))
    assert not np.allclose(v[0], v[1])
    np.testing.assert_allclose(v.sum(0), WV, rtol=1e-12)


def test_partial_avg_addends_average_to_the_value() -> None:
    t = lineage(W, {"tp": Partial("avg")}, MESH)
    assert t.op is Op.MUL and t.args[0].op is Op.AXIS_SIZE and t.args[1].op is Op.PART
    v = values([t], SIZES, {"w": WV})[t].transpose_to(("@tp", "H", "F"))
    np.testing.assert_allclose(v.mean(0), WV, rtol=1e-12)


def test_expected_value_of_an_output_goes_through_its_placement() -> None:
    assert expected_through(W, {"tp": Shard(F)}, MESH) is lineage(W, {"tp": Shard(F)}, MESH)
    with pytest.raises(PlanError, match="Partial on axis 'dp' cannot be checked"):
        expected_through(W, {"dp": Partial()}, MESH)


def test_placement_errors_name_tensor_dims_axis_and_fix() -> None:
    errs = placement_errors("w1", {"H": 4, "F": 6}, {"tp": Shard("F"), "dp": Shard("F")},
                            {"dp": 2, "tp": 2}, "plan.py:7")
    assert errs == ["plan.py:7: w1 (H=4, F=6) puts dim F (size 6, 3 per rank before 'tp') on "
                    "axis 'tp' (size 2); 2 does not divide 3. Pad F or shrink 'tp'."]
    errs = placement_errors("w1", {"H": 4}, {"cp": Shard("H"), "tp": Shard("F")},
                            {"tp": 2}, "plan.py:7")
    assert len(errs) == 2
    assert "axis 'cp', which is not in the mesh" in errs[0]
    assert "is Shard(F) on axis 'tp' but has no dim F" in errs[1]


def test_placement_constructors_reject_bad_input() -> None:
    with pytest.raises(PlanError, match="name the dim"):
        Shard(1)
    with pytest.raises(PlanError, match='Partial\\("sum"\\) or Partial\\("avg"\\)'):
        Partial("max")
    assert str(Shard(F)) == "Shard(F)" and Shard(F) == Shard("F")


def test_mesh_validates_axes_and_keeps_order() -> None:
    m = Mesh(tp=4, dp=2)
    assert m.axes == ("tp", "dp") and m.world_size == 8 and "tp" in m
    assert describe_placements({"dp": Shard(F)}, m) == "tp: Replicate(), dp: Shard(F)"
    for bad in [{"xp": 2}, {"mb": 2}, {"tp": 0}, {}]:
        with pytest.raises(PlanError, match=r"test_placement\.py:\d+: Mesh"):
            Mesh(**bad)
