"""The speed benchmarks from a source checkout; the same as ``execengine bench speed``.

    python benchmarks/bench_speed.py [--quick] [--suite startup --suite roundtrip ...]
        [--reference PYTHON]

Every suite lives in :mod:`execengine.bench.speed`, so an installed wheel runs it too.
"""

from __future__ import annotations

import argparse
import sys

from execengine.bench.speed import SUITES, run_all


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--suite", action="append", choices=SUITES)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--reference", metavar="PYTHON",
                    help="an interpreter with reference-requirements.txt installed")
    args = ap.parse_args()
    return run_all(quick=args.quick, suites=args.suite, json_path=args.json,
                   reference_python=args.reference)


if __name__ == "__main__":
    sys.exit(main())
