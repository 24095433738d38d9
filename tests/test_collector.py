"""The garbage collector tuned once a crawl's start-up is done (focused.collector)."""

from __future__ import annotations

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from focused.collector import GarbageCollector
from tests.conftest import BIRD_QUERY, BIRD_SEED, run_crawl
from tests.test_canonical import stat


def test_a_crawl_freezes_its_start_up_and_collects_its_young_objects_less_often(tmp_path, site):
    arguments = {
        "strategy": "bestfirst",
        "query": BIRD_QUERY,
        "seeds": f"{site.url}/wiki/{BIRD_SEED}",
    }
    crawl = run_crawl(tmp_path, arguments, {"CLOSESPIDER_PAGECOUNT": 5})
    log = crawl.result.stderr
    assert crawl.result.returncode == 0, log[-3000:]
    # The libraries, the model and the tables loaded at start-up: far more than a few objects.
    assert stat(log, "focused/gc_frozen_objects") > 10_000, log[-3000:]
    assert "thresholds (10000, 10, 10)" in log


def test_without_either_setting_the_collector_is_left_alone():
    crawler = get_crawler(
        settings_dict={"FOCUSED_GC_FREEZE": False, "FOCUSED_GC_GEN0_THRESHOLD": 0}
    )
    with pytest.raises(NotConfigured):
        GarbageCollector.from_crawler(crawler)
