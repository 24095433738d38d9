"""What the local-search strategies share: the value of a move, and the flights still out.

Local search (hill climbing, beam, annealing, threshold acceptance, bees) moves from the
current page to one of its children. A child's true relevance is only known once it is
fetched, so a move is judged on what the crawler knows before fetching:

- the value of the current page is its relevance (``parent_relevance`` on each child);
- the value of a candidate child is the relevance of its link: anchor plus the text around it
  (``link_relevance``). Seeds, which have neither, are worth 1 so that they go first.

Scrapy gives a queue no "done" callback. A popped request is downloaded, then parsed (its
children are pushed while it is parsed), then its page is stored, then it is forgotten. It has
*landed* once its page's children are all queued (``FocusedScheduler.scored_pages``, kept with
SCORE_BEFORE_DISPATCH), or else once the engine holds it neither in the downloader nor in the
scraper (a request that gave no page; any, with SCORE_BEFORE_DISPATCH off). Not only once its
page is stored: the scheduler lets the next request go as soon as a page's links are queued,
and whether the store was done by then depends on its speed. A flight still out for its store
made the order of ``bees`` (which bee flies next) hang on that timing, and differ after a
pause, which lands every flight: the crawl's next pop found the bee of the last page out, the
resumed one found it home. The engine asks the scheduler for the next request at both
moments, so a strategy that holds requests back (``pop`` returns None while a flight of its
own is out) is asked again as soon as that flight lands: held-back requests are released,
never stranded, and the crawl does not end while they remain (Scrapy closes an idle spider
only when the scheduler's ``len`` is 0).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from focused.arguments import Param
from focused.engine import engine_scheduler

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler


def candidate_value(request: Request) -> float:
    """What a link promises before it is fetched: its anchor-and-context relevance."""
    return request.meta.get("link_relevance", 1.0)


def page_value(request: Request) -> float:
    """The relevance of the page the link was found on (the current page of the move)."""
    return request.meta.get("parent_relevance", 1.0)


def sent_again(request: Request) -> bool:
    """Whether ``request`` is one the crawl fetched, sent again with its meta: retried or
    rendered again (``dont_filter``), or the request a redirect made (``redirect_urls``). A
    link found on a page is neither: the move to it was made when it was first handed out."""
    return request.dont_filter or bool(request.meta.get("redirect_urls"))


# The seed of a strategy's random draws. Not below 0: Python's generator takes a negative seed
# as its absolute value, so seed=-1 gave the crawl of seed=1.
SEED = Param(0, "random seed", low=0)


def seeded_random(seed: int, state: list | None) -> random.Random:
    """A generator seeded with ``seed``, or carried on from a saved ``random_state``."""
    generator = random.Random(seed)
    if state:
        version, internal, gauss = state
        generator.setstate((version, tuple(internal), gauss))
    return generator


def random_state(generator: random.Random) -> list:
    """The generator's state as JSON."""
    version, internal, gauss = generator.getstate()
    return [version, list(internal), gauss]


class Flights:
    """The requests a queue handed to the engine, with a payload each, until they land.

    ``holds(request)`` says whether the engine is still working on a request; it reads the
    engine by default and can be replaced (tests pass a set of requests still out).
    """

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler
        self._out: dict[int, tuple[Request, Any]] = {}
        self.holds: Callable[[Request], bool] = self._engine_holds

    def _engine_holds(self, request: Request) -> bool:
        try:
            engine = self._crawler.engine
        except RuntimeError:  # a queue used outside a crawl: nothing is downloading
            return False
        if request in engine.downloader.active:
            return True
        scheduler = engine_scheduler(self._crawler)  # None once the spider closed
        if request in getattr(scheduler, "scored_pages", ()):
            return False  # its children are all queued: only its store is still to come
        scraper = engine.scraper.slot
        return scraper is not None and (
            request in scraper.active or any(queued is request for _, queued, _ in scraper.queue)
        )

    def launch(self, request: Request, payload: Any = None) -> None:
        self._out[id(request)] = (request, payload)

    def land(self) -> list[Any]:
        """Forget the flights the engine has finished with; return their payloads."""
        landed = [key for key, (request, _) in self._out.items() if not self.holds(request)]
        return [self._out.pop(key)[1] for key in landed]

    def out(self) -> list[tuple[Request, Any]]:
        """The requests still out with their payloads (call ``land`` first to be up to date)."""
        return list(self._out.values())

    def payloads(self) -> list[Any]:
        return [payload for _, payload in self._out.values()]

    def __len__(self) -> int:
        """Flights still out (call ``land`` first for an up-to-date count)."""
        return len(self._out)
