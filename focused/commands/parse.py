"""``scrapy parse``, with ``--spider`` naming a spider of the project's refused in one line
(``focused.commands.fetch``)."""

from scrapy.commands.parse import Command as ScrapyParseCommand

from focused.commands.fetch import RefusesProjectSpiders


class Command(RefusesProjectSpiders, ScrapyParseCommand):
    default_spider = False  # without --spider, the spider whose domain the URL is in
