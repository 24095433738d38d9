"""LSI scores of the sample's pages that lack a query's first word, for each query given.

Run from the repository root (the model learns the sample's first 300 pages, then scores all):
    python benchmarks/results/session54/harvest-lsi/rare.py zyzzyva "birds feathers nesting"
"""

import sys
from pathlib import Path

sys.path.insert(0, ".")
from focused.relevance import RelevanceModel

articles = sorted(Path("tests/data/wikisample/plaintext_articles").glob("*.txt"))
texts = [path.read_text(encoding="utf-8", errors="replace") for path in articles]
for query in sys.argv[1:]:
    model = RelevanceModel(query)
    for text in texts[:300]:
        model.observe(text)
    model.refit()
    word = query.split()[0].lower()
    without = [model.score(text) for text in texts if word not in text.lower()]
    relevant = sum(model.is_relevant(scores) for scores in without)
    lsi = sorted(scores.lsi for scores in without)
    print(
        f"{query!r}: pages without {word!r}: {len(without)}, relevant {relevant},"
        f" LSI max {lsi[-1]:.3f}, median {lsi[len(lsi) // 2]:.3f}"
    )
