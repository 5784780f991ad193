"""The truth for a train file whose ``MESH`` has several axes (round 46c: HSDP 2x2): the same
runner as :mod:`torch4_truth`, which builds the file's own ``MESH``; kept as the name rounds
46c-46f cite.

    python tests/adversarial/mesh_truth.py FILE [STEPS]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch4_truth import run  # noqa: E402

__all__ = ["run"]

if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if a != "--read-last"]
    print(json.dumps(run(argv[0], int(argv[1]) if len(argv) > 1 else 2,
                         read_last="--read-last" in sys.argv), indent=1))
