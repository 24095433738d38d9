"""itemadapter imported without pydantic as the project loads (focused.without_pydantic)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

AS_SCRAPY_LOADS_THE_PROJECT = """
import sys
import focused.settings  # what Scrapy imports first of the project
from itemadapter import ItemAdapter, _imports
assert "pydantic" not in sys.modules and _imports.pydantic is None

from focused.items import PageItem
assert ItemAdapter.is_item(PageItem()) and ItemAdapter.is_item({"url": "u"})

# Any other code gets the real pydantic.
import pydantic
class Record(pydantic.BaseModel):
    url: str
assert Record(url="u").url == "u"
assert not ItemAdapter.is_item(Record(url="u"))  # the price: no pydantic items here
print("ok")
"""

PYDANTIC_FIRST = """
import sys, pydantic
import focused.settings
from itemadapter import ItemAdapter, _imports
assert _imports.pydantic is sys.modules["pydantic"]
class Record(pydantic.BaseModel):
    url: str
assert ItemAdapter.is_item(Record(url="u"))
print("ok")
"""


@pytest.mark.parametrize("script", [AS_SCRAPY_LOADS_THE_PROJECT, PYDANTIC_FIRST])
def test_itemadapter_loads_without_pydantic_unless_pydantic_is_there_first(script):
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr[-3000:]


def test_a_scrapy_command_imports_no_pydantic():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "scrapy", "version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines()}
    assert "itemadapter" in imported and "pydantic_core" not in imported
