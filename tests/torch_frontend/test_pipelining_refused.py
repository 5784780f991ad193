"""What of ``torch.distributed.pipelining`` ``prove --torch`` still refuses, with the user's line,
before any verdict (exit 3; ``spec_lang/torch_frontend/pp_capture.py``, ``pp_merge.py``;
``docs/torch.md``, "Pipelining"): schedules other than ``ScheduleGPipe`` / ``Schedule1F1B``
(interleaved, looped, zero-bubble), the traced ``pipeline()`` front end, a second stage on a
rank, static stage metadata given by the user; and, when the stages are composed, a transfer
nobody receives, a receive with no send, a constant sent, a collective on the pipeline group.
"""

from __future__ import annotations

import operator
from pathlib import Path

import pytest
import torch
import torch.fx as fx
from torch import nn
from torch.distributed.pipelining import (
    Pipe, PipelineStage, ScheduleGPipe, ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble,
    pipeline,
)
from torch.distributed.pipelining import schedules as sched_mod
from torch.distributed.pipelining import stage as stage_mod

from spec_lang.errors import PlanError
from spec_lang.torch_frontend.capture import InputRole, OutputRole, Trace
from spec_lang.torch_frontend.pp_capture import (NeedsCpu, check_refusals, pipelining,
                                                  train_step_running)
from spec_lang.torch_frontend.pp_merge import merge_stages
from spec_lang.torch_frontend.tracedata import GraphHolder, ProcessGroupRef, ReduceOpRef, _target

HERE = __file__


def _line_of(marker: str) -> int:
    return next(i for i, ln in enumerate(Path(HERE).read_text().splitlines(), 1)
                if marker in ln and "_line_of" not in ln)


class _FakeStage:
    """What the schedules' constructors read of a stage before torch's base constructor."""

    num_stages = 2
    group_size = 2
    group_rank = 0


@pytest.mark.parametrize("build,what,site", [
    (lambda: ScheduleInterleaved1F1B([_FakeStage()], n_microbatches=4),  # site: interleaved
     "the pipeline schedule ScheduleInterleaved1F1B", "interleaved"),
    (lambda: ScheduleInterleavedZeroBubble([_FakeStage()], n_microbatches=4),  # site: zb
     "the pipeline schedule ScheduleInterleavedZeroBubble", "zb"),
    (lambda: pipeline(nn.Linear(2, 2), (torch.zeros(1, 2),)),  # site: tracer
     "pipeline() (the traced Pipe front end)", "tracer"),
])
def test_unsupported_pipelining_is_refused_naming_the_line(build, what, site):
    line = _line_of(f"# site: {site}")
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        with pytest.raises(PlanError) as e:
            build()
    msg = str(e.value)
    assert msg.startswith(f"{HERE}:{line}: {what} is not supported by prove --torch's "
                          "pipelining"), msg
    assert "ScheduleGPipe and Schedule1F1B" in msg
    assert rec.refusals == [msg]


def test_a_schedule_subclass_is_refused():
    class MySchedule(ScheduleGPipe):
        pass
    with pipelining(HERE, cpu=True, in_meta=None), train_step_running(), \
            pytest.raises(PlanError, match="MySchedule"):
        MySchedule(_FakeStage(), n_microbatches=2)


def test_a_stage_on_meta_tensors_asks_for_a_cpu_capture():
    with pipelining(HERE, cpu=False, in_meta=None) as rec, pytest.raises(NeedsCpu):
        PipelineStage(nn.Linear(2, 2), 0, 2, torch.device("cpu"))
    assert rec.refusals == ["needs-cpu"]
    check_refusals(rec.refusals)      # not a user-facing refusal: the capture retries on cpu


def test_a_stage_or_schedule_built_outside_train_step_is_refused():
    """Built in ``parallelize`` (torchtitan's way), a stage and its schedule are kept across
    steps with their receive buffers, and only one step is traced (round 26, R26-1)."""
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        with pytest.raises(PlanError, match="PipelineStage built outside train_step"):
            PipelineStage(nn.Linear(2, 2), 0, 2, torch.device("cpu"))
        with pytest.raises(PlanError, match="ScheduleGPipe built outside train_step"):
            ScheduleGPipe(_FakeStage(), n_microbatches=2)
    assert len(rec.refusals) == 2


def test_a_refusal_the_user_code_swallows_is_still_raised():
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        try:
            ScheduleInterleaved1F1B([_FakeStage()], n_microbatches=4)  # site: swallowed
        except Exception:  # noqa: BLE001 -- what a user's fallback could do
            pass
    with pytest.raises(PlanError, match=rf":{_line_of('# site: swallowed')}: the pipeline "):
        check_refusals(rec.refusals)
    check_refusals([])


