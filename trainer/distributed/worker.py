"""A stage process of the real pipeline: `StageWorker` serves the driver's commands.

Stage processes are forked by the zygote (trainer.distributed.zygote), one per stage plus warm
spares; the driver (trainer.distributed.driver) sends commands over the control channel
(trainer.distributed.control); activations, gradients and state move over
gloo (trainer.distributed.wire). Commands and replies (JSON):

| cmd | does | reply |
|---|---|---|
| `assign` stage, config, initial, cache_dir | builds the stage (seeded init, or empty for a replacement) | `seconds` |
| `join` generation, world, store | joins that generation's gloo group (ranks = stages) | `seconds` |
| `train` program, routes, lr, sampler_state, redundant | runs the iteration's operations | `status` done / aborted, `loss_sum`, `sampler_state`, `ops` [kind, micro-batch, position, compute s, wait s, CPU s, compute CPU s, compute start, message delay s] |
| `commit` / `abort` | after `train`: clip + Adam step / drop the gradients | `grad_norm`, `seconds` |
| `evaluate` program, routes, n_batches | forward-only pipeline over the validation batches | `loss_sum`, `tokens` (stage 0) |
| `plan` steps, tag_base | its part of a recovery plan (trainer.strategies.plan) | `received` transfers, `seconds` |
| `ping` peer, sizes, repeats, initiator | round trips with one peer (link calibration) | `rtt_s` per size |
| `burn` seconds | computes flat out (host calibration) | `cpu_s`, `wall_s` |
| `save_state` path | writes its full packed state (tests) | `bytes` |
| `exit` | leaves | - |

Abort protocol (trainer.distributed.wire): when a receive fails because the peer died or sent an
ABORT frame, the stage stops its iteration and sends an ABORT frame for every message it still owed
in this iteration, so every process waiting on it unblocks in turn; it reports `aborted` and keeps
its weights and Adam state as they were before the iteration.

The process asks the kernel to kill it when its parent (the zygote) dies (`PR_SET_PDEATHSIG`) and
exits when the control channel closes, so no stage process outlives its driver.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["StageWorker"]

PR_SET_PDEATHSIG = 1
TRAIN_TAGS = 2  # tag = 2 * micro_batch + kind (kind 0: activation forward, 1: gradient backward)


def _die_with_parent(parent_pid: int) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # pragma: no cover - not Linux: the closed control channel still ends the worker
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


class StageWorker:
    """Serves the driver's commands for one stage (see the module docstring)."""

    def __init__(self, conn: Connection, store: Path):
        from trainer.distributed.control import recv_message, send_message

        self.conn, self.store = conn, store
        self._send, self._recv = send_message, recv_message
        self.runtime = None
        self.wire = None
        self.world = 0
        self._old_wires: list[Any] = []  # abandoned generations, kept alive (wire.Wire.forget_sends)
        self._base_lr = 0.0

    # ------------------------------------------------------------------ loop
    def serve(self) -> None:
        from trainer.distributed.control import WorkerLost

        while True:
            try:
                msg = self._recv(self.conn)
            except WorkerLost:
                return  # the driver is gone
            cmd = msg.get("cmd")
            if cmd == "exit":
                return
            handler = getattr(self, f"cmd_{cmd}", None)
            if handler is None:
                reply = {"error": f"unknown command {cmd!r}"}
            else:
                try:
                    reply = handler(msg)
                except Exception as exc:  # reported to the driver, which raises it there
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                self._send(self.conn, {**reply, "seq": msg.get("seq")})
            except WorkerLost:
                return

    # ------------------------------------------------------------------ set-up
    def cmd_assign(self, msg: dict) -> dict:
        from trainer.api import TrainerConfig
        from trainer.distributed.stage_runtime import StageRuntime

        t0 = time.perf_counter()
        config = TrainerConfig(**msg["config"])
        self.runtime = StageRuntime(config, int(msg["stage"]), initial=bool(msg["initial"]),
                                    cache_dir=Path(msg["cache_dir"]))
        return {"seconds": time.perf_counter() - t0}

    def cmd_join(self, msg: dict) -> dict:
        from trainer.distributed.wire import Wire, connect_group

        t0 = time.perf_counter()
        if self.wire is not None:
            self.wire.forget_sends()
            self._old_wires.append(self.wire)
        group = connect_group(self.store, int(msg["generation"]), self.runtime.stage, int(msg["world"]),
                              float(msg["timeout_s"]))
        self.wire, self.world = Wire(group, self.runtime.stage), int(msg["world"])
        return {"seconds": time.perf_counter() - t0}

    # ------------------------------------------------------------------ training
    def _act_numel(self) -> int:
        c = self.runtime.config
        return c.micro_batch_size * c.context * c.d_model

    def cmd_train(self, msg: dict) -> dict:
        """Run this stage's operations of one iteration (module docstring, abort protocol)."""
        from trainer.distributed.pipeline_schedule import BACKWARD, FORWARD, Op
        from trainer.distributed.wire import PeerAborted, PeerLost

        t_start = time.perf_counter()
        rt, wire = self.runtime, self.wire
        cfg = rt.config
        program = [Op(*op) for op in msg["program"]]
        the_routes = [tuple(r) for r in msg["routes"]]
        last = len(the_routes[0]) - 1
        scale = 1.0 / (len(the_routes) * cfg.micro_batch_size * cfg.context)  # tokens of the iteration
        numel, shape = self._act_numel(), (cfg.micro_batch_size, cfg.context, cfg.d_model)
        self._base_lr = float(msg["lr"])
        redundant = bool(msg.get("redundant"))
        successor = (rt.stage + 1) % self.world
        rt.zero_grad()
        batches, sampler_state = (rt.draw_batches(msg["sampler_state"], len(the_routes)) if rt.stage == 0
                                  else (None, None))
        saved: dict[tuple[int, int], tuple[Any, Any]] = {}
        # [kind, micro_batch, position, compute_s, wait_s, cpu_s (whole op), compute_cpu_s, compute start
        # on the system-wide monotonic clock (time.perf_counter is CLOCK_MONOTONIC on Linux), message delay
        # to this waiting process (wire.Wire.recv; -1: the message was there before the receive)]
        ops: list[list[float]] = []
        prep_s = time.perf_counter() - t_start
        loss_sum, index = 0.0, 0
        try:
            for index, op in enumerate(program):
                mb, p = op.micro_batch, op.position
                wait, cpu0, delay = 0.0, time.thread_time(), None
                if op.kind == FORWARD:
                    if p == 0:
                        h = None
                    else:
                        t0 = time.perf_counter()
                        h = wire.recv(numel, the_routes[mb][p - 1], TRAIN_TAGS * mb).view(shape).requires_grad_()
                        wait, delay = time.perf_counter() - t0, wire.last_delay_s
                    t0, c0 = time.perf_counter(), time.thread_time()
                    if p == 0:
                        out = rt.module.embed(batches[mb][0])
                    elif p == last:
                        out = rt.loss_sum(h, batches[mb][1])
                        loss_sum += float(out.detach())
                    else:
                        out = rt.forward(h)
                    if redundant and p != last:
                        rt.replica_forward(successor, out.detach())
                    compute, compute_cpu = time.perf_counter() - t0, time.thread_time() - c0
                    saved[(mb, p)] = (h, out)
                    if p != last:
                        wire.isend(out, the_routes[mb][p + 1], TRAIN_TAGS * mb)
                else:
                    h, out = saved.pop((mb, p))
                    if p == last:
                        t0, c0 = time.perf_counter(), time.thread_time()
                        (out * scale).backward()
                    else:
                        t0 = time.perf_counter()
                        grad = wire.recv(numel, the_routes[mb][p + 1], TRAIN_TAGS * mb + 1).view(shape)
                        wait, delay = time.perf_counter() - t0, wire.last_delay_s
                        t0, c0 = time.perf_counter(), time.thread_time()
                        out.backward(grad)
                    compute, compute_cpu = time.perf_counter() - t0, time.thread_time() - c0
                    if p > 0:
                        wire.isend(h.grad, the_routes[mb][p - 1], TRAIN_TAGS * mb + 1)
                ops.append([op.kind, mb, p, compute, wait, time.thread_time() - cpu0, compute_cpu, t0,
                            -1.0 if delay is None else delay])
        except (PeerLost, PeerAborted) as exc:
            for op in program[index:]:  # unblock everyone still waiting for this stage
                if op.kind == FORWARD and op.position != last:
                    wire.send_abort(numel, the_routes[op.micro_batch][op.position + 1], TRAIN_TAGS * op.micro_batch)
                elif op.kind == BACKWARD and op.position > 0:
                    wire.send_abort(numel, the_routes[op.micro_batch][op.position - 1],
                                    TRAIN_TAGS * op.micro_batch + 1)
            del saved
            return {"status": "aborted", "reason": str(exc), "ops": ops}
        return {"status": "done", "loss_sum": loss_sum if rt.stage == 0 else None,
                "sampler_state": sampler_state, "ops": ops, "prep_s": prep_s, "busy_s": time.perf_counter() - t_start}

    def cmd_commit(self, msg: dict) -> dict:
        t0 = time.perf_counter()
        self.wire.wait_sends()
        norm = self.runtime.clip()
        self.runtime.step(self._base_lr)
        return {"grad_norm": norm, "seconds": time.perf_counter() - t0}

    def cmd_abort(self, msg: dict) -> dict:
        self.wire.forget_sends()
        self.runtime.zero_grad()
        return {"ok": True}

    def cmd_evaluate(self, msg: dict) -> dict:
        """Forward-only pipeline over the fixed validation batches (PipelineTrainer.evaluate's)."""
        import torch

        from trainer.distributed.pipeline_schedule import Op

        rt, wire = self.runtime, self.wire
        cfg = rt.config
        the_routes = [tuple(r) for r in msg["routes"]]
        last = len(the_routes[0]) - 1
        numel, shape = self._act_numel(), (cfg.micro_batch_size, cfg.context, cfg.d_model)
        batches = rt.validation(len(the_routes)) if rt.stage == 0 else None
        total, tokens = 0.0, 0
        with torch.no_grad():
            for op in (Op(*o) for o in msg["program"]):
                mb, p = op.micro_batch, op.position
                h = None if p == 0 else wire.recv(numel, the_routes[mb][p - 1], TRAIN_TAGS * mb).view(shape)
                if p == 0:
                    out = rt.module.embed(batches[mb][0])
                elif p == last:
                    total += float(rt.loss_sum(h, batches[mb][1]))
                    tokens += batches[mb][1].numel()
                    continue
                else:
                    out = rt.forward(h)
                wire.isend(out, the_routes[mb][p + 1], TRAIN_TAGS * mb)
        wire.wait_sends()
        return {"loss_sum": total, "tokens": tokens}

    # ------------------------------------------------------------------ plans, links, tests
    def cmd_plan(self, msg: dict) -> dict:
        """This stage's part of every step of a recovery plan, in order (deadlock-free: module doc)."""
        import torch

        from trainer.distributed.stage_runtime import LR_WORDS
        from trainer.strategies.plan import combine

        rt, wire, me = self.runtime, self.wire, self.runtime.stage
        t_all = time.perf_counter()
        base = int(msg["tag_base"])
        received, written = [], 0
        for i, step in enumerate(msg["steps"]):
            op = step["op"]
            tag = base + 16 * i
            if op == "Hold":
                src, holder, parts = step["src"], step["holder"], step["parts"]
                if src == holder == me:
                    rt.hold(me, parts, rt.pack(parts))
                elif me == src:
                    wire.isend(rt.pack(parts), holder, tag)
                elif me == holder:
                    t0 = time.perf_counter()
                    rt.hold(src, parts, wire.recv(rt.numel(src, parts), src, tag))
                    received.append([src, me, 4 * rt.numel(src, parts), time.perf_counter() - t0])
            elif op == "Rebuild":
                stage, parts = step["stage"], step["parts"]
                if me == stage:
                    vectors = []
                    for j, (node, _, copy_of) in enumerate(step["sources"]):
                        if node == me:
                            vectors.append(rt.copy_of(copy_of, parts))
                            continue
                        t0 = time.perf_counter()
                        vectors.append(wire.recv(rt.numel(stage, parts), node, tag + j))
                        received.append([node, me, 4 * rt.numel(stage, parts), time.perf_counter() - t0])
                    coefficients = [c for _, c, _ in step["sources"]]
                    body = combine([v[:-LR_WORDS] for v in vectors], coefficients, step["denominator"])
                    flat = torch.cat([body, vectors[0][-LR_WORDS:]])  # LR words copied, never combined
                    rt.unpack(flat, parts, step["optimizer"], step["lr_scale"])
                else:
                    for j, (node, _, copy_of) in enumerate(step["sources"]):
                        if node == me:
                            wire.isend(rt.pack(parts) if copy_of is None else rt.copy_of(copy_of, parts), stage,
                                       tag + j)
            elif op == "Reinit" and step["stage"] == me:
                rt.reinit(int(step["salt"]), float(step["lr_scale"]))
            elif op == "SetLrScale" and step["stage"] == me:
                rt.lr_scale = float(step["lr_scale"])
            elif op == "SaveCheckpoint":
                written += rt.save(Path(step["dir"]) / f"stage{me}.npy")
            elif op == "LoadCheckpoint":
                written += rt.load(Path(step["dir"]) / f"stage{me}.npy")
        wire.wait_sends()
        return {"received": received, "storage_bytes": written, "seconds": time.perf_counter() - t_all}

    def cmd_ping(self, msg: dict) -> dict:
        """Round trips of float32 messages with `peer`; the initiator reports the median per size."""
        import statistics

        import torch

        peer, out = int(msg["peer"]), {}
        for k, numel in enumerate(msg["sizes"]):
            rtts = []
            for r in range(int(msg["repeats"]) + 1):  # round 0 warms the connection up
                tag = 2_000_000 + 2 * (k * 1000 + r)
                if msg["initiator"]:
                    t0 = time.perf_counter()
                    self.wire.isend(torch.zeros(numel), peer, tag)
                    self.wire.recv(numel, peer, tag + 1)
                    if r:
                        rtts.append(time.perf_counter() - t0)
                    self.wire.wait_sends()
                else:
                    x = self.wire.recv(numel, peer, tag)
                    self.wire.isend(x, peer, tag + 1)
                    self.wire.wait_sends()
            if rtts:
                out[str(numel)] = statistics.median(rtts)
        return {"rtt_s": out}

    def cmd_burn(self, msg: dict) -> dict:
        """Compute flat out for `seconds` of wall time (this stage's forward); report the CPU seconds got.

        Several stages burning at once measure how much CPU the host gives the run's processes
        (simulator.calibrate, host sharing).
        """
        import torch

        cfg = self.runtime.config
        h = torch.randn(cfg.micro_batch_size, cfg.context, cfg.d_model, generator=torch.Generator().manual_seed(0))
        module = self.runtime.template(1)
        t0, c0 = time.perf_counter(), time.thread_time()
        with torch.no_grad():
            while time.perf_counter() - t0 < float(msg["seconds"]):
                module(h)
        return {"cpu_s": time.thread_time() - c0, "wall_s": time.perf_counter() - t0}

    def cmd_save_state(self, msg: dict) -> dict:
        return {"bytes": self.runtime.save(Path(msg["path"]))}


def _warm_up() -> None:
    """Pay torch's lazy first-use costs (optimizer, autograd, attention kernels) before saying hello.

    Measured here: a spare that skipped this took 4.7 s to build its first stage (most of it the first
    Adam and backward), against 0.1 s once warm. A warm spare is a standby node that is ready to
    join; `Restarted.seconds` then measures joining, not importing.
    """
    import torch

    import trainer.distributed.pipeline_schedule  # noqa: F401 - imported now rather than in the first command
    import trainer.distributed.wire  # noqa: F401
    import trainer.strategies.plan  # noqa: F401
    from trainer.api import TrainerConfig
    from trainer.distributed.stage_runtime import stage_module
    from trainer.model import init_transformer_stage

    config = TrainerConfig(d_model=16, n_heads=2, n_kv_heads=1, ffn_hidden=16, context=8)
    module = stage_module(config, 1)
    init_transformer_stage(module, config, torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    x = torch.zeros(1, 8, 16, requires_grad=True)
    module(x).sum().backward()
    torch.nn.utils.clip_grad_norm_(list(module.parameters()), 1.0)
    opt.step()
