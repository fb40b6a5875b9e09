"""Names that moved keep importing from where they were, with a DeprecationWarning naming their new home.

A target is ``"package.module:attribute"`` (an attribute path: ``WaitStatus.SUCCESS`` reads a member). Two
forms: :func:`moved_attributes` gives a module the ``__getattr__`` that serves its moved names (the module
itself stays), :func:`moved_module` fills a module that is only an old path with every name it had.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def resolve(target: str) -> Any:
    """The object ``"package.module:attribute.path"`` names."""
    module, _, path = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in path.split("."):
        found = getattr(found, part)
    return found


def moved_attributes(module: str, moves: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving each moved name of ``module`` from its target, warned."""
    def __getattr__(name: str) -> Any:
        if name not in moves:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, path = moves[name].partition(":")
        warnings.warn(f"{module}.{name} is deprecated: import it from {home}" + (f" (as {path})" if path != name
                                                                                  else ""),
                      DeprecationWarning, stacklevel=2)
        return resolve(moves[name])
    return __getattr__


def moved_module(module: str, moves: Mapping[str, str], namespace: dict[str, Any]) -> None:
    """Fill an old module's ``namespace`` with its names from where they live now, and warn its importer once."""
    namespace.update({name: resolve(target) for name, target in moves.items()})
    namespace["__all__"] = sorted(moves)
    homes = sorted({target.partition(":")[0] for target in moves.values()})
    # stacklevel 3: past this function and the old module, to the code that imports it.
    warnings.warn(f"{module} is deprecated: import from {', '.join(homes)}", DeprecationWarning, stacklevel=3)
