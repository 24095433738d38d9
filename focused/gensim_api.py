"""The gensim names the project uses, imported without scipy.stats.

Importing any of gensim imports all of its models, and three of them import names of
``scipy.stats`` as they load (``matutils.entropy``, ``nmf.halfnorm``, ``poincare.spearmanr``;
``keyedvectors`` the module), for functions no crawl calls. ``scipy.stats`` was about a third of
a crawl's start-up (1.7 s of 4.9 on a slow machine, ``python -X importtime``). While gensim
loads here, ``scipy.stats`` is a stand-in whose names look up the real module when first used;
once gensim is loaded the stand-in is gone, so anything importing ``scipy.stats`` after gets the
real one. When either is already imported, gensim is imported as usual.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _Deferred:
    """A name of ``scipy.stats`` (a function, a distribution), looked up when first used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _target(self) -> Any:
        return getattr(importlib.import_module("scipy.stats"), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._target(), attribute)


def _deferred(name: str) -> _Deferred:
    if name.startswith("__"):
        # The import system's own questions (__path__, __spec__): the stand-in is no package.
        raise AttributeError(name)
    return _Deferred(name)


def _import_gensim() -> None:
    if "gensim" in sys.modules or "scipy.stats" in sys.modules:
        return
    stand_in = types.ModuleType("scipy.stats")
    stand_in.__getattr__ = _deferred  # type: ignore[method-assign]
    sys.modules["scipy.stats"] = stand_in
    try:
        importlib.import_module("gensim")
    finally:
        if sys.modules.get("scipy.stats") is stand_in:
            del sys.modules["scipy.stats"]


_import_gensim()

from gensim import matutils  # noqa: E402
from gensim.corpora import Dictionary  # noqa: E402
from gensim.models import LsiModel, TfidfModel  # noqa: E402
from gensim.models.lsimodel import Projection  # noqa: E402
from gensim.parsing.preprocessing import STOPWORDS  # noqa: E402

__all__ = ["STOPWORDS", "Dictionary", "LsiModel", "Projection", "TfidfModel", "matutils"]
