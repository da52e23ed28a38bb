"""``execengine version``: the same line as ``execengine --version``."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("version", help="print the version (as --version does)",
                       description="Print execengine's version, the Python running it and "
                                   "where the package is.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from execengine.cli import version_text

    print(version_text())
    return 0
