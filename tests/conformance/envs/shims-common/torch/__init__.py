"""Import-time stand-in for torch in the SGLang conformance environments (not a real torch).

SGLang's argument parser and ServerArgs import torch (and, through sglang.srt.utils, much of SGLang that touches
torch at import time: custom-op registration, nn.Module subclasses, distributed enums), but parsing a command line
and validating the record never compute with it. PyPI's Linux x86_64 torch wheels are CUDA builds whose NVIDIA
libraries the package registry here does not serve, and the CPU build is not on PyPI: so torch itself is a stand-in.
Every name resolves to a placeholder that is falsy (`torch.cuda.is_available()` is False: a machine without an
accelerator, as the CPU build answered), callable (a decorator applied at import keeps the function), usable as a
base class, and 0 as a number. Back ends real torch lacks (`torch.npu`) stay absent: SGLang detects them with
hasattr.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

__version__ = "2.13.0"


class _Stub:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Stub(f"{self._name}.{attr}")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        # A decorator applied at import (torch.compile, custom_op, no_grad()) keeps the function it wraps.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _Stub):
            return args[0]
        return _Stub(f"{self._name}()")

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    __index__ = __int__
    __len__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __iter__(self) -> Any:
        return iter(())

    def __mro_entries__(self, _bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (_base_class(self._name),)

    def __or__(self, other: object) -> Any:
        return Any

    __ror__ = __or__

    def __getitem__(self, item: object) -> Any:
        return Any

    def __repr__(self) -> str:
        return f"<torch stand-in {self._name}>"


_BASES: dict[str, type] = {}


def _base_class(name: str) -> type:
    # A stand-in base class per torch name (nn.Module, autograd.Function): subclasses stay consistent with ABC.
    if name not in _BASES:
        _BASES[name] = type(name.rsplit(".", 1)[-1], (), {"__init__": lambda self, *a, **k: None})
    return _BASES[name]


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


# Types that other packages (tvm-ffi, transformers) test values against with isinstance: real classes, never
# instantiated.
class Tensor:
    pass


class dtype:  # noqa: N801 - torch's name
    pass


class device:  # noqa: N801 - torch's name
    pass


class Size(tuple[int, ...]):
    pass


class Generator:
    pass


# Back ends real torch does not have: SGLang asks hasattr(torch, "npu") to detect them.
_ABSENT = frozenset({"npu", "hpu", "musa", "mlu", "gcu", "sdaa"})


def __getattr__(attr: str) -> Any:
    if attr.startswith("__") or attr in _ABSENT:
        raise AttributeError(attr)
    return _Stub(f"{__name__}.{attr}")
