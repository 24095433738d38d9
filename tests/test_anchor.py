"""The anchor strategy: a link's own evidence outweighs the page it sits on."""

from __future__ import annotations

from tests.queues import drain, make_queue, req


def test_anchor_orders_by_link_evidence_then_parent() -> None:
    queue = make_queue("anchor")
    queue.push(req("rich-parent", parent_relevance=0.9, link_relevance=0.0))  # 0.27
    queue.push(req("good-anchor", parent_relevance=0.1, link_relevance=0.8))  # 0.59
    queue.push(req("both", parent_relevance=0.5, link_relevance=0.8))  # 0.71
    queue.push(req("seed"))  # no parent: a seed, first
    assert drain(queue) == ["seed", "both", "good-anchor", "rich-parent"]


def test_anchor_link_weight_zero_is_parent_order() -> None:
    queue = make_queue("anchor", link_weight=0.0)
    queue.push(req("a", parent_relevance=0.2, link_relevance=0.9))
    queue.push(req("b", parent_relevance=0.6, link_relevance=0.0))
    assert drain(queue) == ["b", "a"]
