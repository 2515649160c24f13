"""Build configuration that pyproject.toml cannot express: the client's native NTF scanner.

Everything else about the package lives in pyproject.toml. The extension is a single C file
with no dependency beyond the CPython headers; if no C compiler is available the install still
succeeds and `jumpgate.client` falls back to a slower pure-Python framing scan.
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jumpgate.client._ntfscan",
            sources=["jumpgate/client/_ntfscan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
