from __future__ import annotations

from execengine.config import Config


def batch_config(**over) -> Config:
    base = {"code_execution.isolation": "none", "code_execution.kill_grace": 0.5,
            "code_execution.hello_timeout": 10.0, "code_execution.timeout": 20.0,
            "code_execution.mode": "strict"}
    base.update(over)
    return Config().with_overrides(base, origin="test")
