"""torch's dispatch switches refused to the train file (``dispatch_escapes``: R49e-1, R49e-2,
R50a-1 r50a_07 / r50a_08, R50a-2, R50a-3 r50a_04).

In process: the "train file" is code compiled from a string after a fresh
``op_guard.take_baseline()`` (as the capture child takes it before importing the train file),
run inside :func:`installed`. End to end: ``tests/adversarial/test_round49e.py`` /
``test_round50a.py`` (slow) and the fast prove below.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.fx.experimental.proxy_tensor  # noqa: F401

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import dispatch_escapes, op_guard
from spec_lang.torch_frontend.dispatch_escapes import installed

ROOT = Path(__file__).resolve().parents[2]
TRAIN = "/tmp/shardproof_test_train_file.py"    # the user code's file name (never written)


@pytest.fixture(autouse=True)
def _fresh_baseline():
    """What exists now is torch's and ours; code compiled from here on is the user's."""
    was = op_guard._BASELINE[0]
    op_guard.take_baseline()
    yield
    op_guard._BASELINE[0] = was


def run_user(src: str, **names) -> dict:
    """``src`` run as the train file's code (``TRAIN``) with ``torch`` and ``names`` bound."""
    scope = {"torch": torch, **names}
    exec(compile(textwrap.dedent(src), TRAIN, "exec"), scope)  # noqa: S102
    return scope


def test_a_call_from_the_train_file_is_refused_with_its_line():
    with pytest.raises(PlanError) as e, installed(TRAIN):
        run_user("""
            x = 1
            torch._C._DisableTorchDispatch()
        """)
    msg = str(e.value)
    assert msg.startswith(f"{TRAIN}:3: the train file calls torch._C._DisableTorchDispatch")
    assert "R49e-1" in msg


@pytest.mark.parametrize("call", [
    "torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python))",
    "torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), "
    "torch._C._dispatch_tls_local_exclude_set())",
    "torch._C._dispatch_tls_set_dispatch_key_excluded(torch._C.DispatchKey.Python, True)",
    "torch.utils._mode_utils.no_dispatch()",
    "torch.utils._python_dispatch._disable_current_modes()",
    "torch.utils._python_dispatch._pop_mode_temporarily()",
    "torch.utils._python_dispatch._unset_infra_mode(torch._C._TorchDispatchModeKey.PROXY)",
    "torch._subclasses.fake_tensor.unset_fake_temporarily()",
    "torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing()",
    "torch.ops.aten.mul.Tensor.redispatch(torch._C._dispatch_keyset_full(), torch.ones(1), "
    "torch.ones(1))",
])
def test_every_switch_is_refused(call):
    with pytest.raises(PlanError, match="runs operators past torch's dispatch modes"), \
            installed(TRAIN):
        run_user(call)


@pytest.mark.parametrize("call", [
    "torch._C._autograd._unsafe_set_version_counter((x,), (0,))",
    "with torch.autograd.grad_mode._unsafe_preserve_version_counter(x):\n    x.add_(1)",
])
def test_a_version_counter_reset_is_refused(call):
    """R54a-3: a held tensor's version counter stands for every change its fingerprint does
    not list; resetting it from the train file is refused (directly, or by torch's context
    manager whose exit resets it)."""
    with pytest.raises(PlanError, match=r"resets a tensor's version counter.*\(R54a-3\)"), \
            installed(TRAIN):
        run_user(call, x=torch.zeros(2))


@pytest.mark.parametrize("call", [
    "torch._C._jit_set_bailout_depth(3)",
    "torch._C._profiler._set_fwd_bwd_enabled_val(True)",
    "torch._C._lazy._set_reuse_ir(True)",
])
def test_a_setting_without_a_getter_is_refused(call):
    """R63c-1: a process-wide torch setting with no getter (and no setter answering the old
    value) cannot be compared between steps; the train file's call is refused."""
    with pytest.raises(PlanError, match=r"a torch setting that has no getter.*\(R63c-1\)"), \
            installed(TRAIN):
        run_user(call)


def test_functorch_s_dispatch_key_switch_is_refused():
    """R63c-2: ``tls_set_vmap_excluded`` excludes a dispatch key as the TLS setters do."""
    with pytest.raises(PlanError, match="runs operators past torch's dispatch modes"), \
            installed(TRAIN):
        run_user("torch._C._functorch.tls_set_vmap_excluded(False)")


def test_a_name_bound_before_install_elsewhere_in_torch_is_replaced_too():
    from torch._subclasses import fake_tensor, meta_utils
    from torch.utils import _mode_utils

    orig = _mode_utils.no_dispatch      # torch 2.13: torch._C._DisableTorchDispatch itself
    with installed(TRAIN):
        for mod in (_mode_utils, fake_tensor, meta_utils):
            assert dispatch_escapes.is_wrapper(mod.no_dispatch)
            assert not hasattr(mod.no_dispatch, "__wrapped__")     # R50a-2
        assert dispatch_escapes.is_wrapper(torch._C._DisableTorchDispatch)
    for mod in (_mode_utils, fake_tensor, meta_utils):
        assert mod.no_dispatch is orig


