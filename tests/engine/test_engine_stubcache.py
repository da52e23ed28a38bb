"""Each tool set's stub is rendered and byte-compiled once per runtime, and kept while used."""

from __future__ import annotations

import os

import pytest

from execengine.engine import prepare as staging
from execengine.engine.prepare import Runtime
from execengine.engine.stub import render_stub

SCHEMA = {"name": "echo", "description": "Echo.",
          "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}


@pytest.fixture
def runtime():
    rt = Runtime()
    yield rt
    rt.close()


def test_render_is_memoised_by_schema():
    first = render_stub([SCHEMA])
    assert render_stub([dict(SCHEMA)]) is first
    other = render_stub([{**SCHEMA, "description": "Echo it."}])
    assert other != first and "Echo it." in other


def test_one_compiled_directory_per_source(runtime):
    source = render_stub([SCHEMA])
    with runtime.stub_dir(source) as a, runtime.stub_dir(source) as b:
        assert a == b
        with open(os.path.join(a, "hermes_tools.py")) as f:
            assert f.read() == source
        assert any(n.startswith("hermes_tools.") and n.endswith(".pyc")
                   for n in os.listdir(os.path.join(a, "__pycache__")))
        assert os.stat(a).st_mode & 0o777 == 0o755
    with runtime.stub_dir(render_stub([])) as c:
        assert c != a and os.path.dirname(c) == os.path.dirname(a)


def test_least_recently_used_are_removed_but_never_one_in_use(runtime, monkeypatch):
    monkeypatch.setattr(staging, "MAX_STUBS", 2)
    sources = [f"# stub {i}\n" for i in range(4)]
    with runtime.stub_dir(sources[0]) as held:
        for s in sources[1:]:
            with runtime.stub_dir(s):
                pass
        assert os.path.isdir(held)  # oldest, but in use
    with runtime.stub_dir(sources[3]) as newest:
        pass
    stubs = os.path.dirname(newest)
    assert len(os.listdir(stubs)) == 2 and os.path.isdir(newest)
    assert not os.path.isdir(held)  # released, then evicted
