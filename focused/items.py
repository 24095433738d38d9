"""The item a fetched page travels through Scrapy as.

Its fields are the page record of ARCHITECTURE.md ("Stores") plus one transient field,
``scores``: the ``focused.relevance.Scores`` (tfidf, lsi, combined) that ``RelevanceMiddleware``
attaches and ``pipelines.relevance.RelevancePipeline`` turns into ``tfidf``, ``lsi``,
``relevance`` and ``is_relevant`` before removing it, so that it never reaches the store.
"""

from __future__ import annotations

import scrapy


class PageItem(scrapy.Item):
    crawl_id = scrapy.Field()
    url = scrapy.Field()
    title = scrapy.Field()
    text = scrapy.Field()
    level = scrapy.Field()
    parent_url = scrapy.Field()
    anchor = scrapy.Field()
    link_relevance = scrapy.Field()
    tfidf = scrapy.Field()
    lsi = scrapy.Field()
    relevance = scrapy.Field()
    is_relevant = scrapy.Field()
    strategy = scrapy.Field()
    fetch_order = scrapy.Field()
    fetched_at = scrapy.Field()
    status = scrapy.Field()
    duplicate_of = scrapy.Field()  # see focused.dedup
    language = scrapy.Field()  # ISO 639-1 code, None when unknown (focused.languages)
    content_hash = scrapy.Field()  # see focused.refresh
    last_changed = scrapy.Field()
    changes = scrapy.Field()
    visits = scrapy.Field()
    scores = scrapy.Field()  # transient: removed by RelevancePipeline
