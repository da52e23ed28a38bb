"""Trivial executions per second with 1, 2, 4 and 8 at once, beside bare interpreter spawns.

Run: ``python benchmarks/bench_throughput.py [--quick]`` (``execengine bench speed`` runs it
together with the other speed benchmarks).
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
            for fig in speed.throughput(engine, quick=args.quick):
                print(fig.line())
        finally:
            engine.registry.close()


if __name__ == "__main__":
    main()
