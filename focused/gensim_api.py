"""The gensim names the project uses, imported without the rest of gensim and without
scipy.stats.

gensim's package ``__init__`` modules import every module of theirs: all of its models,
similarity indexes and corpus formats, for the five names a crawl uses. Here ``gensim``,
``gensim.corpora``, ``gensim.models`` and ``gensim.parsing`` are first made as packages whose
``__init__`` has not run, and only the modules that define those names are imported; a package's
``__init__`` runs the first time a name only it defines is asked for (``gensim.models.Word2Vec``),
so gensim still works whole for any other code in the process. Importing the names takes 0.2 s
less CPU so (1.15 against 0.93 s on a slow machine; BENCHMARKS.md, session 45).

Two modules that gensim's modules import as they load are kept waiting as well, for names that
a crawl calls rarely or never:

- ``scipy.stats`` (``matutils.entropy``, ``nmf.halfnorm``, ``poincare.spearmanr``;
  ``keyedvectors`` the module), about a third of a crawl's start-up (1.7 s of 4.9 on a slow
  machine);
- ``smart_open`` (``utils.open``, with which gensim saves and loads a model: a JOBDIR crawl's
  pause and resume), 0.09 s of a 2.4 s start-up.

While the modules load here, each is a stand-in whose names look up the real module when first
used; once they are loaded the stand-ins are gone, so anything importing them after gets the
real ones. When gensim or either module is already imported, gensim is imported as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

# The packages whose __init__ waits; each module the project uses lies in one of them.
_PACKAGES = ("gensim", "gensim.corpora", "gensim.models", "gensim.parsing")
_MODULES = (
    "gensim.matutils",
    "gensim.corpora.dictionary",
    "gensim.models.lsimodel",
    "gensim.models.tfidfmodel",
    "gensim.parsing.preprocessing",
)


# The modules kept waiting while gensim's modules load: their names are looked up when first used.
_WAITING = ("scipy.stats", "smart_open")


class _Deferred:
    """A name of a waiting module (a function, a distribution), looked up when first used."""

    def __init__(self, module: str, name: str) -> None:
        self._module = module
        self._name = name

    def _target(self) -> Any:
        return getattr(importlib.import_module(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._target(), attribute)


def _stand_in(module: str) -> types.ModuleType:
    def deferred(name: str) -> _Deferred:
        if name.startswith("__"):
            # The import system's own questions (__path__, __spec__): the stand-in is no package.
            raise AttributeError(name)
        return _Deferred(module, name)

    stand_in = types.ModuleType(module)
    stand_in.__getattr__ = deferred  # type: ignore[method-assign]
    return stand_in


class _Package(types.ModuleType):
    """A package of gensim's whose ``__init__`` runs when a name it alone defines is asked."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_focused_init_ran"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        submodule = f"{self.__name__}.{name}"
        if importlib.util.find_spec(submodule) is not None:  # `from gensim import utils`
            return importlib.import_module(submodule)
        self._focused_init_ran = True
        # The submodules already loaded are taken as they are, as by any __init__ run late.
        origin = self.__spec__.origin
        exec(compile(Path(origin).read_bytes(), origin, "exec"), self.__dict__)
        return getattr(self, name)


def _make_waiting_package(name: str) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    package = importlib.util.module_from_spec(spec)
    package.__class__ = _Package
    if name == "gensim":  # gensim.utils reads it as it loads
        source = Path(spec.origin).read_text(encoding="utf-8")
        package.__version__ = re.search(r"__version__ = '([^']+)'", source)[1]  # type: ignore[index]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)


def _import_gensim() -> None:
    if any(name in sys.modules for name in ("gensim", *_WAITING)):
        return  # imported as usual below
    stand_ins = {name: _stand_in(name) for name in _WAITING}
    sys.modules.update(stand_ins)
    try:
        for package in _PACKAGES:
            _make_waiting_package(package)
        for module in _MODULES:
            # Not importlib.import_module: `python -X importtime` reports what __import__ does.
            __import__(module)
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


_import_gensim()

from gensim import matutils  # noqa: E402
from gensim.corpora.dictionary import Dictionary  # noqa: E402
from gensim.models.lsimodel import LsiModel, Projection  # noqa: E402
from gensim.models.tfidfmodel import TfidfModel  # noqa: E402
from gensim.parsing.preprocessing import STOPWORDS  # noqa: E402

__all__ = ["STOPWORDS", "Dictionary", "LsiModel", "Projection", "TfidfModel", "matutils"]
