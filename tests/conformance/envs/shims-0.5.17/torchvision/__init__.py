"""Import-time stand-in for torchvision in the SGLang 0.5.17 conformance environment (not a real torchvision).

SGLang 0.5.17 imports `torchvision.io.decode_jpeg` at module level in `sglang.srt.utils.common`, and transformers 5
(which it pins) finds this package with importlib and then imports image helpers from `torchvision.transforms...`
while `sglang.srt.server_args` is imported. Argument parsing and ServerArgs never call any of them. PyPI's
torchvision wheels for Linux x86_64 are CUDA builds that cannot load beside the CPU torch, so every
`torchvision.*` module is a stub here: any name resolves (as a class-like placeholder, so enum members and base
classes work at import time), and calling one raises.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, NoReturn

__version__ = "0.26.0"


class _Stub:
    """A name from the stand-in: attribute access resolves, calling raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Stub:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self._name}.{attr}")

    def __call__(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise RuntimeError(f"{self._name}: torchvision stand-in only (SpecServe conformance environment)")

    def __mro_entries__(self, _bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


sys.meta_path.insert(0, _Finder())


def __getattr__(attr: str) -> Any:
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Stub(f"{__name__}.{attr}")
