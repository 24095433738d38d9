"""The scoring spider middleware: relevance is known before a page's outlinks are queued.

Scrapy runs item pipelines only after the callback's requests have been scheduled, so the
score of a page cannot come from a pipeline if the strategy is to use it. This middleware sees
the whole output of the callback for one response (one ``PageItem`` and its link requests):

- it scores the page once with the crawl's relevance model, in the page's ``language``, and
  attaches the ``Scores`` to the item (``pipelines.relevance`` records them);
- it scores all anchors and context windows in one batch, when the strategy reads them
  with the crawl's parameters (``reads_link_scores_with``);
- it writes into each child's meta what strategies read: ``parent_url``, ``parent_relevance``,
  ``parent_is_relevant``, ``anchor_relevance``, ``context_relevance``, ``link_relevance``,
  ``path_cost`` and ``discovery`` (plus the strategy's own ``child_meta``, and
  ``parent_fetched_url`` when the strategy ``reads_fetched_parent``), and
  ``anchor_semantic`` (``focused.encoder``) when the strategy sets ``link_encoder``;
- it feeds the page to the model and starts a refit off the reactor thread when one is due
  (on it, the crawl waiting, with ``RELEVANCE_REFIT_THREAD`` False: then the page a refit's
  model first scores does not hang on the refit's timing).

The sentence encoder runs in place, on the reactor thread, and its CPU time counts in
``focused/scoring_cpu_ms``. Awaiting it in a worker thread instead was measured (BENCHMARKS.md,
"Cheaper sentence encoder"): downloads go on meanwhile, but requests then leave a frontier that
lacks the children still being encoded, and mean harvest@|rel| fell from 0.466 to 0.407.

Order 800, so Scrapy's ``DepthMiddleware`` (900) has already set each child's ``depth``.

Stats: ``focused/pages``, ``focused/relevant``, ``focused/harvest_rate`` (the crawl's, as of
this process's last page; at the close, the crawl's at the close, all processes of a shared
crawl counted),
``focused/scoring_cpu_ms`` (total) and ``focused/scoring_cpu_ms_per_page``, ``focused/refits``,
``focused/resume/link_scores_restored`` (the encoder's cached scores a resumed crawl took back).
Counters live in ``spider.state`` so that a crawl resumed from JOBDIR keeps counting (the
discovery order is also written through, ``focused.resume.CrawlCounters``, so that it goes on
after ``kill -9``), or in Redis for a crawl shared by several processes (``focused.distributed``).
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.utils.misc import load_object
from twisted.internet.defer import maybeDeferred
from twisted.internet.threads import deferToThread

from focused.encoder import STATE_FILE as ENCODER_STATE_FILE
from focused.encoder import open_link_encoder
from focused.items import PageItem, PageOutputMiddleware
from focused.jobdir import JobdirUnwritable, jobdir_writes
from focused.resume import TopicJournal, add_to_counter, crawl_counter, page_scored

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from focused.encoder import LinkEncoder
    from focused.relevance import RelevanceModel, Scores

logger = logging.getLogger(__name__)


class RelevanceMiddleware(PageOutputMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.stats = crawler.stats
        self._refitting = False
        # False: refits on the reactor thread, the crawl waiting (RELEVANCE_REFIT_THREAD).
        self._refit_in_thread = crawler.settings.getbool("RELEVANCE_REFIT_THREAD", True)
        self._strategy = None
        self._encoder: LinkEncoder | None = None  # only for strategies that set link_encoder
        self._reads_link_scores = True
        jobdir = crawler.settings.get("JOBDIR")
        self._jobdir_writes = jobdir_writes(crawler)
        self._topic_journal = TopicJournal(jobdir, self._jobdir_writes) if jobdir else None
        self._encoder_state = Path(jobdir, ENCODER_STATE_FILE) if jobdir else None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RelevanceMiddleware:
        middleware = cls(crawler)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    def spider_opened(self, spider: Spider) -> None:
        if self._topic_journal is not None and getattr(spider, "shared", None) is None:
            # After kill -9 the model is the last clean close's, or a new one: the seed texts
            # it lacks come back (a shared crawl keeps them in Redis).
            restored = self._topic_journal.restore(self.model)
            if restored:
                self.stats.set_value("focused/resume/topic_texts_restored", restored)
        self._strategy = load_object(self.crawler.settings["SCHEDULER_PRIORITY_QUEUE"])
        if getattr(self._strategy, "link_encoder", False):
            self._encoder = open_link_encoder(
                spider.config.topic, self.model.language, self.crawler.settings
            )
        if (
            self._encoder is not None
            and self._encoder_state is not None
            and (restored := self._encoder.restore_state(self._encoder_state))
        ):
            self.stats.set_value("focused/resume/link_scores_restored", restored)
        # Without the encoder, a strategy that asked for it orders by the crawl's link scores.
        params = self._strategy.crawl_params(spider)
        self._reads_link_scores = self._strategy.reads_link_scores_with(params) or (
            getattr(self._strategy, "link_encoder", False) and self._encoder is None
        )

    def spider_closed(self, spider: Spider) -> None:
        # The stats dumped at the close give the crawl's counts, as its record and last progress
        # line do: set at this process's last page, they missed the pages other processes of a
        # shared crawl scored since (75 pages in the stats of a crawl of 80), and a resumed run
        # that scored none had none.
        pages = crawl_counter(spider, "pages")
        if pages:
            self._harvest_stats(pages, crawl_counter(spider, "relevant"))
        encoder, state = self._encoder, self._encoder_state
        if encoder is None:
            return
        if state is not None:
            self._jobdir_writes.save_at_pause(
                "the sentence encoder's state", state, lambda: encoder.save_state(state)
            )
        encoder.close()  # keeps this crawl's vectors for the next (focused.encodings)

    @property
    def model(self) -> RelevanceModel:
        return self.crawler.spider.relevance

    def _next(self, counter: str, amount: int = 1) -> int:
        """Add ``amount`` to a crawl counter; returns its new value. A crawl shared by several
        processes (FOCUSED_FRONTIER) counts in Redis, so fetch and discovery orders are global."""
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is not None:
            return shared.incr(counter, amount)
        return add_to_counter(self.crawler, counter, amount)

    # -- seeds ---------------------------------------------------------------------------------

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in start:
            if isinstance(request, Request):
                request.meta.setdefault("path_cost", 0.0)
                request.meta["discovery"] = self._next("discovered")
            yield request

    # -- pages and their links -----------------------------------------------------------------

    def process_outputs(self, response: Response, outputs: list[Any]) -> list[Any]:
        pages = [o for o in outputs if isinstance(o, PageItem)]
        if not pages:
            return outputs
        page = pages[0]
        started = time.thread_time()
        language = page.get("language")
        scores = self.model.score(page["text"], language)
        is_relevant = self.model.is_relevant(scores)
        page["scores"] = scores
        page["fetch_order"] = self._next("pages")
        relevant = self._next("relevant", int(is_relevant))
        self._learn_topic(page["text"], language, is_seed=response.meta.get("depth", 0) == 0)

        children = [o for o in outputs if isinstance(o, Request)]
        if children:
            self._annotate_children(page["url"], response, scores, is_relevant, children, language)
        self.model.observe(page["text"], language)
        cpu_ms = (time.thread_time() - started) * 1000
        self._count(page["fetch_order"], relevant, cpu_ms)
        self.crawler.signals.send_catch_log(
            page_scored,
            is_relevant=is_relevant,
            relevant=relevant,
            fetch_order=page["fetch_order"],
        )
        self._maybe_refit()
        return outputs

    def _learn_topic(self, text: str, language: str | None, *, is_seed: bool) -> None:
        """Seed pages join the topic; in a shared crawl, those fetched by any process."""
        shared = getattr(self.crawler.spider, "shared", None)
        if shared is None:
            if is_seed and self.model.add_topic_text(text, language) and self._topic_journal:
                with suppress(JobdirUnwritable):  # the crawl stops (focused.jobdir)
                    self._topic_journal.append(text, language)  # for a resume after a crash
            return
        # Every process must score against the same topic, or their scores, which order one
        # shared frontier, would not be comparable.
        if is_seed:
            shared.publish_topic_text(text, language)
        for topic_text, topic_language in shared.new_topic_texts():
            self.model.add_topic_text(topic_text, topic_language)

    def _annotate_children(
        self,
        page_url: str,
        response: Response,
        scores: Scores,
        is_relevant: bool,
        children: list[Request],
        language: str | None,
    ) -> None:
        relevance = scores.combined
        parent_meta = response.meta
        path_cost = parent_meta.get("path_cost", 0.0) + (1.0 - relevance)
        inherited = self._strategy.child_meta(parent_meta, scores, is_relevant)
        if self._strategy.reads_fetched_parent:
            inherited["parent_fetched_url"] = response.request.url
        first = self._next("discovered", len(children)) - len(children) + 1
        for discovery, child in enumerate(children, start=first):
            child.meta.update(
                # The URL the page is stored under (canonical, or its rel=canonical), not the
                # one it was fetched at: a child's stored parent_url names a stored page.
                parent_url=page_url,
                parent_relevance=relevance,
                parent_is_relevant=is_relevant,
                path_cost=path_cost,
                discovery=discovery,
                **inherited,
            )
        anchors = [c.meta.get("anchor", "") for c in children]
        if self._reads_link_scores:
            # A page's links are written in its language.
            link_scores = self.model.score_links(
                anchors, [c.meta.get("link_context", "") for c in children], language
            )
            for child, anchor, context, link in zip(children, *link_scores, strict=True):
                child.meta.update(
                    anchor_relevance=anchor, context_relevance=context, link_relevance=link
                )
        if self._encoder is not None:
            # torch runs on the calling thread only, so the page's CPU time includes it.
            for child, score in zip(children, self._encoder.score_texts(anchors), strict=True):
                child.meta["anchor_semantic"] = score
            for name, count in self._encoder.counts().items():
                self.stats.set_value(f"focused/encoder/{name}", count)

    def _harvest_stats(self, pages: int, relevant: int) -> None:
        self.stats.set_value("focused/pages", pages)
        self.stats.set_value("focused/relevant", relevant)
        self.stats.set_value("focused/harvest_rate", round(relevant / pages, 4))

    def _count(self, pages: int, relevant: int, cpu_ms: float) -> None:
        stats = self.stats
        self._harvest_stats(pages, relevant)
        total = stats.get_value("focused/scoring_cpu_ms", 0.0) + cpu_ms
        stats.set_value("focused/scoring_cpu_ms", round(total, 3))
        scored = stats.get_value("focused/scored_pages", 0) + 1
        stats.set_value("focused/scored_pages", scored)
        stats.set_value("focused/scoring_cpu_ms_per_page", round(total / scored, 3))

    def _maybe_refit(self) -> None:
        if self._refitting or not self.model.refit_due:
            return
        self._refitting = True
        started = time.monotonic()

        def done(result: Any) -> Any:
            self._refitting = False
            self.stats.inc_value("focused/refits")
            logger.debug("Relevance model refit in %.2fs", time.monotonic() - started)
            return result

        def failed(failure: Any) -> None:
            self._refitting = False
            logger.error("Relevance model refit failed: %s", failure.getErrorMessage())

        run = deferToThread if self._refit_in_thread else maybeDeferred
        run(self.model.refit).addCallbacks(done, failed)
