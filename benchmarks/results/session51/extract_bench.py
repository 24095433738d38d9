"""One-off (session 51): CPU ms of ``extract_page`` on three made-up pages of 500 links, best of
five rounds of 20: links of one text node (``plain``), links holding elements (``spans``), and
300 navigation links holding a ``<span>`` before the plain page (``nav``). Run from a checkout's
root with ``PYTHONPATH=. python benchmarks/results/session51/extract_bench.py``."""

import time

from scrapy.http import HtmlResponse

from focused.extract import extract_page

PLAIN = "".join(
    f'<p>Text about birds {i} <a href="/wiki/P{i}">Page {i}</a> more words here.</p>'
    for i in range(500)
)
SPANS = "".join(
    f'<p>Text about birds {i} <a href="/wiki/S{i}"><span class="x">Page</span> <b>{i}</b></a>'
    " more.</p>"
    for i in range(500)
)
NAV = (
    '<div role="navigation">'
    + "".join(f'<a href="/wiki/N{i}"><span>Nav {i}</span></a> ' for i in range(300))
    + "</div>"
)

for name, body in (("plain", PLAIN), ("spans", SPANS), ("nav", NAV + PLAIN)):
    html = f"<html><head><title>T</title></head><body>{body}</body></html>".encode()
    rounds = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(20):
            extract_page(HtmlResponse("http://127.0.0.1/wiki/X", body=html, encoding="utf-8"), 200)
        rounds.append((time.process_time() - started) / 20 * 1000)
    print(f"{name:6s} {min(rounds):.2f} ms")
