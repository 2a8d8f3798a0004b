"""cudabox/lock/fit.py: "does this stack run on this driver and these GPUs", from the lock alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cudabox.errors import InputError
from cudabox.lock.fit import Gpu, covered_ccs, stack_runs


def _stack(matrix, *reqs, **spec):
    from cudabox.lock.resolution import resolve_project
    from cudabox.project.spec import spec_from_flags

    return resolve_project(spec_from_flags(Path("."), list(reqs), **spec), matrix=matrix, no_host=True).stack


@pytest.fixture
def no_matrix(monkeypatch):
    """After lock, nothing may load the matrix: make the loader raise."""
    from cudabox.knowledge import loader

    def refuse(*_a, **_k):
        raise AssertionError("the matrix was loaded after lock")

    monkeypatch.setattr(loader, "load", refuse)


def test_the_lock_carries_driver_floors_and_code_as_values(matrix):
    stack = _stack(matrix, "torch==2.7.1", python="==3.12.*")
    facts = stack.runs_on
    assert facts.native_driver == "570.26"  # CUDA 12.8's GA driver
    torch = facts.code[0]
    assert torch.name == "torch" and "sm_90" in torch.sass and "sm_70" not in torch.sass
    assert "9.0" in facts.known_ccs
    # round trip through the lock's JSON
    from cudabox.resolve.stack import Stack
    assert Stack.from_dict(stack.to_dict()).runs_on == facts


def test_driver_and_gpu_verdicts_without_the_matrix(matrix, no_matrix):
    stack = _stack_cached["torch"]
    h100, v100 = Gpu("H100", "9.0", True), Gpu("V100", "7.0", True)
    fit = stack_runs(stack, "575.51.03", [h100])
    assert fit.ok and fit.mode == "native"
    old = stack_runs(stack, "550.54.15", [h100])
    assert not old and "570.26" in old.why
    no_code = stack_runs(stack, "575.51.03", [v100])  # torch cu128 dropped sm_70
    assert not no_code and "sm_70" in no_code.why and "V100" in no_code.why


def test_minor_compat_has_no_ptx_jit(matrix):
    compat = _stack(matrix, cuda="==12.8.*", python="==3.11.*", driver="535.104.05")
    assert compat.driver_mode == "minor-compat" and compat.runs_on.minor_compat_driver
    assert stack_runs(compat, "535.104.05").mode == "minor-compat"
    assert not stack_runs(compat, "470.57.02")
    # a plain stack compiles with NVRTC: only the toolkit's own SASS targets
    assert stack_runs(compat, "535.104.05", [Gpu("A100", "8.0")]).ok
    assert not stack_runs(compat, "535.104.05", [Gpu("future", "15.0")])


def test_forward_compat_refuses_consumer_gpus():
    from cudabox.resolve.stack import Code, RunFacts, Stack

    stack = Stack(python="3.12", python_install="os", cuda="12.8", cudnn=None, flavour="runtime",
                  base_image="x", os="ubuntu24.04", packages={}, requirements=(), index_urls=(),
                  requirement="cuda>=12.8 brand=tesla,driver>=535,driver<536", min_driver="R535",
                  driver_mode="forward-compat",
                  runs_on=RunFacts(native_driver="570.26", forward_compat_branches=(535,),
                                   code=(Code("cuda", ("sm_80", "sm_90")),), known_ccs=("8.0", "9.0")))
    assert stack_runs(stack, "535.104.05", [Gpu("H100", "9.0", True)]).mode == "forward-compat"
    refused = stack_runs(stack, "535.104.05", [Gpu("RTX A6000", "8.0", False)])
    assert not refused and "not a datacenter GPU" in refused.why
    assert not stack_runs(stack, "550.54.15")  # R550 is neither native nor served by cuda-compat
    assert covered_ccs(stack) == (["8.0", "9.0"], False)


def test_a_lock_without_facts_asks_for_a_relock(matrix):
    stack = replace(_stack_cached["torch"], runs_on=None)
    with pytest.raises(InputError, match="cudabox lock"):
        stack_runs(stack, "575.51.03")


_stack_cached = {}


@pytest.fixture(autouse=True)
def _torch_stack(matrix):
    if "torch" not in _stack_cached:
        _stack_cached["torch"] = _stack(matrix, "torch==2.7.1", python="==3.12.*")
