"""Mutant of ``llama_pp_dp.py`` (issue 11, pipelining): the last stage detaches the activation it
receives, so it computes no gradient for it and torch's schedule sends *zeros* upstream (its
``get_bwd_send_ops`` sends a zero buffer for a ``None`` gradient): stage 0's gradients are
those of a zero upstream gradient.

``prove --torch`` must not prove it: the send of a constant is refused (exit 3, naming the
line); the gloo oracle (``tests/torch_frontend/pp_truth.py``) shows stage 0's gradients wrong.
"""

from llama_pipeline import LlamaStage
from llama_pp_dp import (  # noqa: F401 -- the contract's names
    MESH, N_MICROBATCHES, SIZES, build_model, build_optimizer, loss_fn, make_batch, train_step,
)


class DetachingStage(LlamaStage):
    def forward(self, h):
        if self.tok_embeddings is None:
            h = h.detach()      # BUG: no gradient flows back to the previous stage
        return super().forward(h)


def parallelize(model, mesh):
    return DetachingStage(model, mesh["pp"].get_local_rank(), mesh["pp"].size())
