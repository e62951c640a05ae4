# SPDX-License-Identifier: MIT
# The extension is built by cffi from quadgrid/_build.py (which finds the
# repository's sources); the version is the C library's own, read from
# include/quadgrid.h; everything else is in pyproject.toml.
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "quadgrid"))
from _build import header_version  # noqa: E402

setup(version=header_version(), cffi_modules=["quadgrid/_build.py:ffibuilder"])
