"""`cudabox fleet plan`: inventories in three formats, placement facts, the fleet-wide stack and why none.

The fleet is the issue's: R470 V100s, R550 A100s, R570 RTX 5090s. The facts
asserted are NVIDIA's (via the matrix): the RTX 5090 (sm_120) needs CUDA 12.8,
so a driver >= 570.26; R470 runs CUDA 11.x (up to 11.8 through minor-version
compatibility) and nothing newer without forward compatibility; CUDA 13
dropped Volta, so V100s need CUDA < 13 and a torch build that carries sm_70.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudabox.jobs import fleet
from cudabox.errors import InputError
from cudabox.jobs.inventory import Options, read_inventory
from cudabox.resolve.request import Request
from tests.support import REPO, run_cli

V100_R470, A100_R550, RTX5090_R570 = "470.256.02", "550.54.15", "570.133.07"

MIXED = f"""\
# the issue's fleet: three generations, three driver branches
- {{name: v100-01, gpu: V100, driver: "{V100_R470}", count: 8}}
- {{name: v100-02, gpu: "Tesla V100-SXM2-32GB", driver: "{V100_R470}", count: 8}}
- {{name: a100-01, gpu: A100, driver: "{A100_R550}", count: 8}}
- {{name: rtx-01, gpu: RTX 5090, driver: "{RTX5090_R570}", count: 2}}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _klass(result, gpu_word: str):
    return next(k for k in result.classes if gpu_word in k[0])


@pytest.fixture
def mixed(tmp_path, matrix):
    return read_inventory(_write(tmp_path, "fleet.yaml", MIXED), matrix)


def _catalog(*stacks):
    return [fleet.Candidate(name, s, "catalog") for name, s in stacks]


def _plain(matrix, cuda: str):
    from cudabox.resolve.resolver import resolve

    return resolve(matrix, Request(cuda=f"=={cuda}.*", python="==3.11.*"))


# --------------------------------------------------------------------------- inventories


def test_yaml_inventory(mixed):
    assert [n.name for n in mixed] == ["v100-01", "v100-02", "a100-01", "rtx-01"]
    assert {n.gpu.name for n in mixed[:2]} == {"Tesla V100 SXM2 32 GB"}  # alias and nvidia-smi name
    assert [n.count for n in mixed] == [8, 8, 8, 2]
    assert str(mixed[3].driver) == RTX5090_R570


