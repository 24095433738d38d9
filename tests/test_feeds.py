"""The crawl's feed export (``-o``/``-O``, FEEDS; ``focused.feeds``), without a crawl."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from io import BytesIO

from scrapy.exporters import CsvItemExporter
from scrapy.settings import Settings
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

from focused.feeds import FeedExporter
from focused.items import PageItem
from focused.storage import PAGE_FIELDS


def csv_header(feed: dict) -> list[str]:
    """The header line of a CSV feed with these options, as Scrapy's exporter writes it."""
    output = BytesIO()
    exporter = CsvItemExporter(output, fields_to_export=feed["fields"])
    exporter.start_exporting()
    exporter.export_item(PageItem(url="http://a.test/", title="A"))
    exporter.finish_exporting()
    return output.getvalue().decode().splitlines()[0].split(",")


def test_a_csv_feed_has_the_columns_of_a_page_record(tmp_path):
    """A CSV feed's columns were the item's declared fields, the transient ``scores`` too:
    every -O pages.csv ended with an empty column that no page record has."""
    uri = str(tmp_path / "pages.csv")
    crawler = get_crawler(settings_dict={"FEEDS": {uri: {"format": "csv"}}})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == list(PAGE_FIELDS)


def test_a_feed_given_its_fields_keeps_them(tmp_path):
    uri = str(tmp_path / "pages.csv")
    feeds = {uri: {"format": "csv", "fields": ["url", "relevance"]}}
    crawler = get_crawler(settings_dict={"FEEDS": feeds, "FEED_EXPORT_FIELDS": ["title"]})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == ["url", "relevance"]
    crawler = get_crawler(settings_dict={"FEEDS": {uri: {}}, "FEED_EXPORT_FIELDS": ["title"]})
    assert csv_header(FeedExporter(crawler).feeds[uri]) == ["title"]


def test_an_xml_feed_of_a_page_with_control_characters_is_xml():
    """A page's control characters (an escape, a vertical tab, which browsers show as nothing)
    went into the XML feed as they came, and no XML parser read the file past the first: each
    character XML cannot hold is written as U+FFFD, the others as they are."""
    settings = Settings()
    settings.setmodule("focused.settings")
    exporter_class = load_object(settings.getwithbase("FEED_EXPORTERS")["xml"])
    output = BytesIO()
    exporter = exporter_class(output, fields_to_export=list(PAGE_FIELDS))
    exporter.start_exporting()
    title, text = "Birds\x0bnest\x01", "Feathers \x1b[1m and twigs\tin\nnests \U0001f426\x85"
    exporter.export_item(PageItem(url="http://a.test/", title=title, text=text, level=1))
    exporter.finish_exporting()
    [item] = ET.fromstring(output.getvalue())
    assert item.findtext("title") == "Birds\ufffdnest\ufffd"
    assert item.findtext("text") == "Feathers \ufffd[1m and twigs\tin\nnests \U0001f426\x85"
    assert (item.findtext("url"), item.findtext("level")) == ("http://a.test/", "1")
