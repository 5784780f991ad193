"""torch's dispatch switches refused to the train file (``dispatch_escapes``, R49e-1 / R49e-2).

In process: :func:`installed` with this test file as the "train file" (its frames are the
user's). End to end: ``tests/adversarial/test_round49e.py`` (slow) and the fast prove below.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from spec_lang.errors import PlanError
from spec_lang.torch_frontend import dispatch_escapes
from spec_lang.torch_frontend.dispatch_escapes import installed

HERE = __file__
ROOT = Path(__file__).resolve().parents[2]


def test_a_call_from_the_train_file_is_refused_with_its_line():
    with pytest.raises(PlanError) as e, installed(HERE):
        line = sys._getframe().f_lineno + 1  # noqa: SLF001
        torch._C._DisableTorchDispatch()
    msg = str(e.value)
    assert msg.startswith(f"{HERE}:{line}: the train file calls torch._C._DisableTorchDispatch")
    assert "R49e-1" in msg


@pytest.mark.parametrize("get", [
    lambda: torch._C._ExcludeDispatchKeyGuard(
        torch._C.DispatchKeySet(torch._C.DispatchKey.Python)),
    lambda: torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(),
                                            torch._C._dispatch_tls_local_exclude_set()),
    lambda: torch._C._dispatch_tls_set_dispatch_key_excluded(torch._C.DispatchKey.Python, True),
    lambda: torch.utils._mode_utils.no_dispatch(),
    lambda: torch.utils._python_dispatch._disable_current_modes(),
    lambda: torch.utils._python_dispatch._pop_mode_temporarily(),
    lambda: torch._subclasses.fake_tensor.unset_fake_temporarily(),
    lambda: torch.fx.experimental.proxy_tensor.disable_proxy_modes_tracing(),
    lambda: torch.ops.aten.mul.Tensor.redispatch(
        torch._C._dispatch_keyset_full(), torch.ones(1), torch.ones(1)),
])
def test_every_switch_is_refused(get):
    import torch.fx.experimental.proxy_tensor  # noqa: F401

    with pytest.raises(PlanError, match="runs operators past torch's dispatch modes"), \
            installed(HERE):
        get()


def test_a_name_bound_before_install_elsewhere_in_torch_is_replaced_too():
    from torch._subclasses import fake_tensor, meta_utils
    from torch.utils import _mode_utils

    orig = _mode_utils.no_dispatch
    with installed(HERE):
        for mod in (_mode_utils, fake_tensor, meta_utils):
            assert mod.no_dispatch is not orig
            assert mod.no_dispatch.__shardproof_escape__ is orig
        assert torch._C._DisableTorchDispatch.__shardproof_escape__ is not None
    for mod in (_mode_utils, fake_tensor, meta_utils):
        assert mod.no_dispatch is orig


def test_torch_own_calls_pass():
    """FakeTensorMode and make_fx use no_dispatch / the guards internally: unchanged."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with installed(HERE):
        with FakeTensorMode():
            x = torch.randn(3, 4)
            y = (x @ x.t()).relu().sum()
        assert tuple(y.shape) == ()
        g = make_fx(lambda a: (a * 2).sin())(torch.randn(2))
        assert "mul" in str(g.graph) and "sin" in str(g.graph)


def test_a_caught_refusal_is_refused_again():
    with pytest.raises(PlanError, match=r"_pop_mode_temporarily"), installed(HERE):
        with contextlib.suppress(PlanError):
            torch.utils._python_dispatch._pop_mode_temporarily()
    assert dispatch_escapes._FOUND == []       # uninstall forgot it


def test_a_standard_library_frame_in_between_is_skipped():
    """The escape handed to the standard library, which calls it (contextlib's ExitStack
    callback): the caller past the standard library's frames is this file."""
    with pytest.raises(PlanError, match="_DisableTorchDispatch"), installed(HERE):
        with contextlib.ExitStack() as stack:
            stack.callback(torch._C._DisableTorchDispatch)


def test_exec_d_code_is_the_user_s():
    with pytest.raises(PlanError, match="_DisableTorchDispatch"), installed(HERE):
        exec("import torch\ntorch._C._DisableTorchDispatch()")  # noqa: S102


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
