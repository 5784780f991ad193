"""Helper of `r8_08_lazy_neighbour_module.py` (round 8): a module next to the train file,
imported only inside the training step. Its global is the forward's scale."""

SCALE = 1.0
