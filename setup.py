"""Packaging glue: ship the top-level ``envs/`` and ``baselines/`` specs inside the wheel.

The spec folders stay at the top of the repository (they are data, and a top-level package named
``baselines`` would clash with an existing one); a built wheel carries them as
``metabench/specs/<kind>/*.toml``, where ``metabench.harness.specfiles`` looks first. Everything
else about the package is in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SPEC_KINDS = ("envs", "baselines")


class BuildPyWithSpecs(build_py):
    """``build_py`` that also copies the spec folders into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the folders of the clone itself
        for kind in SPEC_KINDS:
            target = Path(self.build_lib) / "metabench" / "specs" / kind
            target.mkdir(parents=True, exist_ok=True)
            for source in sorted(Path(kind).glob("*.toml")):
                self.copy_file(str(source), str(target / source.name))


setup(cmdclass={"build_py": BuildPyWithSpecs})
