"""Time and host memory for scripts making 10/100/1000 tool calls and printing 1 KB to
100 MB, each beside a baseline measured in the same run.

Run: ``python benchmarks/bench_scaling.py [--quick]``.
"""

from __future__ import annotations

import argparse
import tempfile

from execengine.bench import speed
from execengine.config import Config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root, speed.make_engine(Config(), root) as engine:
        try:
            for fig in [*speed.tool_call_scaling(engine, root, quick=args.quick),
                        *speed.output_scaling(engine, quick=args.quick)]:
                print(fig.line())
        finally:
            engine.registry.close()


if __name__ == "__main__":
    main()
