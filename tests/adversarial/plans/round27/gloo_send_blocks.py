"""Round 27 (R27-3): gloo's dist.send blocks until the peer posts the receive (3.0 s here), where
pp_merge queues a send."""
import os, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(r):
    os.environ["MASTER_ADDR"]="127.0.0.1"; os.environ["MASTER_PORT"]="29613"
    dist.init_process_group("gloo", rank=r, world_size=2)
    dist.barrier()
    t = torch.ones(64)
    if r == 0:
        s = time.time(); dist.send(t, 1); print("send took", round(time.time()-s, 2), flush=True)
    else:
        time.sleep(3); dist.recv(t, 0); print("recv done", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(run, nprocs=2)
