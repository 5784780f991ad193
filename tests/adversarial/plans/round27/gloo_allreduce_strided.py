"""Round 27 (R27-1): gloo's all_reduce of a tensor with a row gap (empty_strided((3, 2), (4, 1)))
reduces numel contiguous storage elements: the last row is garbage."""
import os, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(r):
    os.environ["MASTER_ADDR"]="127.0.0.1"; os.environ["MASTER_PORT"]="29619"
    dist.init_process_group("gloo", rank=r, world_size=2)
    g = torch.arange(6.).reshape(3,2) + 10 * r
    buf = torch.empty_strided(g.shape, (4, 1)); buf.copy_(g)
    dist.all_reduce(buf); print(r, buf.tolist(), "want", (torch.arange(6.).reshape(3,2)*2+10).tolist(), flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
