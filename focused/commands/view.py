"""``scrapy view``, with ``--spider`` naming a spider of the project's refused in one line
(``focused.commands.fetch``)."""

from scrapy.commands.view import Command as ScrapyViewCommand

from focused.commands.fetch import RefusesProjectSpiders


class Command(RefusesProjectSpiders, ScrapyViewCommand):
    pass
