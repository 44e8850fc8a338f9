"""Package list for the `kafkette` namespace, whose subpackages live in top-level folders.

`operator/` has no `__init__.py` on purpose: a regular package of that name at
the repository root would shadow the standard library's `operator` module for
any Python started there. It is a namespace package, listed here explicitly.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = {"broker": "kafkette.broker", "operator": "kafkette.operator", "pipeline": "kafkette.pipeline"}

packages = []
for folder, package in FOLDERS.items():
    packages.append(package)
    packages.extend(f"{package}.{sub}" for sub in find_namespace_packages(folder, exclude=["*__pycache__*"]))

setup(packages=packages)
