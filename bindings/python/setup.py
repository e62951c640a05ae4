# SPDX-License-Identifier: MIT
# The extension is built by cffi from quadgrid/_build.py (which finds the
# repository's sources); everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["quadgrid/_build.py:ffibuilder"])
