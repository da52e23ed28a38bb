"""Load: concurrent executions x tool calls each, on one engine; lost, misrouted, refused
and leaked counts (see ``execengine/bench/load.py``).

    python benchmarks/bench_load.py                  # 200 x 50 at auto, 300 x 50 at none
    python benchmarks/bench_load.py --level restricted --executions 200 --calls 50
"""

from __future__ import annotations

import argparse
import sys

from execengine.bench import load


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", help="one isolation level instead of the two default runs")
    ap.add_argument("--executions", type=int, default=200)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="20 executions per level")
    args = ap.parse_args()
    runs = ([(args.level, args.executions)] if args.level
            else [("auto", 200), ("none", 300)])
    clean = True
    for level, n in runs:
        report = load.run(level, 20 if args.quick else n, args.calls)
        print(report.line(), flush=True)
        clean = clean and report.clean
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
