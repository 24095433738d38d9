"""The crawl's feed export (``-o``/``-O``, FEEDS; ``focused.feeds``), without a crawl."""

from __future__ import annotations

from io import BytesIO

from scrapy.exporters import CsvItemExporter
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
