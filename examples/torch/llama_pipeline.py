"""Pipeline-parallel split of the Llama in ``llama_model.py``, in the shape of torchtitan's
``pipeline_llama`` / ``pipeline_module_split`` (written for this project, not copied).

Stage ``i`` of ``n`` keeps a contiguous run of the decoder layers; the first stage also keeps
the token embedding, the last the final norm and the output head. The stage module keeps the
full model's attribute names (``layers.1.attention.wq.weight``, ``output.weight``), so its
parameters are named as in the single-device model, as torchtitan's split keeps them.
"""

from __future__ import annotations

import torch
from torch import nn

from llama_model import Transformer


def stage_layers(n_layers: int, stage: int, n_stages: int) -> list[str]:
    """The layer ids of ``stage``: ``n_layers / n_stages`` consecutive layers (even split)."""
    per = n_layers // n_stages
    if per * n_stages != n_layers:
        raise ValueError(f"{n_layers} layers do not split evenly into {n_stages} stages")
    return [str(i) for i in range(stage * per, (stage + 1) * per)]


class LlamaStage(nn.Module):
    """One pipeline stage of a :class:`llama_model.Transformer`: what torchtitan's split leaves
    of the model (``tok_embeddings`` / ``norm`` / ``output`` set to ``None`` off their stage).

    ``forward`` takes the token ids on the first stage and the hidden states elsewhere; it
    returns the hidden states, or the logits on the last stage.
    """

    def __init__(self, model: Transformer, stage: int, n_stages: int):
        super().__init__()
        first, last = stage == 0, stage == n_stages - 1
        self.tok_embeddings = model.tok_embeddings if first else None
        self.register_buffer("rope_cos", model.rope_cos, persistent=False)
        self.register_buffer("rope_sin", model.rope_sin, persistent=False)
        ids = stage_layers(len(model.layers), stage, n_stages)
        self.layers = nn.ModuleDict({i: model.layers[i] for i in ids})
        self.norm = model.norm if last else None
        self.output = model.output if last else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if self.tok_embeddings is not None:
            h = self.tok_embeddings(h)
        for layer in self.layers.values():
            h = layer(h, self.rope_cos, self.rope_sin)
        if self.norm is not None:
            h = self.output(self.norm(h))
        return h


def pipeline_llama(model: Transformer, mesh) -> LlamaStage:
    """This rank's stage of ``model`` on the mesh's ``pp`` axis (stage = the pp coordinate)."""
    return LlamaStage(model, mesh["pp"].get_local_rank(), mesh["pp"].size())
