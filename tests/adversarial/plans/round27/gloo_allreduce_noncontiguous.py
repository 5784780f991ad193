"""Round 27 (R27-1): gloo's all_reduce of a non-contiguous tensor reduces raw storage: a row-major
(2, 3) tensor on rank 0 and a column-major one on rank 1 give a transposed sum; a column slice
gives garbage. Run: python gloo_allreduce_noncontiguous.py (2 processes, gloo, localhost)."""
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(r):
    os.environ["MASTER_ADDR"]="127.0.0.1"; os.environ["MASTER_PORT"]="29611"
    dist.init_process_group("gloo", rank=r, world_size=2)
    a = torch.arange(6.).reshape(2,3)
    if r == 0:
        t = a.clone()
    else:
        t = torch.empty(3,2).t(); t.copy_(a)
    print(r, "contig", t.is_contiguous(), flush=True)
    try:
        dist.all_reduce(t)
        print(r, t.tolist(), flush=True)
    except Exception as e:
        print(r, "ERR", e, flush=True)
    try:
        s = a.clone()[:, 1:]  # non-contiguous slice
        dist.all_reduce(s); print(r, "slice", s.tolist(), flush=True)
    except Exception as e:
        print(r, "ERR2", e, flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
