"""Package attributes imported on first use (PEP 562 module ``__getattr__``).

A package whose ``__init__`` re-exports names from heavy modules would load them all on
``import``; with :func:`lazy_attributes` it loads each defining module only when one of
its names is first read, then caches the value in the package's namespace (so later
reads are plain attribute reads). Type checkers see the names through the package's
``if TYPE_CHECKING:`` imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, defined_in: Mapping[str, str], subpackages: Collection[str] = ()
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``defined_in`` is read from
    the module it maps to (absolute, or relative to ``package`` when it starts with
    ``.``), a name of ``subpackages`` is that subpackage itself. Any other name raises
    ``AttributeError``, as a plain module would."""

    def __getattr__(name: str) -> Any:
        if name in subpackages:
            value: Any = importlib.import_module(f"{package}.{name}")
        else:
            module = defined_in.get(name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
