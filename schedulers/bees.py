"""Bee-colony foraging: bees fly out from a hive, wander, and dance for the good sources.

Source: a bee-colony focused crawler (a Slovak student project), compared there with
best-first and BFS; after the honey-bee foraging model (hive with a dispatch room, a dance
floor and an auditorium).

Each popped request is one bee's flight, and each download counts against the page budget.
The bee's number goes into the request's meta (``bee``), and ``child_meta`` passes it on to
the children of the page (``found_by_bee``), so the queue knows which bee found which links.
The page a bee is on is its current page: the most recently fetched page of that bee, whose
children arrive while it is parsed; there are up to ``n_bees`` current pages at once.

- Dispatch room: the seeds. A bee leaving it flies to a random unfetched seed, or else to a
  random unfetched link of a random seed page.
- Outside the hive: when a bee's flight lands, the quality q of its page is the page's
  relevance, the crawl's combined score that every strategy's pages get (the source's quality
  counts the query's words on the page, with those in the title and headings weighted more).
  The bee returns to the hive with probability q (a good find is worth reporting), or when the
  page has no unfetched link; otherwise it follows one of the page's links at random. A
  flight queued again with its meta (redirected, retried, rendered again) goes on: its bee
  lands without a page and follows it, and it is no link of the page it was found on.
- Dance floor: a bee returning from a relevant page (``RELEVANCE_THRESHOLD``) dances: it
  advertises the page as a source for ceil(q · ``dance_time``) further flights (the source
  gives no dance length; this rule is this project's choice).
- Auditorium: an idle bee picks an advertised source with probability in proportion to its
  quality and flies to a random unfetched link of it; with no dance going on, it leaves from
  the dispatch room; when neither has an unfetched link, it scouts the best link queued
  (highest page relevance), so that no queued request is ever stranded.

Never more than ``n_bees`` flights are out at once: ``pop`` returns None while they are (and is
asked again as soon as one lands; see ``schedulers.local``).

Parameters:
    n_bees (int, default 20, at most 1000): the bees, and so the most flights out at once.
    dance_time (int, default 50): flights a dance of quality 1 lasts.
    seed (int >= 0, default 0): seed of the bees' random choices.

State saved on pause: each bee's next target and current find, the dances, the dispatch room,
the flights made and the random generator. Stats: ``focused/bees/returns``, ``follows``,
``dances``, ``from_dance``, ``from_dispatch``, ``scouts``, ``held``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy import Request

from focused.arguments import Param
from schedulers import state_shapes as shapes
from schedulers.base import StrategyQueue
from schedulers.local import SEED, Flights, page_value, random_state, seeded_random

if TYPE_CHECKING:
    from focused.relevance import Scores


class BeesQueue(StrategyQueue):
    name = "bees"
    params = {
        # At most 1000: every pop looks over the bees, and a mistyped count (n_bees=10000000)
        # would stall the crawl or fill the memory.
        "n_bees": Param(20, "bees: the most flights out at once", low=1, high=1000),
        "dance_time": Param(50, "flights a dance of quality 1 lasts", low=1),
        "seed": SEED,
    }
    # A bee weighs a page by its quality (the page's relevance) alone: scoring each link's
    # anchor and context for it was a third of a page's scoring CPU spent for nothing.
    reads_link_scores = False

    @classmethod
    def child_meta(
        cls, parent_meta: dict[str, Any], scores: Scores, is_relevant: bool
    ) -> dict[str, Any]:
        return {"found_by_bee": parent_meta.get("bee")}

    def score(self, request: Request) -> float:
        return page_value(request)  # only the scouts use the order

    # -- state ---------------------------------------------------------------------------------

    _links = shapes.list_of(shapes.fingerprint)
    state_shapes = StrategyQueue.state_shapes | {
        "random": shapes.random_state,
        "flights_made": shapes.whole,
        "target": shapes.list_of(shapes.optional(shapes.fingerprint)),
        "found": shapes.dict_of(
            shapes.whole_text,
            shapes.record(
                {"q": shapes.number, "relevant": shapes.flag, "links": _links},
                {"seed_page": shapes.flag},
            ),
        ),
        "dances": shapes.list_of(
            shapes.record({"q": shapes.number, "until": shapes.whole, "links": _links})
        ),
        "seeds": _links,
        "seed_pages": shapes.list_of(_links),
        "seed_links": _links,  # saved before seed_pages: the links of every seed page in one
        "out": shapes.list_of(shapes.whole),
    }

    def restore(self, state: dict[str, Any]) -> None:
        self.flights = Flights(self.crawler)
        n = self.params["n_bees"]
        self._random = seeded_random(self.params["seed"], state.get("random"))
        self._flights_made: int = state.get("flights_made", 0)
        # Fingerprints are kept as hex strings: the state is JSON. Padded or cut, should a
        # crawl be resumed with another n_bees.
        self._target: list[str | None] = [*state.get("target", []), *[None] * n][:n]
        # bee -> its current find: {"q", "relevant", "seed_page", "links"}
        self._found: dict[int, dict[str, Any]] = {
            int(b): f for b, f in state.get("found", {}).items()
        }
        self.dances: list[dict[str, Any]] = state.get("dances", [])  # {"q", "until", "links"}
        self._seeds: list[str] = state.get("seeds", [])
        # The unfetched links of each fetched seed page (a JOBDIR saved before they were kept
        # per page has them in one list: one page, then).
        pooled = state.get("seed_links")
        self._seed_pages: list[list[str]] = state.get("seed_pages", [pooled] if pooled else [])
        # Flights out when the crawl paused have landed by now; their bees decide first.
        self._landing: list[int] = [bee for bee in state.get("out", []) if bee < n]

    def state(self) -> dict[str, Any]:
        self._landing += self.flights.land()
        return {
            "random": random_state(self._random),
            "flights_made": self._flights_made,
            "target": self._target,
            "found": self._found,
            "dances": self.dances,
            "seeds": self._seeds,
            "seed_pages": self._seed_pages,
            "out": self._landing + self.flights.payloads(),
        }

    # -- the hive ------------------------------------------------------------------------------

    def push(self, request: Request) -> None:
        fp = self._fingerprint(request)
        self.frontier.put(fp, self.key(request), request)
        if request.meta.get("parent_url") is None:
            self._seeds.append(fp.hex())
        else:
            self._note_link(request, fp)

    def rediscover(self, request: Request) -> bool:
        """A queued URL found again on a bee's page is one of that page's links too."""
        changed = super().rediscover(request)
        fp = self._fingerprint(request)
        if self.frontier.key_of(fp) is not None:
            self._note_link(request, fp)
        return changed

    def _note_link(self, request: Request, fp: bytes) -> None:
        if self._sent_again(request):
            # Its bee's flight goes on to it: landing without a page, the bee follows it.
            empty = {"q": 0.0, "relevant": False, "links": []}
            self._found.setdefault(request.meta["bee"], empty)["links"].append(fp.hex())
            return
        bee = request.meta.get("found_by_bee")
        if bee is None:
            return
        found = self._found.setdefault(
            bee,
            {
                "q": page_value(request),
                "relevant": bool(request.meta.get("parent_is_relevant")),
                "seed_page": request.meta.get("depth", 1) == 1,
                "links": [],
            },
        )
        found["links"].append(fp.hex())

    def _sent_again(self, request: Request) -> bool:
        """Whether ``request`` is a flight still out, sent again with its meta: redirected,
        retried, or rendered. (A link found on a page has no bee yet.) Not a link of the page
        of the bee that found it, whose next landing would take that page's quality."""
        bee = request.meta.get("bee")
        if bee is None:
            return False
        urls = {request.url, *request.meta.get("redirect_urls", [])[-1:]}
        return any(flown == bee and sent.url in urls for sent, flown in self.flights.out())

    def _take(self, links: list[str]) -> Request | None:
        """Remove a random link still queued from ``links`` and from the frontier."""
        while links:
            index = self._random.randrange(len(links))
            links[index], links[-1] = links[-1], links[index]
            request = self.frontier.remove(bytes.fromhex(links.pop()))
            if request is not None:
                return request
        return None

    def _from_seed_page(self) -> Request | None:
        """A random unfetched link of a random seed page (of those with one left)."""
        while self._seed_pages:
            # No draw for one page: a crawl with one seed draws as it did when links were pooled.
            pages = len(self._seed_pages)
            index = self._random.randrange(pages) if pages > 1 else 0
            request = self._take(self._seed_pages[index])
            if request is not None:
                return request
            self._seed_pages[index] = self._seed_pages[-1]  # none left: forget the page
            self._seed_pages.pop()
        return None

    def _return_or_follow(self, bee: int) -> None:
        """The bee's flight landed: it returns to the hive or follows a link of its page."""
        found = self._found.pop(bee, None) or {"q": 0.0, "relevant": False, "links": []}
        if found.get("seed_page"):
            self._seed_pages.append(list(found["links"]))
        live = [fp for fp in found["links"] if self.frontier.key_of(bytes.fromhex(fp))]
        if live and self._random.random() >= found["q"]:
            self._target[bee] = live[self._random.randrange(len(live))]
            self.stats.inc_value("focused/bees/follows")
            return
        self._target[bee] = None
        self.stats.inc_value("focused/bees/returns")
        if found["relevant"] and live:
            until = self._flights_made + math.ceil(found["q"] * self.params["dance_time"])
            self.dances.append({"q": found["q"], "until": until, "links": live})
            self.stats.inc_value("focused/bees/dances")

    def choose_dance(self) -> dict[str, Any] | None:
        """An advertised source, picked with probability in proportion to its quality."""
        self.dances = [
            d for d in self.dances if d["until"] > self._flights_made and d["links"] and d["q"]
        ]
        total = sum(d["q"] for d in self.dances)
        if not self.dances:
            return None
        point = self._random.random() * total
        for dance in self.dances:
            point -= dance["q"]
            if point < 0:
                return dance
        return self.dances[-1]

    def _leave_hive(self) -> Request | None:
        dance = self.choose_dance()
        if dance is not None and (request := self._take(dance["links"])) is not None:
            self.stats.inc_value("focused/bees/from_dance")
            return request
        request = self._take(self._seeds) or self._from_seed_page()
        if request is not None:
            self.stats.inc_value("focused/bees/from_dispatch")
            return request
        request = self.frontier.pop()
        if request is not None:
            self.stats.inc_value("focused/bees/scouts")
        return request

    def refetched(self, request: Request) -> None:
        # No bee flies to it in this run: its page's links are found by none (the bee of the
        # flight before the crash may be out on another, whose find they would join).
        request.meta.pop("bee", None)

    def pop(self) -> Request | None:
        for bee in self._landing + self.flights.land():
            self._return_or_follow(bee)
        self._landing = []
        if len(self.flights) >= self.params["n_bees"]:
            self.stats.inc_value("focused/bees/held")
            return None
        out = set(self.flights.payloads())
        home = [b for b in range(self.params["n_bees"]) if b not in out]
        bee = next((b for b in home if self._target[b] is not None), home[0])
        request = None
        if self._target[bee] is not None:
            request = self.frontier.remove(bytes.fromhex(self._target[bee]))
            self._target[bee] = None
        request = request or self._leave_hive()
        if request is None:
            return None
        request.meta["bee"] = bee
        self._flights_made += 1
        self.flights.launch(request, bee)
        return request
