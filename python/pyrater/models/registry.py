"""The registry of model families: names to classes, in one place.

Every family module registers its class with :func:`register`;
:func:`get_model` turns a name (or a model object) into a model object.
"""

from __future__ import annotations

from typing import TypeVar

from .base import ModelFamily

__all__ = ["register", "get_model", "model_names", "family"]

_REGISTRY: dict[str, type[ModelFamily]] = {}
F = TypeVar("F", bound=type[ModelFamily])


def register(cls: F) -> F:
    """Class decorator: make ``cls`` available as ``get_model(cls.name)``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"a model family named {cls.name!r} is already registered ({_REGISTRY[cls.name].__name__})")
    _REGISTRY[cls.name] = cls
    return cls


def model_names() -> tuple[str, ...]:
    """Names of the registered families, in registration order."""
    return tuple(_REGISTRY)


def family(name: str) -> type[ModelFamily]:
    """The class registered as ``name``."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; choose one of {model_names()} or pass a model object")
    return _REGISTRY[name]


def get_model(model: str | ModelFamily) -> ModelFamily:
    """A model object from a name (``"dawid_skene"``, ``"hierarchical"``, ...) or a model object.

    Raises
    ------
    ValueError
        For an unknown name, listing the valid ones.
    """
    if isinstance(model, ModelFamily):
        return model
    if isinstance(model, str):
        return family(model)()
    raise ValueError(f"unknown model {model!r}; choose one of {model_names()} or pass a model object")
