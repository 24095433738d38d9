"""A synthetic SQLite store of N pages with realistic text sizes, built through the Store API:
crawl 'big' recorded running (no totals: `scrapy crawls` counts it from its pages), and a
small finished crawl 'small'. Usage, from the repository root: build_store.py PATH [N]"""

import random
import sys
import time

sys.path.insert(0, ".")

from focused.storage import open_store

path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
rng = random.Random(7)
words = [
    "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 11)))
    for _ in range(5000)
]
base = " ".join(rng.choice(words) for _ in range(400_000))  # ~2.6 MB of text to slice


def text() -> str:
    # Wikipedia-like: a median of ~8 KB, a long tail to ~100 KB (lognormal).
    size = min(int(rng.lognormvariate(9.0, 0.8)), 100_000)
    start = rng.randrange(len(base) - size)
    return base[start : start + size]


store = open_store({"FOCUSED_DB": path})
store.start_crawl(
    {
        "crawl_id": "small",
        "query": "birds",
        "strategy": "bfs",
        "started_at": "2024-01-01T00:00:00+00:00",
    }
)
store.save_pages(
    {
        "crawl_id": "small",
        "url": f"http://s.test/{i}",
        "title": "t",
        "text": text(),
        "level": 1,
        "relevance": 0.5,
        "is_relevant": i % 2 == 0,
        "fetch_order": i,
    }
    for i in range(1, 101)
)
store.finish_crawl("small", pages=100, relevant=50, harvest_rate=0.5)
store.start_crawl(
    {
        "crawl_id": "big",
        "query": "birds feathers nesting",
        "strategy": "bestfirst",
        "started_at": "2024-02-01T00:00:00+00:00",
    }
)
began = time.monotonic()
order = 0
batch = []
for i in range(count):
    order += 1 + (rng.random() < 0.05)  # some pages fetched but not stored
    relevance = rng.random()
    batch.append(
        {
            "crawl_id": "big",
            "url": f"http://host{rng.randrange(2000)}.test/wiki/page_{i}",
            "title": f"Page {i} about {rng.choice(words)}",
            "text": text(),
            "level": min(int(rng.expovariate(0.7)), 12),
            "parent_url": f"http://host{rng.randrange(2000)}.test/wiki/page_{rng.randrange(i + 1)}",
            "anchor": rng.choice(words),
            "link_relevance": rng.random(),
            "tfidf": rng.random(),
            "lsi": rng.random(),
            "relevance": relevance,
            "is_relevant": relevance > 0.6,
            "strategy": "bestfirst",
            "fetch_order": order,
            "fetched_at": "2024-02-01T00:00:00+00:00",
            "status": 404 if rng.random() < 0.01 else 200,
            "duplicate_of": "http://x.test/" if rng.random() < 0.02 else None,
            "language": "en",
            "content_hash": f"{rng.getrandbits(64):016x}",
            "visits": 1,
            "changes": 0,
            "robots": "noindex" if rng.random() < 0.01 else None,
        }
    )
    if len(batch) == 1000:
        store.save_pages(batch)
        batch = []
store.save_pages(batch)
store.close()
print(f"{count} pages in {time.monotonic() - began:.0f} s, last fetch_order {order}")
