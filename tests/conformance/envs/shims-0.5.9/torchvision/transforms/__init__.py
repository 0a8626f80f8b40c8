"""See torchvision/__init__.py: names resolve, calling them raises."""

from typing import Any, NoReturn


def __getattr__(name: str) -> Any:
    def unavailable(*_args: object, **_kwargs: object) -> NoReturn:
        raise RuntimeError(f"torchvision.transforms.{name}: stand-in only (SpecServe conformance environment)")

    return unavailable
