"""itemadapter imported without pydantic: 0.2 s off the start of every command.

itemadapter imports pydantic as it loads, when pydantic is installed, only to tell pydantic
models apart as items; this project's items are Scrapy Items and dicts. pydantic comes with the
encoder's extra (transformers needs typer, which needs pydantic), and importing it and its v1
took 0.2 s of every ``scrapy`` command's start, a crawl's included (BENCHMARKS.md, session 46).
The settings module imports this one, so it runs as Scrapy loads the project's settings,
before Scrapy's commands import itemadapter. While itemadapter loads here, ``import pydantic``
fails; once it is loaded, pydantic imports as usual for any other code. An ``ItemAdapter`` of
this process then takes a pydantic model for no item. Nothing is done when itemadapter or
pydantic is already imported.
"""

from __future__ import annotations

import sys


def _import_itemadapter_without_pydantic() -> None:
    if "itemadapter" in sys.modules or "pydantic" in sys.modules:
        return
    sys.modules["pydantic"] = None  # type: ignore[assignment]  # import pydantic: ImportError
    try:
        import itemadapter  # noqa: F401
    finally:
        if "pydantic" in sys.modules and sys.modules["pydantic"] is None:
            del sys.modules["pydantic"]


_import_itemadapter_without_pydantic()
