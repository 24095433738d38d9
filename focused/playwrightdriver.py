"""scrapy-playwright's browser provider for rendering crawls (``focused.render``).

Loaded by scrapy-playwright only (``PLAYWRIGHT_BROWSER_PROVIDER``), so a crawl that does not
render never imports Playwright.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter

from scrapy_playwright.provider import PlaywrightBrowserProvider

_starting: Counter[asyncio.AbstractEventLoop] = Counter()  # providers starting, per loop


class DriverInItsOwnSession(PlaywrightBrowserProvider):
    """scrapy-playwright's browser provider, starting Playwright's driver (Node) in a session of
    its own.

    Ctrl-C in a terminal signals the crawl's whole process group. Node dies of a SIGINT until
    the driver has loaded and set its own handler (0.1-0.3 s after the engine starts): the
    browser could not launch, the pause became a crawl that failed its seed. Out of the group,
    the driver and Chromium only stop when the crawl closes them (or its pipe to them closes).
    """

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # Playwright spawns the driver with asyncio.create_subprocess_exec, whose loop's
        # subprocess_exec passes other keyword arguments on to subprocess.Popen. The http and
        # https download handlers start at once on the same loop: the last one out restores it.
        if not _starting[loop]:
            loop.subprocess_exec = functools.partial(  # type: ignore[method-assign]
                type(loop).subprocess_exec, loop, start_new_session=True
            )
        _starting[loop] += 1
        try:
            await super().start()
        finally:
            _starting[loop] -= 1
            if not _starting[loop]:
                del loop.subprocess_exec
                del _starting[loop]
