"""Fixtures for mapctl end-to-end tests: the binary and TorchScript models traced now."""
import json
import os
import subprocess
import sys

import pytest

MAPCTL = os.environ.get("MAPCTL", "")
SOURCE_DIR = os.environ.get("MAPD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def pytest_configure(config):
    config.addinivalue_line("markers", "long: a slow end-to-end case, left to the long form (scripts/test.sh --long, "
                            "CTest label `long`: test mapctl_cli_long); CTest's other tests run `-m 'not long'`")


def run_mapctl(*args, check=None, env_extra=None):
    """Runs mapctl; returns CompletedProcess. check=0 asserts success; env_extra adds variables."""
    assert MAPCTL and os.path.exists(MAPCTL), "set MAPCTL to the mapctl binary (ctest does)"
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run([MAPCTL, *args], capture_output=True, text=True, timeout=300, env=env)
    if check is not None:
        assert proc.returncode == check, f"mapctl {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """Directory of TorchScript models made by tests/import/models/make_models.py."""
    out = tmp_path_factory.mktemp("models")
    script = os.path.join(SOURCE_DIR, "tests", "import", "models", "make_models.py")
    subprocess.run(["/usr/bin/python3", script, str(out)], check=True, capture_output=True, timeout=300)
    with open(out / "expected.json") as f:
        expected = json.load(f)
    return out, expected
