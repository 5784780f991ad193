"""Round 28: what gloo's ProcessGroup.allreduce does with two tensors in one call."""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29641"
    dist.init_process_group("gloo", rank=rank, world_size=2)
    a = torch.full((3,), 1.0 + rank)          # rank 0: 1, rank 1: 2
    b = torch.full((3,), 10.0 * (1 + rank))   # rank 0: 10, rank 1: 20
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    opts.asyncOp = False
    dist.group.WORLD.allreduce([a, b], opts).wait()
    print(rank, "a", a.tolist(), "b", b.tolist(), "(separate sums: a 3, b 30)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
