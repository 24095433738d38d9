"""Harvest@33 and fetch order of Storms crawls (session 7, "Scoring before dispatch").

Each crawl, against a replay web of the corpus (python -m focused.replayweb ...):

    scrapy crawl topical -a query="hurricane storm tropical cyclone wind landfall" \
        -a seeds=http://127.0.0.1:PORT/wiki/Tropical_cyclone -s CLOSESPIDER_PAGECOUNT=33 \
        -s ENCODER_STORE_SIZE=0 -s FOCUSED_DB=runN.sqlite3

then: PYTHONPATH=. python storms_order.py CORPUS run1.sqlite3 run2.sqlite3 ...
"""

import sqlite3
import sys
from urllib.parse import unquote

from focused.replayweb import load_graph, relevant_set

BUDGET = 33
relevant = relevant_set(load_graph(sys.argv[1]), "subject.Geography.Storms")
for path in sys.argv[2:]:
    with sqlite3.connect(path) as db:
        urls = [u for (u,) in db.execute("SELECT url FROM pages ORDER BY fetch_order")]
    # The corpus names its articles URL-encoded, as the replay web's links are.
    names = [url.rsplit("/wiki/", 1)[1] for url in urls]
    hit = [name in relevant or unquote(name) in relevant for name in names[:BUDGET]]
    marked = [("*" if h else "") + unquote(n) for h, n in zip(hit, names, strict=False)]
    hits = sum(hit)
    print(path, len(names), f"{hits / BUDGET:.3f}", " ".join(marked))
