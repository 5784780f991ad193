"""Helper module of r58c_06 (the train file's own module next to it): its name starts with
`numpy`, one of the prefixes `process_state._is_torch` matches without a dot boundary."""


class Cnt:
    n = 0
