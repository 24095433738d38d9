"""A loopback web of many hosts for the crawl of ``measure.py``: 127.0.X.Y:23200, N hosts
(default 3,000), served by one asyncio process. Each host has 8 pages, each linking 3 pages of
its own host and 4 pages of random other hosts; every 10th host asks a Crawl-delay of 0.2 s, every
97th one of 9999 s (skipped)."""

import asyncio
import random
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
PORT = 23200
HOSTS = [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(N)]
WORDS = ["birds", "feathers", "nesting", "eggs", "flight", "wings", "songbird", "beak"]


def robots(i: int) -> str:
    if i % 10 == 0:
        return "User-agent: *\nCrawl-delay: 0.2\nDisallow: /private\n"
    if i % 97 == 0:
        return "User-agent: *\nCrawl-delay: 9999\n"
    return "User-agent: *\nDisallow: /private\nDisallow: /*?sort=\n"


def page(i: int, n: int) -> str:
    draw = random.Random(i * 1000 + n)
    links = [f"/p/{draw.randrange(8)}" for _ in range(3)]
    links += [f"http://{HOSTS[draw.randrange(N)]}:{PORT}/p/{draw.randrange(8)}" for _ in range(4)]
    text = " ".join(draw.choice(WORDS) for _ in range(60))
    anchors = "".join(f'<a href="{url}">birds link {k}</a> ' for k, url in enumerate(links))
    return (
        f"<html><head><title>Birds {i} {n}</title></head><body><p>{text}</p>{anchors}</body></html>"
    )


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, i: int) -> None:
    try:
        while line := await reader.readline():
            path = line.split()[1].decode()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            if path == "/robots.txt":
                body, kind, status = robots(i), "text/plain", "200 OK"
            elif path.startswith("/p/"):
                body, kind, status = page(i, int(path[3:] or 0)), "text/html", "200 OK"
            else:
                body, kind, status = "no", "text/plain", "404 Not Found"
            data = body.encode()
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(data)}\r\n\r\n"
            )
            writer.write(head.encode() + data)
            await writer.drain()
    except Exception:  # a connection the crawl dropped
        pass
    finally:
        writer.close()


async def main() -> None:
    for i, host in enumerate(HOSTS):
        await asyncio.start_server(lambda r, w, i=i: handle(r, w, i), host, PORT)
    print("ready", N, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
