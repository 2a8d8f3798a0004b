"""The bundled matrix holds every final release PyPI published before its refresh date (issue #11).

`cudabox matrix refresh --dry-run` run against the bundled data alone must find nothing to add that
PyPI published on or before `refresh.refreshed` in matrices/sources.yaml, and nothing to correct.
A release newer than that date is a note, not a failure (a release day can't turn CI red).

Offline: the recorded PyPI responses in tests/fixtures/pypi (re-recorded by record.py up to the
refresh date). Live (`-m network`, part of `make test`): pypi.org itself.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest

from cudabox.knowledge import overlay
from cudabox.knowledge.pypi import Client, FixtureTransport, HTTPTransport
from cudabox.knowledge.refresh.plan import plan, refreshed_on

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "pypi"


def bundled_docs() -> dict:
    return overlay.load_documents(None, REPO / "matrices")


def _describe(changes) -> str:
    return "\n".join(f"{c.label}: {c.summary or 'fields differ'}" for c in changes)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return Client(FixtureTransport(FIXTURES), cache_dir=tmp_path_factory.mktemp("pypi-cache"))


def test_bundle_names_its_refresh_date_and_floors():
    docs = bundled_docs()
    assert refreshed_on(docs) is not None
    floors = dict(docs["sources"]["refresh"]["floors"])
    # the floors: torch >= 1.12, torchvision >= 0.13, torchaudio >= 0.12, tensorflow >= 2.4,
    # jax from the first release whose cuda12 extra installs the CUDA plugin; paddle from 2.6 (issue #19)
    assert {k: str(v) for k, v in floors.items()} == {
        "torch": "1.12", "torchvision": "0.13", "torchaudio": "0.12", "tensorflow": "2.4", "jax": "0.4.26",
        "paddle": "2.6"}


def test_recorded_pypi_has_nothing_the_bundle_lacks(recorded):
    docs = bundled_docs()
    result = plan(recorded, docs)
    missing, newer = result.against(refreshed_on(docs))
    assert not missing, "bundled matrix lacks (run `cudabox matrix refresh --into matrices/`):\n" + _describe(missing)
    assert not newer  # the fixtures were recorded on the refresh date


@pytest.mark.parametrize("subject,series,version", [
    ("torch", "2.1", "2.1.1"), ("torch", "2.3", "2.3.0"), ("tensorflow", "2.13", "2.13.1"),
    ("tensorflow", "2.19", "2.19.1")])
def test_a_missing_patch_release_is_reported_missing(recorded, subject, series, version):
    docs = _plain(bundled_docs())
    rec = next(r for r in docs[subject]["releases"] if r["series"] == series)
    rec["versions"].remove(version)
    missing, newer = plan(recorded, docs, [subject]).against(refreshed_on(docs))
    assert [(c.label, c.adds()) for c in missing] == [(f"{subject} {series}", [version])]
    assert not newer


@pytest.mark.parametrize("version", ["2.6.0", "2.6.2"])
def test_a_missing_paddle_release_is_reported_missing(recorded, version):
    docs = _plain(bundled_docs())
    rec = next(r for r in docs["paddle"]["releases"] if r["series"] == "2.6")
    rec["versions"].remove(version)
    missing, _ = plan(recorded, docs, ["paddle"]).against(refreshed_on(docs))
    assert [(c.label, c.adds()) for c in missing] == [("paddle 2.6", [version])]


@pytest.mark.parametrize("version", ["0.4.30", "0.5.2", "0.6.2", "0.8.1", "0.10.2"])
def test_a_missing_jax_release_is_reported_missing(recorded, version):
    docs = _plain(bundled_docs())
    docs["jax"]["releases"] = [r for r in docs["jax"]["releases"] if r["versions"] != [version]]
    missing, _ = plan(recorded, docs, ["jax"]).against(refreshed_on(docs))
    assert [c.adds() for c in missing] == [[version]]


def test_a_missing_companion_is_reported_missing(recorded):
    docs = _plain(bundled_docs())
    tv = docs["torch"]["companions"]["torchvision"]
    tv[:] = [r for r in tv if r["version"] != "0.17.1"]
    missing, _ = plan(recorded, docs, ["torch", "torchvision"]).against(refreshed_on(docs))
    assert [(c.label, c.adds()) for c in missing] == [("torchvision 0.17.1", ["0.17.1"])]


def test_a_release_after_the_refresh_date_is_a_note_not_a_failure(recorded):
    docs = _plain(bundled_docs())
    docs["sources"]["refresh"]["refreshed"] = "2025-06-01"  # as if the bundle were older than torch 2.8.0
    docs["torch"]["releases"] = [r for r in docs["torch"]["releases"] if r["series"] != "2.8"]
    missing, newer = plan(recorded, docs, ["torch"]).against("2025-06-01")
    assert "torch 2.8" in [c.label for c in newer]
    assert "torch 2.8" not in [c.label for c in missing]


def _plain(docs) -> dict:
    from cudabox.knowledge.refresh.reader import plain

    return copy.deepcopy({k: plain(v) for k, v in docs.items()})


@pytest.mark.network
def test_live_bundled_matrix_is_complete(tmp_path):
    docs = bundled_docs()
    start = time.monotonic()
    result = plan(Client(HTTPTransport(), cache_dir=tmp_path), docs)
    took = time.monotonic() - start
    refreshed = refreshed_on(docs)
    missing, newer = result.against(refreshed)
    for change in newer:
        print(f"note: {change.label} ({change.summary}) is newer than the bundle's refresh date {refreshed}")
    print(f"cold live refresh plan: {took:.1f} s")
    assert not missing, (f"PyPI published these by {refreshed} and the bundled matrix lacks them (run `cudabox "
                         f"matrix refresh --into matrices/`):\n" + _describe(missing))