def test_torch_own_calls_and_a_user_mode_pass():
    """make_fx (its proxy and fake modes entered and exited by torch, which uses no_dispatch
    and the guards internally) and a mode of the user's own: unchanged."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    with installed(TRAIN):
        scope = run_user("""
            class Count(TorchDispatchMode):
                n = 0

                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    Count.n += 1
                    return func(*args, **(kwargs or {}))

            g = make_fx(lambda a: (a @ a.t()).relu().sin(), tracing_mode="fake")(
                torch.randn(2, 3))
            with Count():
                torch.ones(2).mul(3)
        """, make_fx=make_fx, TorchDispatchMode=TorchDispatchMode)
    assert [n.target for n in scope["g"].graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.t.default, torch.ops.aten.mm.default, torch.ops.aten.relu.default,
        torch.ops.aten.sin.default]
    assert scope["Count"].n == 2


@pytest.mark.parametrize("how", [
    "TorchDispatchMode.__exit__(pm, None, None, None)",
    "pm.__exit__(None, None, None)",
])
def test_the_trace_s_own_modes_are_not_the_user_s_to_exit(how):
    """R50a-1 (r50a_08): the trace's proxy mode exited by the train file's code, through its
    own method or the base class's."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    with pytest.raises(PlanError, match="__exit__"), installed(TRAIN):
        run_user(f"""
            def step(a):
                pm = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY)
                {how}
                return a * 2

            make_fx(step, tracing_mode="fake")(torch.randn(2))
        """, make_fx=make_fx, TorchDispatchMode=TorchDispatchMode)


def test_a_caught_refusal_is_refused_again():
    with pytest.raises(PlanError, match=r"_pop_mode_temporarily"), installed(TRAIN):
        run_user("""
            try:
                torch.utils._python_dispatch._pop_mode_temporarily()
            except Exception:
                pass
        """)
    assert dispatch_escapes._FOUND == []       # uninstall forgot it


def test_a_standard_library_frame_in_between_is_skipped():
    """The escape handed to the standard library, which calls it (contextlib's ExitStack
    callback): the caller past the standard library's frames is the user's."""
    with pytest.raises(PlanError, match="_DisableTorchDispatch"), installed(TRAIN):
        run_user("""
            import contextlib
            with contextlib.ExitStack() as stack:
                stack.callback(torch._C._DisableTorchDispatch)
        """)


@pytest.mark.parametrize("call", [
    "torch.utils._pytree.tree_map(torch._C._ExcludeDispatchKeyGuard, "
    "torch._C.DispatchKeySet(torch._C.DispatchKey.Python))",
    "torch.no_grad()(torch._C._DisableTorchDispatch)()",
    "torch.utils._pytree.tree_map(lambda f: f(), torch.utils._mode_utils.no_dispatch)",
])
def test_a_torch_trampoline_is_looked_through(call):
    """R50a-3 (r50a_05 / r50a_06): a torch helper that calls the switch it was handed (its
    code does not name the switch) is not the caller that decides; the train file is."""
    with pytest.raises(PlanError, match="runs operators past torch's dispatch modes"), \
            installed(TRAIN):
        run_user(call)


def test_code_compiled_under_torch_s_file_name_is_the_user_s():
    """R50a-3 (r50a_04): whose code a frame runs is decided by the code object, not its file
    name."""
    with pytest.raises(PlanError, match="_DisableTorchDispatch"), installed(TRAIN):
        run_user("""
            exec(compile("import torch\\ntorch._C._DisableTorchDispatch()", torch.__file__,
                         "exec"), {})
        """)


PLAN = '''\
MESH = {"dp": 2}
import torch
from torch import nn
from torch.utils._mode_utils import no_dispatch

SIZES = {"batch": 4, "hidden": 6}


def build_model(s):
    return nn.Linear(s["hidden"], s["hidden"], bias=False)


def make_batch(s):
    return {"x": torch.randn(s["batch"], s["hidden"])}


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def parallelize(model, mesh):
    from torch.distributed._composable.replicate import replicate
    return replicate(model, device_mesh=mesh["dp"])


def train_step(model, optimizer, batch, mesh):
    loss = model(batch["x"]).pow(2).mean()
    loss.backward()
    with no_dispatch():
        model.weight.grad.mul_(2.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss
'''


@pytest.mark.slow     # (~12 s; the default suite's budget: the units above refuse the same)
def test_prove_refuses_a_name_bound_at_import(tmp_path):
    """End to end: ``from torch.utils._mode_utils import no_dispatch`` at the top of the train
    file binds the wrapper (installed before the import); exit 3 at the step's line."""
    f = tmp_path / "bound.py"
    f.write_text(PLAN)
    r = subprocess.run([sys.executable, "-m", "proofs.cli", "prove", "--torch", str(f),
                        "--jobs", "1", "--no-check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 3, (r.stdout, r.stderr)
    # torch 2.13's no_dispatch is torch._C._DisableTorchDispatch itself
    assert f"{f}:29: the train file calls torch._C._DisableTorchDispatch" in r.stderr, r.stderr
    assert textwrap.dedent(r.stderr).count("\n") <= 2
