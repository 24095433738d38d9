"""``scrapy shell``, with ``--spider`` naming a spider of the project's refused in one line
(``focused.commands.fetch``)."""

from scrapy.commands.shell import Command as ScrapyShellCommand

from focused.commands.fetch import RefusesProjectSpiders


class Command(RefusesProjectSpiders, ScrapyShellCommand):
    pass
