"""Copies the data cudabox reads at run time (matrices/, templates/) into the built package as cudabox/_data/.

In a checkout they live at the repository root, where the editable install reads them (cudabox/paths.py);
a wheel has no repository root, so the build puts a copy inside the package. Everything else is declared in
pyproject.toml; MANIFEST.in carries the same directories into the sdist, so a wheel built from the sdist
has them too. images/ is a repository artefact (the catalog) and stays out.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = ("matrices", "templates")  # keep in sync with cudabox/paths.py BUNDLED


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the editable install reads the checkout's own directories
        for name in DATA:
            source, target = ROOT / name, Path(self.build_lib) / "cudabox" / "_data" / name
            if not source.is_dir():
                raise SystemExit(f"setup.py: {source} is missing: build from a cudabox checkout or its sdist")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": build_py_with_data})
