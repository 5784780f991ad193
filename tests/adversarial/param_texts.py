"""A parameter's attribute entry of ``step_state`` before and after a change (rounds 55a-55c:
the tracer's creation keys, ``capture``'s ``base_keys``)."""

from __future__ import annotations

import torch

KEY = "parameter weight attributes"


def param_texts(setup, change) -> tuple[str, str]:
    """``step_state``'s entry for the weight's attributes before and after ``change(weight)``,
    with ``base_keys`` recorded (as ``capture`` does) after ``setup(weight)``."""
    from spec_lang.torch_frontend.step_state import step_state

    model = torch.nn.Linear(2, 2, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    setup(model.weight)
    base = {id(model.weight): dict(vars(model.weight))}
    before = step_state(model, opt, [], base_keys=base)[KEY]
    change(model.weight)
    return before, step_state(model, opt, [], base_keys=base)[KEY]
