"""Memory of one parsed robots.txt (Protego, what Scrapy's RobotsTxtMiddleware keeps per host),
by the size of the robots.txt: tracemalloc over 200 parsers of each size.

    python benchmarks/results/session52/many_hosts/parser_size.py
"""

import tracemalloc

from protego import Protego

PARSERS = 200


def robots_txt(rules: int) -> str:
    lines = ["User-agent: *", "Crawl-delay: 1"]
    lines += [f"Disallow: /section-{i}/private/*?sort=" for i in range(rules)]
    return "\n".join(lines) + "\n"


def main() -> None:
    for rules in (1, 25, 250, 1000):
        body = robots_txt(rules)
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        kept = [Protego.parse(body) for _ in range(PARSERS)]
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        each = (after - before) / len(kept)
        print(f"robots.txt of {len(body):>6,} bytes: {each:>9,.0f} bytes a parser")


if __name__ == "__main__":
    main()
