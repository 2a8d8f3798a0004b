"""The stack around the frameworks: driver mode, GPU coverage, cuDNN, Python and the base image.

`Chooser` answers two questions for the resolver: can this build run where
the project must run (`build_problem`), and what stack do these builds make
(`framework_stack` / `plain_stack`). Problems are one-line, fact-naming
strings; `EnvProblem` carries one out of a stack attempt.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..errors import InputError, Unsatisfiable
from ..knowledge.matrix import Matrix
from ..knowledge.model import Build, CudaImage, cc_tuple, cuda_version, minor_of
from .stack import FrameworkPick, Stack, Target

class EnvProblem(Exception):
    """A candidate combination that can't be turned into a stack; the message names why."""


def series_label(b: Build) -> str:
    return f"{b.framework} {'.'.join(b.version.split('.')[:2])}.x ({b.variant})"


@lru_cache(maxsize=8192)
def _allows(python, version: str) -> bool:
    """PythonSupport.allows, memoised (asked for every candidate build and Python)."""
    return python.allows(version)


def _pairing(companion, framework_version: str) -> str:
    """Say how a companion pairing is known: the wheel's exact pin, or not confirmed by the data."""
    pin = companion.pin or ""
    if pin.startswith("==") and "," not in pin:
        return f"pairs with {companion.framework} {framework_version} (its wheel pins {companion.framework}{pin})"
    declared = f"only declares {companion.framework}{pin}" if pin else f"declares no {companion.framework} pin"
    return f"paired with {companion.framework} {framework_version}, not confirmed: its wheel {declared}"


def _span(minors) -> str:
    """["11.8", "11.1", "11.4"] -> "11.1–11.8"; one minor as itself."""
    ordered = sorted(set(minors), key=cuda_version)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}–{ordered[-1]}"


def cudnn_words(spec: str) -> str:
    if spec.startswith("==") and "," not in spec:
        return f"pins cuDNN {spec[2:]}"
    return f"needs cuDNN {spec}"


