from __future__ import annotations

from execengine.config import Config


def batch_config(**over) -> Config:
    base = {"code_execution.isolation": "none", "code_execution.kill_grace": 0.5,
            "code_execution.hello_timeout": 10.0, "code_execution.timeout": 20.0,
            "code_execution.mode": "strict"}
    base.update(over)
    return Config().with_overrides(base, origin="test")


def engine_has_sessions() -> bool:
    """Issue 14 adds ``Engine.execute(..., session=...)``; until then session tasks are
    refused one by one (the tests check whichever applies)."""
    import inspect

    from execengine.engine import Engine

    return "session" in inspect.signature(Engine.execute).parameters
