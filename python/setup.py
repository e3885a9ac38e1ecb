"""pip install ./python (no network: setuptools from the system, no pyproject build isolation).
A pip-installed package loads libloft.so from $LOFT_LIBRARY only (python/README.md)."""
from setuptools import setup

setup(
    name="loft",
    version="0.2.0",
    description="ctypes bindings over libloft and a PyTorch data pipe / gradient all-reduce for loft agents",
    packages=["loft"],
    python_requires=">=3.9",
)