class Chooser:
    def __init__(self, m: Matrix, request, wants=None):
        self.m, self.req = m, request
        self.wants = wants if wants is not None else m.frameworks.split(request.requirements)[0]
        self.user_python = SpecifierSet(request.python) if request.python else None
        self.host_problems = self._host_problems()
        self._floors: dict[str, str | None] = {}

    # ------------------------------------------------------------------ driver

    def driver_mode(self, minor: str) -> tuple[str | None, str]:
        """How a stack of CUDA `minor` runs on the request's driver: (mode, explanation) or (None, why not)."""
        d = self.req.driver
        if d is None:
            return "unknown", "no driver given: the image requires a driver that runs CUDA " + minor
        native = self.m.driver_cuda(d) or "?"
        if self.m.runs_natively(d, minor):
            return "native", f"driver {d} runs CUDA {native} natively (>= {minor})"
        major = self.m.majors.get(int(minor.split(".")[0]))
        if major and self.m.minor_compatible(d, minor):
            return "minor-compat", (f"driver {d} runs CUDA {native} natively; CUDA {minor} runs under minor-version "
                                    f"compatibility (CUDA {major.major}.x floor {major.minor_compat_driver}; "
                                    "no PTX JIT)")
        if self.req.allow_forward_compat:
            image = self._forward_compat_image(minor)
            if image is not None:
                return "forward-compat", (f"driver {d} (R{d.branch}) runs CUDA {minor} through forward "
                                          f"compatibility (cuda-compat in nvidia/cuda {image.cuda}; "
                                          "datacenter GPUs only)")
        tk = self.m.toolkit(minor)
        need = tk.min_driver if tk else None
        floor = f"; CUDA {major.major}.x's minor-version floor is {major.minor_compat_driver}" if major else ""
        return None, (f"CUDA {minor} needs driver >= {need or '?'} natively{floor}; "
                      f"driver {d} runs CUDA {native}")

    def _forward_compat_image(self, minor: str) -> CudaImage | None:
        d = self.req.driver
        if not self.req.gpus or not all(g.datacenter for g in self.req.gpus):
            return None
        for image in reversed(self.m.cuda_images):
            if minor_of(image.cuda) == minor and self._image_usable(image) and d.branch in \
                    image.forward_compat_branches:
                return image
        return None

    def _host_problems(self) -> list[str]:
        """A driver older than the first toolkit that knows a GPU can't drive that GPU at all."""
        d, out = self.req.driver, []
        if d is None:
            return out
        for g in self.req.gpus:
            first = next((tk for tk in self.m.toolkits if tk.can_compile(g.cc) and tk.min_driver), None)
            if first and d < first.min_driver:
                out.append(f"{g.name} ({g.sm}) needs a driver >= {first.min_driver} (CUDA {first.version} is the "
                           f"first toolkit that knows {g.sm}); driver {d} predates it")
        return out

    # ------------------------------------------------------------------ one build

    def pythons(self, builds) -> list[str]:
        allowed = [p for p in self.m.known_pythons if all(_allows(b.python, p) for b in builds)]
        if self.user_python is not None:
            allowed = [p for p in allowed if Version(p) in self.user_python]
        return allowed

    def cuda_minors(self, b: Build) -> list[str]:
        """The CUDA minors a stack with this build can have (rules 3 and 4; `Matrix.stack_minors`)."""
        return self.m.stack_minors(b)

    def _allowed_minors(self, b: Build) -> list[str]:
        minors = self.cuda_minors(b)
        if self.req.cuda:
            minors = [x for x in minors if cuda_version(x) in SpecifierSet(self.req.cuda)]
        return minors

    def _cuda_problem(self, b: Build) -> str | None:
        minors = self.cuda_minors(b)
        if not minors:
            return f"{series_label(b)} was built with CUDA {b.cuda}{self._soname_note(b)}; no toolkit in the " \
                   "matrix provides it"
        if self.req.cuda and not self._allowed_minors(b):
            return f"{series_label(b)} runs on CUDA {_span(minors)}{self._soname_note(b)}, outside cuda " \
                   f"{self.req.cuda}"
        return None

    def build_problem(self, b: Build) -> tuple[str, str] | None:
        """Why this build can't be part of the stack, as (kind, one line), or None."""
        label = series_label(b)
        if self.host_problems:
            return "host", self.host_problems[0]
        if not self.pythons([b]):
            return "python", f"{label} supports Python {b.python.describe()}, not {self.req.python}"
        cuda_problem = self._cuda_problem(b)
        if cuda_problem:
            return "cuda", cuda_problem
        if self.req.cudnn and b.wheels_cuda:
            if b.cudnn is None:
                return "cudnn", (f"{label} bundles its own cuDNN (not in the matrix); "
                                 f"cannot honour cudnn {self.req.cudnn}")
            if not self._cudnn_choices([b.cudnn, self.req.cudnn], b.cuda_major):
                floor = self._floor_of(f"{b.cudnn},{self.req.cudnn}")
                return "cudnn", (f"{label} {cudnn_words(b.cudnn)}, outside cudnn {self.req.cudnn}"
                                 + (f" on the target GPUs ({floor})" if floor else ""))
        if not b.wheels_cuda and self.req.flavour == "slim":
            return "flavour", f"{label} needs a system CUDA {b.cuda} (no CUDA wheels); flavour slim has none"
        stack_minor = min(self._allowed_minors(b), key=cuda_version) if not b.wheels_cuda else self._minor(b)
        mode, why = self.driver_mode(stack_minor)
        if mode is None:
            return "driver", f"{label}: {why}"
        problem = self._coverage_problem(b, mode)
        return ("coverage", problem) if problem else None

    def _minor(self, b: Build) -> str:
        """A wheel build's stack CUDA: its own, or with `cuda:` given, the newest allowed (rule 3)."""
        allowed = self._allowed_minors(b)
        if not self.req.cuda or b.cuda in allowed:
            return b.cuda
        return max(allowed, key=cuda_version)

    def _coverage_problem(self, b: Build, mode: str) -> str | None:
        jit = mode != "minor-compat"
        for g in self.req.gpus:
            if b.arch.coverage(g.cc, ptx_jit=jit):
                continue
            text = f"{series_label(b)} carries {b.arch.describe()}: no code for {g.name} ({g.sm})"
            if not jit and b.arch.coverage(g.cc, ptx_jit=True):
                text += " without PTX JIT, which minor-version compatibility lacks (upgrade the driver)"
            return text
        return None

    def _cudnn_choices(self, specs, cuda_major: int) -> list[str]:
        """Known cuDNN builds with a wheel for this CUDA major that satisfy every spec, newest first."""
        exact = [spec[2:] for spec in specs if spec and spec.startswith("==") and "," not in spec and "*" not in spec]
        if exact:  # a framework's exact pin is itself evidence that its wheel exists
            v = exact[0]
            return [v] if all(Version(v) in SpecifierSet(s) for s in specs if s) and not self.cudnn_floor(v) else []
        wheel = self.m.majors[cuda_major].tag
        out = []
        for c in reversed(self.m.cudnn_builds()):
            if c.wheels and wheel not in c.wheels:
                continue
            if all(Version(c.version) in SpecifierSet(s) for s in specs if s) and not self.cudnn_floor(c.version):
                out.append(c.version)
        return out

    def _floor_of(self, spec: str) -> str | None:
        """The GPU floor that rules out the newest cuDNN build matching `spec`, if one does."""
        if not self.req.gpus:
            return None
        if spec not in self._floors:
            self._floors[spec] = self._find_floor(spec)
        return self._floors[spec]

    def _find_floor(self, spec: str) -> str | None:
        matching = [c.version for c in reversed(self.m.cudnn_builds()) if Version(c.version) in SpecifierSet(spec)]
        return next((f for f in map(self.cudnn_floor, matching) if f), None)

    def cudnn_floor(self, version: str) -> str | None:
        """Why a cuDNN build can't run on a target GPU (its series' min_cc, cudnn.yaml), or None."""
        series = self.m.cudnn_series(version)
        if series is None or not series.min_cc:
            return None
        low = [g for g in self.req.gpus if cc_tuple(g.cc) < cc_tuple(series.min_cc)]
        if not low:
            return None
        return (f"cuDNN {series.series} needs compute capability >= {series.min_cc}; "
                f"{low[0].name} is {low[0].cc} ({series.prov.origin})")

    # ------------------------------------------------------------------ images

    def _image_usable(self, image: CudaImage) -> bool:
        return image.lifecycle == "supported" or (image.lifecycle == "end-of-life" and not self.req.refuse_eol_images)

    def pick_image(self, minors: list[str], cudnn_series: str | None, flavour: str) -> tuple[CudaImage, str, str]:
        """Newest usable nvidia/cuda release among `minors` (in order), newest apt-based OS -> (image, os, tag)."""
        refused = []
        for minor in minors:
            images = [i for i in reversed(self.m.cuda_images) if minor_of(i.cuda) == minor]
            for image in images:
                if not self._image_usable(image):
                    refused.append(f"nvidia/cuda {image.cuda} is {image.lifecycle}"
                                   + ("" if image.lifecycle == "deleted" else " (refuse_eol_images is set)"))
                    continue
                oses = image.cudnn_os if cudnn_series else image.os
                if cudnn_series:
                    have = image.cudnn
                    if not have or have.split(".")[0] != cudnn_series.split(".")[0] or \
                            Version(have) < Version(cudnn_series):
                        refused.append(f"nvidia/cuda {image.cuda} has cuDNN {have or 'none'}, "
                                       f"not {cudnn_series.split('.')[0]}.x >= {cudnn_series}")
                        continue
                    if self.req.cudnn and Version(have) not in SpecifierSet(self.req.cudnn):
                        refused.append(f"nvidia/cuda {image.cuda} has cuDNN {have}, outside cudnn {self.req.cudnn}")
                        continue
                # images.yaml lists the OSes the templates support (apt-based), newest first
                os_name = next((o for o in self.m.os_info if o in oses), None)
                if os_name is None:
                    refused.append(f"nvidia/cuda {image.cuda} has no {flavour} tag for an OS in images.yaml's os list"
                                   + (" with cuDNN" if cudnn_series else ""))
                    continue
                return image, os_name, image.tag(flavour, os_name, cudnn=bool(cudnn_series))
            if not images:
                refused.append(f"no nvidia/cuda image for CUDA {minor}")
        raise EnvProblem("; ".join(dict.fromkeys(refused)) or "no nvidia/cuda image fits")

    # ------------------------------------------------------------------ python + base

    def _python_and_base(self, pythons: list[str], flavour: str, tag=None, os_name=None):
        """Choose the Python (newest allowed) and how it gets into the image; pick the slim base."""
        if not pythons:
            raise EnvProblem("no Python version satisfies every constraint")
        if flavour == "slim":
            candidates = [(s.image, s.os) for s in self.m.slim]
            if not candidates:
                raise EnvProblem("images.yaml lists no slim base image")
        else:
            candidates = [(tag, os_name)]
        install = self.req.python_install
        if install in ("auto", "os"):  # the base's own Python when it is allowed: nothing downloaded at build time
            own = [(Version(self.m.os_info[o].python), self.m.os_info[o].python, b, o) for b, o in candidates
                   if o in self.m.os_info and self.m.os_info[o].python in pythons]
            if own:
                _, python, base, os_id = max(own, key=lambda x: x[0])
                return python, "os", base, os_id
        for python in reversed(pythons):
            for base, os_id in candidates:
                os_python = self.m.os_info[os_id].python if os_id in self.m.os_info else None
                if install in ("auto", "os") and os_python == python:
                    return python, "os", base, os_id
            if install != "os":
                base, os_id = candidates[0]
                return python, "uv", base, os_id
        offered = ", ".join(f"{b} ({self.m.os_info[o].python if o in self.m.os_info else '?'})"
                            for b, o in candidates)
        raise EnvProblem(f"python_install: os, but no base image ships Python {' or '.join(pythons)} "
                         f"(bases: {offered})")

    # ------------------------------------------------------------------ stacks

    def _targets(self):
        return tuple(Target(gpu=g.name, cc=g.cc, sm=g.sm, peak_fp16_tflops=g.peak_fp16_tflops,
                            peak_bandwidth_gbs=g.peak_bandwidth_gbs) for g in self.req.gpus)

    def _requirement(self, minor: str, mode: str, image: CudaImage | None) -> tuple[str, str | None]:
        tk = self.m.toolkit(minor)
        major = self.m.majors.get(int(minor.split(".")[0]))
        if mode == "forward-compat" and image is not None and image.require:
            return image.require, f"R{min(image.forward_compat_branches)} (forward compatibility)"
        if mode == "minor-compat" and major:
            return f"cuda>={major.major}.0", str(major.minor_compat_driver)
        return f"cuda>={minor}", str(tk.min_driver) if tk and tk.min_driver else None

    def framework_stack(self, builds: list[Build], companions, others) -> Stack:
        why = []
        system = [b for b in builds if not b.wheels_cuda]
        flavour = self.req.flavour if self.req.flavour != "auto" else ("runtime" if system else "slim")
        image = os_name = tag = None
        pin = False
        if system:
            b = system[0]
            major = b.cuda.split(".")[0]
            try:
                image, os_name, tag = self.pick_image(self._allowed_minors(b), b.system_cudnn, flavour)
            except EnvProblem as exc:
                raise EnvProblem(f"{exc}{self._soname_note(b)}") from None
            minor = minor_of(image.cuda)
            cudnn = image.cudnn
            why.append(f"{b.framework} {b.version} was tested with CUDA {b.cuda} / cuDNN {b.system_cudnn} and "
                       f"needs them from the system: nvidia/cuda {image.cuda} (CUDA {major}.x minor-version "
                       f"compatible, cuDNN {cudnn})" + self._soname_note(b, short=True)
                       + (f"; within cuda {self.req.cuda}" if self.req.cuda else ""))
        else:
            minor, pin = self._wheel_minor(builds)
            if pin:
                name = self.m.majors[builds[0].cuda_major].wheel("cuda-runtime")
                runtime_pin = (name, f"{minor}.*")
                why.append(f"CUDA {minor}: newest minor within cuda {self.req.cuda} that the wheels' range "
                           f"allows ({', '.join(series_label(b) for b in builds)}); {name} pinned to it")
            choices = self._cudnn_choices([b.cudnn for b in builds] + [self.req.cudnn], builds[0].cuda_major)
            if not any(b.cudnn for b in builds) and not self.req.cudnn:
                cudnn = None
            elif not choices:
                floors = sorted({f for b in builds if b.cudnn for f in [self._floor_of(b.cudnn)] if f})
                raise EnvProblem("no known cuDNN build satisfies " + ", ".join(
                    f"{series_label(b)} ({b.cudnn})" for b in builds if b.cudnn)
                    + (" on the target GPUs: " + "; ".join(floors) if floors else ""))
            else:
                cudnn = choices[0]
            if flavour != "slim":  # the wheels bring cuDNN; the image brings the system CUDA (and nvcc)
                image, os_name, tag = self.pick_image([minor], None, flavour)
        mode, driver_why = self.driver_mode(minor)
        if mode is None:
            raise EnvProblem(driver_why)
        why.append(driver_why)
        if mode == "forward-compat" and image is None:
            flavour = "runtime"
            image, os_name, tag = self.pick_image([minor], None, flavour)
            why.append("forward compatibility needs NVIDIA's cuda-compat libraries: runtime flavour")
        python, install, base, os_id = self._python_and_base(self.pythons(builds), flavour, tag, os_name)

        packages, requirements, indexes, sources = {}, [], [], {}
        if not system and pin:
            packages[runtime_pin[0]] = runtime_pin[1]
            requirements.append(f"{runtime_pin[0]}=={runtime_pin[1]}")
        for b in builds:
            pip_name, pkg_version = b.requirement.split("==", 1)
            packages[pip_name.split("[")[0]] = pkg_version  # by distribution name (paddlepaddle-gpu, mxnet-cu112)
            requirements.append(b.requirement)
            if b.index and b.index not in indexes:
                indexes.append(b.index)
            if b.index:  # the framework's wheels come from its variant index, and only from there
                sources[b.requirement.split("==", 1)[0].split("[", 1)[0]] = b.index
            want = self._want(b)
            how = f"newest release matching {want.describe()}" if str(want.spec) else \
                "newest release that satisfies everything"
            why.append(f"{b.framework} {b.version} ({b.variant}): {how}; CUDA {b.cuda} variant"
                       + (" (PyPI's default)" if b.pypi_default else f" from {b.index}"))
        for name, companion, torch in companions:
            version = companion.version
            full = version if torch.pypi_default else f"{version}+{torch.variant}"
            packages[name] = full
            requirements.append(f"{name}=={full}")
            if torch.index and not torch.pypi_default:
                sources[name] = torch.index
            why.append(f"{name} {version}: " + _pairing(companion, torch.version))
        if cudnn and flavour == "slim":
            wheel = self.m.majors[builds[0].cuda_major].cudnn_wheel
            packages[wheel] = cudnn
            requirements.append(f"{wheel}=={cudnn}")
            pinners = [series_label(b) for b in builds if b.cudnn]
            floor = next((f for b in builds if b.cudnn for f in [self._floor_of(b.cudnn)] if f), None)
            why.append(f"cuDNN {cudnn}: " + (f"what {' and '.join(pinners)} allow" if pinners else "requested")
                       + (f" and the target GPUs run (newer: {floor})" if floor else ""))
        for g in self.req.gpus:
            hows = [f"{b.framework}: {b.arch.coverage(g.cc, ptx_jit=mode != 'minor-compat')}" for b in builds]
            why.append(f"{g.name} ({g.sm}): " + ", ".join(hows))
        if not self.req.gpus:
            why.append("no target GPUs given: GPU coverage not checked (add --gpu or gpus:)")
        why.append(self._python_why(python, install, builds))
        why.append(self._base_why(flavour, base, builds))
        requirement, min_driver = self._requirement(minor, mode, image)
        picks = tuple(FrameworkPick(b.framework, b.version, b.variant, b.arch.describe(), b.prov.status)
                      for b in builds)
        return Stack(python=python, python_install=install, cuda=minor, cudnn=cudnn, flavour=flavour,
                     base_image=base, os=os_id, packages=packages, requirements=tuple(requirements),
                     index_urls=tuple(indexes), requirement=requirement, min_driver=min_driver, driver_mode=mode,
                     targets=self._targets(), frameworks=picks, why=tuple(why + self._eol(image)),
                     warnings=tuple(self._warnings(install, python) + self._eol(image)),
                     os_packages=self._os_packages(builds), indexes=sources)

    def _os_packages(self, builds) -> tuple[str, ...]:
        names = [p for b in builds if (fw := self.m.frameworks.get(b.framework)) for p in fw.system_packages]
        return tuple(dict.fromkeys(names))

    def _wheel_minor(self, builds: list[Build]) -> tuple[str, bool]:
        """The stack CUDA of wheel builds, and whether the runtime wheel must be pinned to honour `cuda:`."""
        pinned = [b for b in builds if b.cuda_runtime and b.cuda_runtime.startswith("==")]
        default = (pinned[0] if pinned else max(builds, key=lambda b: cuda_version(b.cuda))).cuda
        if not self.req.cuda:
            return default, False
        common = set.intersection(*(set(self._allowed_minors(b)) for b in builds))
        if not common:
            raise EnvProblem(f"no CUDA minor within cuda {self.req.cuda} suits "
                             + " and ".join(f"{series_label(b)} (CUDA {_span(self.cuda_minors(b))})" for b in builds))
        if default in common:
            return default, False
        return max(common, key=cuda_version), True

    def _soname_note(self, b: Build, short: bool = False) -> str:
        if not b.sonames:
            return ""
        lacking = [tk.version for tk in self.m.toolkits if tk.major == b.cuda_major and tk.key > cuda_version(b.cuda)
                   and self.m.missing_sonames(tk.version, b.sonames)]
        if not lacking:
            return ""
        names = ", ".join(s for s in b.sonames if self.m.missing_sonames(lacking[0], [s]))
        if short:
            return f"; not CUDA {_span(lacking)}: no {names} there"
        series = ".".join(b.version.split(".")[:2])
        return f" ({b.framework} {series} loads {names}, which CUDA {_span(lacking)} don't ship)"

    def _want(self, b: Build):
        return self.wants[b.framework]

    def _python_why(self, python, install, builds) -> str:
        how = "via uv (the base's system Python differs)" if install == "uv" else "the base image's own Python"
        if self.user_python is not None:
            return f"Python {python}: requested ({self.req.python}); {how}"
        if builds:
            support = ", ".join(f"{series_label(b)} {b.python.describe()}" for b in builds)
            if install == "os":
                return f"Python {python}: the base image's own Python, supported by {support}"
            return (f"Python {python}: no base image ships a Python that {support} support; the newest they "
                    f"support, installed by uv")
        return f"Python {python}: {how}"

    def _base_why(self, flavour, base, builds) -> str:
        if flavour == "slim":
            src = "the frameworks' wheels" if builds else "NVIDIA's CUDA wheels"
            return f"base {base}: slim, CUDA comes from {src} (no second CUDA copy)"
        return f"base {base}: {flavour} flavour, CUDA from the nvidia/cuda image"

    def _eol(self, image: CudaImage | None) -> list[str]:
        """Rule 8: an end-of-life image is used, and said so (in the why and the lock's warnings)."""
        if image is None or image.lifecycle != "end-of-life":
            return []
        return [f"nvidia/cuda {image.cuda} is end-of-life: NVIDIA deletes its tags about six months after EOL "
                "(set refuse_eol_images: true / --refuse-eol-images to refuse such images)"]

    def _warnings(self, install, python) -> list[str]:
        out = []
        if install == "uv":
            out.append(f"Python {python} is installed by uv at build time (python-build-standalone downloads); "
                       "pin `python:` to the base's own Python to avoid that")
        return out

    def plain_stack(self, others) -> Stack:
        """Rule 6: no framework, a `cuda:` spec -> NVIDIA's CUDA runtime + NVRTC (+ cuDNN) of that version."""
        if not self.req.cuda:
            raise InputError(f"nothing to resolve: require a framework ({', '.join(self.m.frameworks.names)}) "
                             "or set a CUDA version (cuda: \"12.8\" / --cuda 12.8)")
        problems = list(self.host_problems)
        spec = SpecifierSet(self.req.cuda)
        toolkits = [tk for tk in reversed(self.m.toolkits) if tk.key in spec]
        if not toolkits:
            known = ", ".join(tk.version for tk in self.m.toolkits)
            problems.append(f"no CUDA toolkit matches cuda {self.req.cuda} (known: {known})")
        for tk in toolkits if not problems else ():
            try:
                return self._plain(tk, others)
            except EnvProblem as exc:
                problems.append(str(exc))
        raise Unsatisfiable("no stack satisfies the request", problems)

    def _plain(self, tk, others) -> Stack:
        flavour = self.req.flavour if self.req.flavour != "auto" else "slim"
        mode, driver_why = self.driver_mode(tk.version)
        if mode is None:
            raise EnvProblem(driver_why)
        for g in self.req.gpus:
            if not tk.can_compile(g.cc):
                first = next((t.version for t in self.m.toolkits if t.can_compile(g.cc)), None)
                raise EnvProblem(f"CUDA {tk.version} cannot compile {g.sm} ({g.name})"
                                 + (f"; CUDA {first} is the first that can" if first else ""))
        major = self.m.majors[tk.major]
        why = [f"CUDA {tk.version}: newest toolkit matching cuda {self.req.cuda} that runs here", driver_why]
        why += [f"{g.name} ({g.sm}): CUDA {tk.version} compiles {g.sm}" for g in self.req.gpus]
        cudnn = None
        image = os_name = tag = None
        packages, requirements = {}, []
        if flavour == "slim":
            choices = self._cudnn_choices([self.req.cudnn], tk.major) if self.req.cudnn else []
            if self.req.cudnn and not choices:
                raise EnvProblem(f"no cuDNN wheel for CUDA {tk.major} matches cudnn {self.req.cudnn}")
            for component in ("cuda-runtime", "cuda-nvrtc"):
                name = major.wheel(component)
                packages[name] = f"{tk.version}.*"
                requirements.append(f"{name}=={tk.version}.*")
            if choices:
                cudnn = choices[0]
                packages[major.cudnn_wheel] = cudnn
                requirements.append(f"{major.cudnn_wheel}=={cudnn}")
                why.append(f"cuDNN {cudnn}: newest {major.cudnn_wheel} matching cudnn {self.req.cudnn}")
        else:
            need = None
            if self.req.cudnn:
                need = self.req.cudnn.lstrip("=<>~!").rstrip(".*") or None
            image, os_name, tag = self.pick_image([tk.version], need, flavour)
            cudnn = image.cudnn if need else None
        if mode == "forward-compat" and image is None:
            flavour = "runtime"
            image, os_name, tag = self.pick_image([tk.version], None, flavour)
        pythons = [p for p in self.m.known_pythons if self.user_python is None or Version(p) in self.user_python]
        if self.user_python is None:
            pythons = self._os_pythons(flavour, os_name) or pythons
        python, install, base, os_id = self._python_and_base(pythons, flavour, tag, os_name)
        why.append(self._python_why(python, install, []))
        why.append(self._base_why(flavour, base, []))
        if not self.req.gpus:
            why.append("no target GPUs given: arch coverage not checked (add --gpu or gpus:)")
        requirement, min_driver = self._requirement(tk.version, mode, image)
        return Stack(python=python, python_install=install, cuda=tk.version, cudnn=cudnn, flavour=flavour,
                     base_image=base, os=os_id, packages=packages, requirements=tuple(requirements),
                     index_urls=(), requirement=requirement, min_driver=min_driver, driver_mode=mode,
                     targets=self._targets(), frameworks=(), why=tuple(why + self._eol(image)),
                     warnings=tuple(self._warnings(install, python) + self._eol(image)))

    def _os_pythons(self, flavour, os_name) -> list[str]:
        """With no framework to constrain it, prefer the base's own Python (nothing to download)."""
        if flavour == "slim":
            oses = [s.os for s in self.m.slim[:1]]
        else:
            oses = [os_name]
        return [self.m.os_info[o].python for o in oses if o in self.m.os_info]
