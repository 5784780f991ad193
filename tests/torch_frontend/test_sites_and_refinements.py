"""Two front-end details behind the message of pytorch #179502's faulty view
(``tests/torch_frontend/test_dtensor_bugs.py``):

* ``node_site`` names the user's frame of a node's stack trace. A user directory merely *named*
  ``torch`` or ``torch_frontend`` (``examples/torch/``, ``tests/torch_frontend/``) is the user's;
  only torch's package and this front end's are not.
* A local view that splits a spec dim into a unit dim and the rest is a ``DimsError`` at its
  line (the node is unsupported), not a ``Refine``: re-analysing with the spec dim split into
  ``(1, n)`` meets the same split one level deeper, six times, then stopped at line 1.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.fx as fx

import spec_lang.torch_frontend.analysis as analysis
from spec_lang.torch_frontend.analysis import node_site
from spec_lang.torch_frontend.dims import Dims, DimsError, Refine

TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__))
FRONT_DIR = os.path.dirname(os.path.realpath(analysis.__file__))


def _node(frames: list[tuple[str, int]]) -> fx.Node:
    g = fx.Graph()
    n = g.placeholder("x")
    n.meta["stack_trace"] = "".join(
        f'  File "{f}", line {ln}, in fn\n    code()\n' for f, ln in frames)
    return n


def test_a_users_directory_named_torch_is_the_users(tmp_path):
    model = str(tmp_path / "torch" / "llama_model.py")
    frames = [(str(tmp_path / "torch" / "train.py"), 40), (model, 12),
              (os.path.join(TORCH_DIR, "nn", "functional.py"), 6000),
              (os.path.join(FRONT_DIR, "capture.py"), 10)]
    assert node_site(_node(frames)) == f"{model}:12"
    # the train file's own frame wins when it is given
    assert node_site(_node(frames), str(tmp_path / "torch" / "train.py")) == \
        f"{tmp_path / 'torch' / 'train.py'}:40"


def test_a_directory_named_torch_frontend_is_the_users(tmp_path):
    f = str(tmp_path / "tests" / "torch_frontend" / "packed_tokens.py")
    frames = [(f, 65), (os.path.join(TORCH_DIR, "_decomp", "decompositions.py"), 100)]
    assert node_site(_node(frames), str(tmp_path / "other.py")) == f"{f}:65"


def test_torchs_and_the_front_ends_frames_are_not_the_users():
    frames = [(os.path.join(TORCH_DIR, "nn", "functional.py"), 6000),
              (os.path.join(FRONT_DIR, "capture.py"), 10)]
    n = _node(frames)
    assert node_site(n) == f"<graph node {n.name}>"


def _sharded_leaf(d: Dims, size: int):
    return d.fresh(size, "t.py:3", info=("x#0", ("tp",)))


def test_a_split_into_a_unit_dim_is_an_error_at_its_line():
    d = Dims(axis_sizes={"tp": 1})
    a = _sharded_leaf(d, 10)
    with pytest.raises(DimsError, match=r"^t\.py:7: a local view splits the spec's dim x#0 "
                                        r"into sizes \[1, 10\]"):
        d.split(a, (1, 10), "t.py:7")


def test_a_split_into_real_blocks_still_refines_the_spec():
    d = Dims(axis_sizes={"tp": 2})
    a = _sharded_leaf(d, 10)
    with pytest.raises(Refine) as e:
        d.split(a, (2, 5), "t.py:7")
    assert (e.value.key, e.value.sizes) == ("x#0", (4, 5))     # the shard's 2 times tp 2
    assert e.value.where == "t.py:7"        # the line a message names if it never converges


def test_a_unit_part_of_a_sharded_dim_is_a_real_block():
    # the shard factor makes the first part whole: (1 * tp, 10) names the rank's block
    d = Dims(axis_sizes={"tp": 2})
    a = _sharded_leaf(d, 10)
    with pytest.raises(Refine) as e:
        d.split(a, (1, 10), "t.py:7")
    assert (e.value.key, e.value.sizes) == ("x#0", (2, 10))
