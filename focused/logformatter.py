"""Scrapy's log lines for pages, without the page's text.

At DEBUG, Scrapy's default log level, Scrapy logs every scraped item whole, pretty-printed: a
page's extracted text made 25 KB of log a page (66 MB for a 2,500-page crawl of the replay web,
0.9 KB a page without it) and cost 1-2 ms of process CPU a page (1,000 pages of the replay web,
two runs each: 28.5 and 31.9 s of CPU with the text, 27.5 and 29.6 s without). A page is
logged here with its fields but its text, which is in the store, replaced by its length.

``add_log_filter`` puts a filter on another library's logger (the project's one-line versions
of Scrapy's and scrapy-playwright's tracebacks for failures that are not bugs).
``SettingsWithoutSecrets`` keeps passwords out of Scrapy's line of overridden settings.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

from focused.errors import redact_uri
from focused.items import PageItem

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure


def _without_text(result: LogFormatterResult, item: Any) -> LogFormatterResult:
    """Scrapy's log entry of ``item``, the page's text replaced by its length. A page is logged
    as a dict, on one line: the item itself, a page stored without its text (a duplicate,
    noindex), was pretty-printed over a line a field."""
    if isinstance(item, PageItem):
        fields = dict(item)
        if item.get("text"):
            fields["text"] = f"<{len(item['text'])} characters>"
        result["args"] = {**result["args"], "item": fields}
    return result


class PageLogFormatter(LogFormatter):
    def scraped(
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult:
        return _without_text(super().scraped(item, response, spider), item)

    def dropped(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _without_text(super().dropped(item, exception, response, spider), item)

    def item_error(
        self,
        item: Any,
        exception: BaseException,
        response: Response | Failure | None,
        spider: Spider,
    ) -> LogFormatterResult:
        return _without_text(super().item_error(item, exception, response, spider), item)


def add_log_filter(name: str, log_filter: type[logging.Filter]) -> None:
    """Put a ``log_filter`` on the logger ``name``, once: loggers live as long as the process,
    and each crawler's component would add its own."""
    target = logging.getLogger(name)
    if not any(isinstance(f, log_filter) for f in target.filters):
        target.addFilter(log_filter())


# A password setting of Scrapy's, in the pretty-printed dict of the overridden settings: its
# value is a string literal, or a long one split into literals over lines (in parentheses).
_STRING = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
PASSWORD_SETTING = re.compile(rf"('HTTPAUTH_PASS': )(\(?(?:\s*(?:{_STRING}))+\)?)")


class SettingsWithoutSecrets(logging.Filter):
    """Scrapy's "Overridden settings" line with ``HTTPAUTH_PASS`` and the user and password of
    every URI in it (a feed's, a proxy's) hidden: a log is read and kept by more people than
    the credentials are meant for."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            isinstance(record.msg, str)
            and record.msg.startswith("Overridden settings")
            and isinstance(record.args, dict)
        ):
            shown = PASSWORD_SETTING.sub(r"\1'***'", str(record.args.get("settings", "")))
            record.args = {**record.args, "settings": redact_uri(shown)}
        return True
