"""Shared fixtures. Tests never read the developer's real overlays or caches: XDG dirs point into tmp."""

from __future__ import annotations

import pytest

from tests.support import REPO, run_cli


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("xdg")
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    monkeypatch.setenv("CUDABOX_NO_HOST", "1")
    monkeypatch.delenv("CUDABOX_MATRICES", raising=False)
    monkeypatch.delenv("CUDABOX_BUNDLED_MATRICES", raising=False)


@pytest.fixture(scope="session")
def matrix():
    from cudabox.knowledge import loader

    return loader.load(bundled=REPO / "matrices")


@pytest.fixture
def cli():
    return run_cli
