"""Where a first crawl's scoring CPU goes, stage by stage (session 56).

    python benchmarks/results/session56/scoring/stages.py   # from the repository root

The 1,000 pages of ``benchmarks.scoring`` (breadth-first from Albatross on the replay web of
../shared/corpora/wikispeedia.tar.xz) go through ``benchmarks.scoring.measure`` (the spider's
parse and the scoring middleware, a cold encoder store) with the methods below wrapped in a
``time.thread_time`` timer: CPU ms a page, nested (a stage's time includes its callees'). Then
the encoder's calls: how many texts each had, and the anchors that hold words outside the
vocabulary's table, which the first crawl encodes alone (``WordMeans._learn``).
"""

import collections
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, ".")
import focused.encoder as fe
import focused.middlewares as fm
import focused.relevance as fr
from benchmarks import scoring

PAGES = Path(tempfile.gettempdir(), "session56-scoring-pages.json")
spent: collections.Counter = collections.Counter()
calls: collections.Counter = collections.Counter()


def timed(owner, name):
    method, label = getattr(owner, name), f"{owner.__name__}.{name}"

    def wrapper(*args, **kwargs):
        started = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - started
            calls[label] += 1

    setattr(owner, name, wrapper)


for owner, names in [
    (fm.RelevanceMiddleware, ["process_outputs", "_annotate_children"]),
    (fr.RelevanceModel, ["score", "page_tokens", "observe"]),
    (fe.LinkEncoder, ["score_texts", "_score_whole"]),
    (fe.WordMeans, ["vectors", "_learn"]),
]:
    for name in names:
        timed(owner, name)

batches: list[int] = []
texts = collections.Counter()
load_model = fe.load_model


def counting_model(*args, **kwargs):
    encode = load_model(*args, **kwargs)

    def counted(batch):
        batches.append(len(batch))
        return encode(batch)

    return counted


fe.load_model = counting_model
score_batch = fe.LinkEncoder._score_batch


def classify(self, batch):
    words = self._words
    for text in batch:
        split, one_word = words._split(text)
        outside = [w for w in split if w not in words._index]
        texts["texts scored (not cached)"] += 1
        if outside:
            texts["with a word outside the table"] += 1
            texts["of them one word (encoding it is encoding the text)"] += one_word
    return score_batch(self, batch)


fe.LinkEncoder._score_batch = classify

if not PAGES.exists():
    corpus = "../shared/corpora/wikispeedia.tar.xz"
    PAGES.write_text(json.dumps(scoring.fetch_pages(corpus, "Albatross", 1000)))
with tempfile.TemporaryDirectory() as store:
    result = scoring.measure(str(PAGES), scoring.QUERY, "semantic", store)
pages = 1000
print({k: round(v, 3) for k, v in result.items()})
for label, seconds in spent.most_common():
    print(f"{label:40} {seconds * 1000 / pages:6.3f} ms/page  ({calls[label]} calls)")
print(f"model calls {len(batches)}, texts {sum(batches)}")
print("texts a call:", sorted(collections.Counter(batches).items()))
for label, count in texts.items():
    print(f"{label}: {count}")