def test_torch_is_restored_after_the_block():
    base, ps, sb = stage_mod._PipelineStageBase, PipelineStage, sched_mod._PipelineSchedule
    before = (base.__init__, sb.__init__, sb._warmup_p2p, ps._prepare_forward_infra,
              ps._recv_meta, ps._send_meta, base.forward_one_chunk, base.backward_one_chunk, base.perform_reduce_grad,
              sched_mod._batch_p2p, Pipe.from_tracing)
    with pipelining(HERE, cpu=True, in_meta=None):
        assert sb._warmup_p2p is not before[2]
    after = (base.__init__, sb.__init__, sb._warmup_p2p, ps._prepare_forward_infra,
             ps._recv_meta, ps._send_meta, base.forward_one_chunk, base.backward_one_chunk, base.perform_reduce_grad,
             sched_mod._batch_p2p, Pipe.from_tracing)
    assert after == before


def test_asynchronous_transfers_of_the_train_file_are_refused():
    """``dist.isend`` / ``irecv`` / ``batch_isend_irecv`` called by the train file: the trace
    records a transfer where it is issued, not where its work is waited (round 26); the
    synchronous ``dist.send`` / ``recv`` and torch's own schedule transfers are kept."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    before = [(m, n, getattr(m, n)) for m in (dist, c10d)
              for n in ("isend", "irecv", "batch_isend_irecv", "send", "recv")]
    with pipelining(HERE, cpu=True, in_meta=None) as rec:
        for call in (lambda: dist.isend(torch.zeros(1), 1), lambda: c10d.irecv(torch.zeros(1), 1),
                     lambda: dist.batch_isend_irecv([])):
            with pytest.raises(PlanError, match="asynchronous transfer"):
                call()
        assert dist.send is c10d.send and dist.send is not before[3][2]
    assert len(rec.refusals) == 3 and all(HERE in r for r in rec.refusals), rec.refusals
    assert all(getattr(m, n) is f for m, n, f in before)


def test_an_asynchronous_all_reduce_is_not_lowered():
    """``dist.all_reduce(t, async_op=True)`` (the schema's default: a synchronous call passes
    False): its write lands at the wait, which the trace does not record (round 26)."""
    from spec_lang.torch_frontend import frontend  # noqa: F401 -- registers the rules
    from spec_lang.torch_frontend.registry import RULES, Unsupported

    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(2, 3, device="meta")
    xt = g.placeholder("xt")
    xt.meta["val"] = torch.empty(3, 2, device="meta").t()

    class Ctx:
        class traces:      # noqa: N801 -- reached only by a synchronous call
            @staticmethod
            def pg_axis(n, k):
                raise LookupError("synchronous")

        @staticmethod
        def fail(n, why):
            return Unsupported(str(n.target), "here", why)

    rule = RULES["c10d.allreduce_.default"]
    for args in (([x], None, None, None), ([x], None, None, None, True)):
        n = g.call_function(_target("c10d.allreduce_.default"), args)
        with pytest.raises(Unsupported, match="async_op=True"):
            rule.term(n, Ctx, [None], None, None)
    n = g.call_function(_target("c10d.allreduce_.default"), ([x], None, None, None, False))
    with pytest.raises(LookupError, match="synchronous"):
        rule.term(n, Ctx, [None], None, None)
    # gloo reduces a tensor's raw memory whatever its strides (round 27, R27-1)
    n = g.call_function(_target("c10d.allreduce_.default"), ([xt], None, None, None, False))
    with pytest.raises(Unsupported, match="not contiguous"):
        rule.term(n, Ctx, [None], None, None)


def test_a_transfer_the_schedule_did_not_issue_is_refused():
    """A send / recv of the train file's own (marked ``user``: not among the schedule's
    recorded events) is refused, whether or not it is paired (round 26: R26-3, R26-5)."""
    with pytest.raises(PlanError, match="transfers a tensor that the schedule does not"):
        _merge([("mul", 0, 0), ("send", 1, 1, "user")], [("recv", 0, "-", "user")])


def test_an_all_reduce_over_the_pipeline_group_of_a_strided_tensor_is_refused():
    """Round 27, R27-1: one stage reducing a transposed buffer (gloo: raw memory)."""
    stages = [_stage(s, [("allreduce_pp", 0, 0)]) for s in range(2)]
    x1 = next(n for n in stages[1].gm.graph.nodes if n.op == "placeholder")
    x1.meta["val"] = torch.empty(3, 2, device="meta").t()
    with pytest.raises(PlanError, match="not contiguous"):
        merge_stages(stages, pp_axis="pp", spec_tied={}, path=HERE)


# -- composing the stages: synthetic stage graphs -------------------------------------------------
def _stage(s: int, prog: list[tuple], n_st: int = 2) -> Trace:
    """A stage trace: one float input ``x`` (a data input), then ``prog`` of ``("send", value,
    peer)``, ``("recv", peer)``, ``("mul", a, b)``, ``("zeros",)``, ``("allreduce_pp", v)``; its
    output is the last value, named ``out<s>``."""
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(2, 3, device="meta")
    consts = {"pg": ProcessGroupRef("g_pp")}
    pg = g.get_attr("pg")
    vals = [x]
    for op in prog:
        if op[0] == "send":
            n = g.call_function(_target("c10d.send.default"), ([vals[op[1]]], pg, op[2], 0))
            n.meta["stack_trace"] = f'  File "{HERE}", line 7, in step\n'
            continue
        if op[0] == "recv":
            buf = g.call_function(_target("aten.empty.memory_format"), ([2, 3],))
            buf.meta["val"] = torch.empty(2, 3, device="meta")
            n = g.call_function(_target("c10d.recv_.default"), ([buf], pg, op[1], 0))
            n.meta["stack_trace"] = f'  File "{HERE}", line 8, in step\n'
            vals.append(buf)
            continue
        if op[0] == "zeros":
            n = g.call_function(_target("aten.zeros.default"), ([2, 3],))
        elif op[0] == "allreduce_pp":    # ("allreduce_pp", value[, ReduceOp code])
            code = op[2] if len(op) > 2 else 0
            consts[f"rop{code}"] = ReduceOpRef(code)
            sync = () if len(op) > 3 and op[3] else (False,)    # async: the default, omitted
            n = g.call_function(_target("c10d.allreduce_.default"),
                                ([vals[op[1]]], pg, g.get_attr(f"rop{code}"), None, *sync))
            n.meta["stack_trace"] = f'  File "{HERE}", line 9, in step\n'
            item = g.call_function(operator.getitem, (g.call_function(operator.getitem, (n, 0)),
                                                      0))
            item.meta["val"] = torch.empty(2, 3, device="meta")
            g.call_function(operator.getitem, (n, 1))     # the work, unread (as make_fx gives)
            vals.append(item)
            continue
        else:
            n = g.call_function(operator.mul, (vals[op[1]], vals[op[2]]))
        n.meta["val"] = torch.empty(2, 3, device="meta")
        vals.append(n)
    g.output((vals[-1],))
    events = [f"SEND:{op[2]}:(2, 3)" if op[0] == "send" else f"RECV:{op[1]}:(2, 3)"
              for op in prog if op[0] in ("send", "recv") and not (len(op) > 3 and op[3])]
    return Trace(gm=GraphHolder(g, consts), inputs=[InputRole("data", "x", ("R", "S(0)"),
                                                              "torch.float32", (4, 3))],
                 outputs=[OutputRole("param", f"out{s}", ("R", "R"), None)],
                 mesh={"pp": n_st, "dp": 2}, coords={"pp": s, "dp": 0},
                 groups={"g_pp": "pp", "g_dp": "dp"}, sizes={}, tied={},
                 pp={"stage": s, "n_stages": n_st, "schedule": "ScheduleGPipe",
                     "n_microbatches": 1, "events": events})


def _merge(*progs):
    return merge_stages([_stage(s, p) for s, p in enumerate(progs)], pp_axis="pp", spec_tied={},
                        path=HERE)


def test_matched_transfers_compose_the_stages():
    m = _merge([("mul", 0, 0), ("send", 1, 1), ("recv", 1), ("mul", 2, 0)],
               [("recv", 0), ("mul", 1, 1), ("send", 2, 0)])
    ops = [str(n.target) for n in m.gm.graph.nodes if n.op == "call_function"]
    assert not any(o.startswith("c10d.") for o in ops)
    assert ops.count("aten.clone.default") == 2          # one copy per transfer
    # every stage's copy of the batch entry is its own input (round 23: R23-6)
    assert m.mesh == {"dp": 2} and [r.placements for r in m.inputs] == [("S(0)",)] * 2
    # a receive writes its buffer in place (round 23: R23-3)
    assert ops.count("aten.copy_.default") == 2, ops


def test_a_stage_relaying_what_it_received_sends_a_value_that_depends_on_an_input():
    """A middle stage that sends on the buffer it received (written in place) is composed;
    the constant-transfer refusal follows the value copied into the buffer."""
    progs = [[("mul", 0, 0), ("send", 1, 1)], [("recv", 0), ("send", 1, 2)], [("recv", 1)]]
    m = merge_stages([_stage(s, p, n_st=3) for s, p in enumerate(progs)], pp_axis="pp",
                     spec_tied={}, path=HERE)
    ops = [str(n.target) for n in m.gm.graph.nodes if n.op == "call_function"]
    assert ops.count("aten.copy_.default") == 2 and ops.count("aten.clone.default") == 2, ops


@pytest.mark.parametrize("progs,why", [
    (([("send", 0, 1)], []), "never receives"),
    (([], [("recv", 0)]), "never sent"),
    (([("recv", 1), ("send", 0, 1)], [("recv", 0), ("send", 0, 0)]), "never sent"),
    (([("zeros",), ("send", 1, 1)], [("recv", 0)]), "depends on no input"),
    (([("allreduce_pp", 0)], []), "waits in an all-reduce on the pipeline group"),
    (([("allreduce_pp", 0, 0)], [("allreduce_pp", 0, 4)]), "uses ReduceOp"),
    (([("allreduce_pp", 0, 0, True)], [("allreduce_pp", 0, 0, True)]), "async_op=True"),
])
def test_unpaired_constant_or_pp_collective_transfers_are_refused(progs, why):
    with pytest.raises(PlanError, match=why) as e:
        _merge(*progs)
    assert str(e.value).startswith(f"{HERE}:")


@pytest.mark.parametrize("code,op", [(0, "aten.add.Tensor"), (1, "aten.div.Tensor"),
                                     (4, "aten.maximum.default")])
def test_an_all_reduce_over_the_pipeline_group_composes_every_stage(code, op):
    """The k-th ``dist.all_reduce`` on the pp group of every stage is one all-reduce: the
    stages' tensors combined, written back in place on every stage (pp_merge's docstring)."""
    m = _merge([("mul", 0, 0), ("allreduce_pp", 1, code), ("mul", 2, 0)],
               [("allreduce_pp", 0, code), ("mul", 1, 1)])
    ops = [str(n.target) for n in m.gm.graph.nodes if n.op == "call_function"]
    assert ops.count("aten.copy_.default") == 2 and op in ops, ops
    assert "c10d.allreduce_.default" not in ops, ops
    combine = next(n for n in m.gm.graph.nodes if str(n.target) in (
        "aten.add.Tensor", "aten.maximum.default"))
    # stage 0's value is its x * x, stage 1's its x, as they are at the all-reduce
    assert [str(a.target) if a.op == "call_function" else a.op for a in combine.args] == \
        [str(operator.mul), "placeholder"], combine.args


# -- the vote bypass and the static metadata: pinned private APIs (torch 2.13.0) -----------------
def test_the_vote_gives_dynamic_every_stage():
    """Without user metadata every stage votes DYNAMIC (torch's ``needs_dynamic``), so the
    vote's product is 0: the capture sets that result (never the garbage ``.item()``)."""
    from torch.distributed.pipelining._utils import InferenceMode, _StageMeta

    assert InferenceMode.needs_dynamic(_StageMeta(), True)

    class S:
        _inference_mode = None
    s = S()
    with pipelining(HERE, cpu=True, in_meta=None):
        sched_mod._PipelineSchedule._warmup_p2p(None, [s], True, False)
    assert s._inference_mode == InferenceMode.DYNAMIC


def test_torch_still_runs_the_metadata_inference_where_pinned():
    """The capture runs torch's own DYNAMIC metadata inference and answers only its metadata
    transfers (``pp_capture.pipelining``): a torch that moves the vote, the extra forward,
    the extra ``loss_fn`` call or the received activation's ``requires_grad`` fails here
    first."""
    import inspect
    init = inspect.getsource(sched_mod._PipelineSchedule._initialize_pp_stages)
    assert "self._warmup_p2p(" in init and "_prepare_forward_infra(" in init
    assert "_prepare_backward_infra(" in init
    fwd = inspect.getsource(PipelineStage._prepare_forward_infra)
    assert "self._forward_metadata_inference(" in fwd
    finf = inspect.getsource(PipelineStage._forward_metadata_inference)
    assert "self._recv_meta(self.stage_index - 1)" in finf and "self._send_meta(" in finf
    assert "self._compute_outputs(" in finf
    binf = inspect.getsource(PipelineStage._backward_metadata_inference)
    assert "loss = loss_fn(" in binf and "self._recv_meta(self.stage_index + 1)" in binf
    bwd = inspect.getsource(PipelineStage._prepare_backward_infra)
    assert "self._backward_metadata_inference(" in bwd
    recv = inspect.getsource(stage_mod._PipelineStageBase._retrieve_recv_activations)
    assert "info.tensor_meta.requires_grad" in recv
    reduce = inspect.getsource(stage_mod._PipelineStageBase.scale_grads)
    assert "p.grad.div_(grad_scale_factor)" in reduce


def test_schedules_construct_again_after_the_block():
    with pipelining(HERE, cpu=True, in_meta=None):
        pass
    with pytest.raises(Exception) as e:     # torch's own constructor, on its own terms
        ScheduleInterleavedZeroBubble([_FakeStage()], n_microbatches=4)
    assert not isinstance(e.value, PlanError)
