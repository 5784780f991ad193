"""Pipeline-parallel split of the GPT-2 in ``gpt2_model.py`` (nanoGPT-shaped, tied embedding).

Stage ``i`` of ``n`` keeps a contiguous run of the blocks; the first stage keeps the token and
position embeddings, the last the final LayerNorm and the head. The head's weight *is* the token
embedding's in the single-device model (``transformer.wte.weight = lm_head.weight``): split over
processes, the first and the last stage each hold a copy, and the copies stay equal only if the
two stages sum their gradients of it before the update (Megatron's "embedding group"). Names are
kept (``transformer.h.1.attn.c_q.weight``, ``lm_head.weight``).
"""

from __future__ import annotations

import torch
from torch import nn

from gpt2_model import GPT


class GPT2Stage(nn.Module):
    """One pipeline stage of a :class:`gpt2_model.GPT`. ``forward`` takes the token ids on the
    first stage and the hidden states elsewhere; it returns the hidden states, or the logits on
    the last stage (the loss is the schedule's ``loss_fn``)."""

    def __init__(self, model: GPT, stage: int, n_stages: int):
        super().__init__()
        n = len(model.transformer.h)
        per = n // n_stages
        if per * n_stages != n:
            raise ValueError(f"{n} blocks do not split evenly into {n_stages} stages")
        first, last = stage == 0, stage == n_stages - 1
        parts: dict[str, nn.Module] = {}
        if first:
            parts["wte"] = model.transformer.wte
            parts["wpe"] = model.transformer.wpe
        parts["h"] = nn.ModuleDict({str(i): model.transformer.h[i]
                                    for i in range(stage * per, (stage + 1) * per)})
        if last:
            parts["ln_f"] = model.transformer.ln_f
        self.transformer = nn.ModuleDict(parts)
        self.lm_head = model.lm_head if last else None
        self.first, self.last = first, last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.first:
            pos = torch.arange(0, x.size(1), dtype=torch.long, device=x.device)
            x = self.transformer.wte(x) + self.transformer.wpe(pos)
        for block in self.transformer.h.values():
            x = block(x)
        if self.last:
            x = self.lm_head(self.transformer.ln_f(x))
        return x


def pipeline_gpt2(model: GPT, mesh) -> GPT2Stage:
    """This rank's stage of ``model`` on the mesh's ``pp`` axis (stage = the pp coordinate)."""
    return GPT2Stage(model, mesh["pp"].get_local_rank(), mesh["pp"].size())


def tied_weight(stage: GPT2Stage) -> nn.Parameter | None:
    """The stage's copy of the tied embedding / head weight (first or last stage), else None."""
    if stage.first:
        return stage.transformer.wte.weight
    if stage.last:
        return stage.lm_head.weight
    return None
