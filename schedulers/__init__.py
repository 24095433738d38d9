"""Traversal strategies: one Scrapy priority queue per module (see focused.strategies)."""
