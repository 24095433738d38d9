"""scrapy-playwright's browser provider for rendering crawls (``focused.render``).

Loaded by scrapy-playwright only (``PLAYWRIGHT_BROWSER_PROVIDER``), so a crawl that does not
render never imports Playwright.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from contextvars import ContextVar
from typing import Any

from scrapy_playwright.provider import PlaywrightBrowserProvider

_starting: Counter[asyncio.AbstractEventLoop] = Counter()  # providers starting, per loop
# The provider whose start() spawns the driver: the http and https download handlers start
# theirs at once, through one patched subprocess_exec.
_spawning: ContextVar[DriverInItsOwnSession | None] = ContextVar("_spawning", default=None)
_running: set[DriverInItsOwnSession] = set()  # started, not closed yet
# Seconds between two looks at the drivers: asyncio sees a driver's exit on its own schedule.
_EXIT_LOOK_S = 0.05


class DriverInItsOwnSession(PlaywrightBrowserProvider):
    """scrapy-playwright's browser provider, starting Playwright's driver (Node) in a session of
    its own.

    Ctrl-C in a terminal signals the crawl's whole process group. Node dies of a SIGINT until
    the driver has loaded and set its own handler (0.1-0.3 s after the engine starts): the
    browser could not launch, the pause became a crawl that failed its seed. Out of the group,
    the driver and Chromium only stop when the crawl closes them (or its pipe to them closes).

    It keeps the driver's process, for ``driver_exited``: a driver that dies otherwise (killed,
    out of memory) takes its Chromium and its connection with it, and scrapy-playwright, which
    relaunches a browser that disconnects, starts no driver again.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._driver: asyncio.SubprocessTransport | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # Playwright spawns the driver with asyncio.create_subprocess_exec, whose loop's
        # subprocess_exec passes other keyword arguments on to subprocess.Popen. The http and
        # https download handlers start at once on the same loop: the last one out restores it.
        if not _starting[loop]:
            loop.subprocess_exec = functools.partial(  # type: ignore[method-assign]
                _exec_in_own_session, loop
            )
        _starting[loop] += 1
        spawning = _spawning.set(self)  # the tasks start() makes inherit it
        try:
            await super().start()
        finally:
            _spawning.reset(spawning)
            _starting[loop] -= 1
            if not _starting[loop]:
                del loop.subprocess_exec
                del _starting[loop]
        _running.add(self)

    async def close(self) -> None:
        _running.discard(self)  # its driver stops now, as asked
        await super().close()

    def exited(self) -> bool:
        return self._driver is not None and self._driver.get_returncode() is not None


async def _exec_in_own_session(
    loop: asyncio.AbstractEventLoop, *args: Any, **kwargs: Any
) -> tuple[asyncio.SubprocessTransport, asyncio.SubprocessProtocol]:
    transport, protocol = await type(loop).subprocess_exec(
        loop, *args, start_new_session=True, **kwargs
    )
    provider = _spawning.get()
    if provider is not None:
        provider._driver = transport
    return transport, protocol


async def driver_exited(within: float) -> bool:
    """Whether the driver of a provider still running has exited, as asyncio sees it within
    ``within`` seconds: the calls in flight fail as its pipe closes, which the loop may see
    before the process's exit. With no driver of its own to watch (a PLAYWRIGHT_BROWSER_PROVIDER
    of the user's), none is said to have exited, at once: each page failing so waited the whole
    ``within`` for nothing."""
    if not any(provider._driver is not None for provider in _running):
        return False
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not any(provider.exited() for provider in _running):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_EXIT_LOOK_S)
    return True
