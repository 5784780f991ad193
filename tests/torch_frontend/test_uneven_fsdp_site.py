"""An FSDP2 shard that the data-parallel axis does not divide is refused at the ``fully_shard``
call's line, naming the tensor-parallel shard that made the local size (new-user trial 53,
item B: it said ``train.py:1`` and left the user to find that ``tp`` 3 of 32 is uneven)."""

from __future__ import annotations

import re
import textwrap

import pytest

from spec_lang.errors import PlanError

TRAIN = textwrap.dedent('''
    import torch
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    MESH = {MESH}
    SIZES = {"batch": 6, "dim": 8, "hidden": 32}


    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.up = nn.Linear(d, h, bias=False)
            self.down = nn.Linear(h, d, bias=False)

        def forward(self, x):
            return x + self.down(torch.relu(self.up(x)))


    class Net(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.layers = nn.ModuleList([Block(d, h) for _ in range(2)])

        def forward(self, x):
            for b in self.layers:
                x = b(x)
            return x


    def build_model(s):
        return Net(s["dim"], s["hidden"])


    def make_batch(s):
        return {"x": torch.zeros(s["batch"], s["dim"])}


    def build_optimizer(model):
        return torch.optim.SGD(model.parameters(), lr=0.1)


    def parallelize(model, mesh):
        for b in model.layers:
            parallelize_module(b, mesh["tp"], {"up": ColwiseParallel(),
                                               "down": RowwiseParallel()})
            fully_shard(b, mesh=mesh["dp"])  # THE CALL
        fully_shard(model, mesh=mesh["dp"])
        return model


    def train_step(model, optimizer, batch, mesh):
        loss = model(batch["x"]).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss
''')


@pytest.mark.slow
@pytest.mark.parametrize("mesh,local,dp,tp,how", [
    ('{"dp": 2, "tp": 3}', 11, 2, 3, r"unevenly \(32 is not a multiple of 3\)"),
    ('{"dp": 3, "tp": 2}', 16, 3, 2, "evenly"),
])
def test_the_fully_shard_line_and_the_earlier_shard_are_named(tmp_path, mesh, local, dp, tp,
                                                               how):
    """(~20 s each: one capture.)"""
    from spec_lang.torch_frontend import load

    src = TRAIN.replace("{MESH}", mesh)
    line = src.splitlines().index(
        next(x for x in src.splitlines() if x.endswith("# THE CALL"))) + 1
    p = tmp_path / "train.py"
    p.write_text(src)
    with pytest.raises(PlanError) as e:
        load(str(p), source=src.encode())
    msg = str(e.value)
    assert re.fullmatch(
        rf"{re.escape(str(p))}:{line}: fully_shard shards layers\.0\.up\.weight dim 0 \(local "
        rf"size {local}\) over 'dp' \(size {dp}\), which does not divide it; that local size "
        rf"comes from an earlier shard: 'tp' \(size {tp}\) split its 32 {how} \(FSDP2 pads; "
        rf"uneven shards are not modelled\)", msg), msg
