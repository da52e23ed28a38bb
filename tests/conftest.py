"""Suite-wide: no test reads the user's own configuration, or leaves spill files behind.

``$EXECENGINE_CONFIG`` is unset and the home default (``~/.execengine/config.yaml``) points
into an empty temporary directory, so a developer's config cannot change what a test sees
(the CLI commands load the config; they used to pick up the user's). Tests of the search
order set both themselves. The full outputs of truncated executions go under pytest's own
temporary directory instead of the per-user ``execengine-output-<uid>`` in ``/tmp``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from execengine import _configload
from execengine.engine import spill


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[None]:
    monkeypatch.delenv(_configload.ENV_VAR, raising=False)
    home = tmp_path_factory.getbasetemp() / "no-user-home"
    monkeypatch.setattr(_configload, "default_config_path",
                        lambda: Path(home) / ".execengine" / "config.yaml")
    yield


@pytest.fixture(autouse=True)
def _spill_in_pytest_temp(monkeypatch: pytest.MonkeyPatch,
                          tmp_path_factory: pytest.TempPathFactory) -> None:
    where = str(tmp_path_factory.getbasetemp() / "spill")
    monkeypatch.setattr(spill, "spill_dir", lambda: where)