def test_kubectl_inventory_with_gfd_labels(tmp_path, matrix):
    def node(name, labels, gpus="8"):
        return {"metadata": {"name": name, "labels": labels}, "status": {"capacity": {"nvidia.com/gpu": gpus}}}

    doc = {"apiVersion": "v1", "kind": "List", "items": [
        node("v100", {"nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB", "nvidia.com/cuda.driver-version.full":
                      V100_R470, "nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "0"}),
        node("a100", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",  # time-slicing suffix
                      "nvidia.com/cuda.driver-version.major": "550", "nvidia.com/cuda.driver-version.minor": "54",
                      "nvidia.com/cuda.driver-version.revision": "15"}),
        node("rtx", {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090", "nvidia.com/cuda.driver.major": "570",
                     "nvidia.com/cuda.driver.minor": "133", "nvidia.com/cuda.driver.rev": "07",
                     "nvidia.com/gpu.count": "2"}),
        node("cpu-only", {"kubernetes.io/os": "linux"}, gpus="0"),
    ]}
    nodes = read_inventory(_write(tmp_path, "nodes.json", json.dumps(doc)), matrix)
    assert [(n.name, n.gpu.cc, str(n.driver), n.count) for n in nodes] == [
        ("v100", "7.0", V100_R470, 8), ("a100", "8.0", A100_R550, 8), ("rtx", "12.0", RTX5090_R570, 2)]


SCONTROL = f"""\
NodeName=gpu-v01 Arch=x86_64 CoresPerSocket=16
   AvailableFeatures=v100,driver_{V100_R470}
   ActiveFeatures=v100,driver_{V100_R470}
   Gres=gpu:v100:8(S:0-1)
   NodeAddr=gpu-v01 NodeHostName=gpu-v01 Version=22.05.8
   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1

NodeName=gpu-a01 Arch=x86_64 CoresPerSocket=32
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=gpu:a100:4
   State=MIXED Comment=driver={A100_R550}

NodeName=login01 Arch=x86_64 Gres=(null) State=IDLE
"""


def test_scontrol_inventory(tmp_path, matrix):
    nodes = read_inventory(_write(tmp_path, "nodes.txt", SCONTROL), matrix)
    assert [(n.name, n.gpu.cc, str(n.driver), n.count) for n in nodes] == [
        ("gpu-v01", "7.0", V100_R470, 8), ("gpu-a01", "8.0", A100_R550, 4)]


def test_sinfo_inventory_needs_a_driver_default(tmp_path, matrix):
    path = _write(tmp_path, "sinfo.txt", "gpu-r01 gpu:rtx5090:2 (null)\ngpu-r02 gpu:rtx5090:2 (null)\n")
    with pytest.raises(InputError, match="--driver"):
        read_inventory(path, matrix)
    nodes = read_inventory(path, matrix, Options(default_driver=RTX5090_R570))
    assert {(n.gpu.name, n.count) for n in nodes} == {("GeForce RTX 5090", 2)}


def test_unknown_gres_type_names_the_node_and_the_way_out(tmp_path, matrix):
    path = _write(tmp_path, "sinfo.txt", "n1 gpu:bigiron:4 driver_550.54.15\n")
    with pytest.raises(InputError, match=r"node n1.*--gres-map"):
        read_inventory(path, matrix)
    nodes = read_inventory(path, matrix, Options(gres_map=(("bigiron", "H100"),)))
    assert nodes[0].gpu.cc == "9.0"


def test_yaml_errors_point_at_the_line(tmp_path, matrix):
    path = _write(tmp_path, "bad.yaml", "- {name: a, gpu: A100, driver: '550.54.15'}\n- {name: b, gpu: A100}\n")
    with pytest.raises(InputError, match=r"bad.yaml:2: no driver version"):
        read_inventory(path, matrix)


# --------------------------------------------------------------------------- placement facts


def test_cuda_windows_of_the_mixed_fleet(mixed, matrix):
    result = fleet.plan(matrix, mixed, [])
    v100, a100, rtx = (result.windows[_klass(result, w)] for w in ("V100", "A100", "5090"))
    assert (v100[0], v100[-1]) == ("11.0", "11.8")  # R470: 11.4 natively, 11.x by minor-version compatibility
    assert a100[-1] == "12.9" and "13.0" not in a100  # R550: no CUDA 13 (its floor is R580)
    assert rtx[0] == "12.8"  # sm_120 arrived with CUDA 12.8
    assert len(result.classes) == 3 and len(result.members(_klass(result, "V100"))) == 2


def test_plain_cuda_stacks_per_node(mixed, matrix):
    cands = _catalog(("cuda-12.8", _plain(matrix, "12.8")), ("cuda-13.0", _plain(matrix, "13.0")))
    result = fleet.plan(matrix, mixed, cands)
    v = result.verdicts
    v100, a100, rtx = (_klass(result, w) for w in ("V100", "A100", "5090"))
    assert not v[("cuda-12.8", v100)].ok and "470.256.02" in v[("cuda-12.8", v100)].why
    # the image says NVIDIA_REQUIRE_CUDA=cuda>=12.8: R550 (CUDA 12.4) is refused, as `cudabox run` refuses it
    # (one answer: cudabox/lock/fit.py); a stack locked for R550 uses minor-version compatibility instead
    assert not v[("cuda-12.8", a100)].ok and "570.26" in v[("cuda-12.8", a100)].why
    assert v[("cuda-12.8", rtx)].ok and v[("cuda-12.8", rtx)].mode == "native"
    assert not any(v[("cuda-13.0", k)].ok for k in result.classes)  # R580+ needed everywhere
    assert result.newest_everywhere() == {}


def test_v100_needs_cuda_below_13_even_with_a_new_driver(tmp_path, matrix):
    nodes = read_inventory(_write(tmp_path, "v.yaml", '- {name: v, gpu: V100, driver: "580.65.06"}\n'), matrix)
    result = fleet.plan(matrix, nodes, _catalog(("cuda-13.0", _plain(matrix, "13.0"))))
    verdict = result.verdicts[("cuda-13.0", result.classes[0])]
    assert not verdict.ok and "sm_70" in verdict.why
    assert result.windows[result.classes[0]][-1] == "12.9"


def test_rtx_5090_needs_570_26(tmp_path, matrix):
    text = '- {name: new, gpu: RTX 5090, driver: "570.26"}\n- {name: old, gpu: RTX 5090, driver: "565.77"}\n'
    nodes = read_inventory(_write(tmp_path, "r.yaml", text), matrix)
    result = fleet.plan(matrix, nodes, _catalog(("cuda-12.8", _plain(matrix, "12.8"))))
    ok = {k[1]: result.verdicts[("cuda-12.8", k)] for k in result.classes}
    assert ok["570.26"].ok
    assert not ok["565.77"].ok and "570.26" in ok["565.77"].why


# --------------------------------------------------------------------------- the fleet-wide stack


def test_torch_on_v100_and_a100_uses_a_build_with_sm_70(tmp_path, matrix):
    text = f'- {{name: v, gpu: V100, driver: "{A100_R550}"}}\n- {{name: a, gpu: A100, driver: "{A100_R550}"}}\n'
    nodes = read_inventory(_write(tmp_path, "va.yaml", text), matrix)
    result = fleet.plan(matrix, nodes, [], Request(requirements=("torch",)))
    torch = result.stack.frameworks[0]
    assert torch.variant in ("cu126", "cu128") and "sm_70" in torch.arch
    assert int(result.stack.cuda.split(".")[0]) == 12


def test_no_stack_for_the_mixed_fleet_and_why(mixed, matrix):
    result = fleet.plan(matrix, mixed, [], Request(requirements=("torch",)))
    assert result.stack is None
    assert result.reasons[0] == "no CUDA version runs on every node"
    assert any("V100" in r and "CUDA 11.0–11.8" in r for r in result.reasons)
    assert any("RTX 5090" in r and "CUDA 12.8" in r for r in result.reasons)
    assert any(r.startswith("way out: upgrade the driver to >= 570.26") for r in result.reasons)
    own = {k[0]: v for k, v in result.per_class.items()}
    assert own["Tesla V100 SXM2 32 GB"].cuda.startswith("11.")  # what the V100 nodes could run alone
    assert own["GeForce RTX 5090"].frameworks[0].variant in ("cu128", "cu129", "cu130")


def test_cli_plan_table_json_and_exit_codes(tmp_path):
    inv = _write(tmp_path, "fleet.yaml", MIXED)
    proc = run_cli("fleet", "plan", "-i", inv, "--with", "torch", cwd=tmp_path, check=3)
    assert "No single stack for torch runs on every node" in proc.stdout
    assert "no CUDA version runs on every node" in proc.stdout
    data = json.loads(run_cli("fleet", "plan", "-i", inv, "--with", "torch", "--json", cwd=tmp_path,
                              check=3).stdout)
    assert data["fleet_stack"] is None and data["requirements"] == ["torch"]
    classes = {c["gpu"]: c for c in data["classes"]}
    v100 = classes["Tesla V100 SXM2 32 GB"]
    assert v100["nodes"] == ["v100-01", "v100-02"] and v100["cuda_window"][-1] == "11.8"
    # the catalog (images/) is placed too: every plain CUDA image needs CUDA 12+, so none on R470
    assert not [r for r in v100["runs"] if r.startswith("cuda:")]
    assert "cuda:cuda-12.8-py3.11" in classes["GeForce RTX 5090"]["runs"]
    assert v100["own_stack"]["frameworks"][0].startswith("torch ")
    ok = run_cli("fleet", "plan", "-i", _write(tmp_path, "two.yaml", "\n".join(MIXED.splitlines()[2:4])),
                 "--with", "torch", "--no-catalog", "--json", cwd=tmp_path, check=0)
    assert json.loads(ok.stdout)["fleet_stack"]["frameworks"][0].startswith("torch ")


def test_cli_places_the_projects_lock(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "cudabox.yaml").write_text('name: saxpy\npython: "3.11"\ncuda: "12.8"\ngpus: [A100, RTX 5090]\n')
    run_cli("lock", cwd=project, check=0)
    inv = _write(tmp_path, "fleet.yaml", MIXED)
    data = json.loads(run_cli("fleet", "plan", "-i", inv, "--no-catalog", "--json", "-C", project,
                              cwd=tmp_path).stdout)
    runs = {c["gpu"]: c["runs"] for c in data["classes"]}
    assert runs["GeForce RTX 5090"] == ["saxpy (cudabox.lock)"] and runs["Tesla V100 SXM2 32 GB"] == []
    assert data["fleet_stack"] is None  # cudabox.yaml's cuda 12.8 can't run on the R470 nodes
    assert run_cli("fleet", "plan", "-i", tmp_path / "missing.yaml", cwd=tmp_path, check=2).stderr


def test_catalog_of_this_checkout_is_read(matrix):
    cands = fleet.candidates(None, REPO / "images")
    assert cands and all(c.source == "catalog" for c in cands)
    assert any(c.name == "cuda:cuda-12.8-py3.11" for c in cands)
