"""``execengine version``: the same line as ``execengine --version``."""

from __future__ import annotations

import argparse
import platform
import sys
from typing import Any

from execengine import __version__


def version_text() -> str:
    """``execengine X.Y.Z (Python A.B.C, PATH)``: the version, the Python running it and
    where the package is."""
    package = sys.modules["execengine"].__file__ or "?"
    return f"execengine {__version__} (Python {platform.python_version()}, {package})"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("version", help="print the version (as --version does)",
                       description="Print execengine's version, the Python running it and "
                                   "where the package is.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(version_text())
    return 0
