"""What a strategy queue's saved state (``requests.queue/active.json``) may hold.

Scrapy writes what the queue's ``close()`` returned into ``JOBDIR/requests.queue/active.json``
on a pause and hands it back to the queue on resume, where ``restore`` reads it. A value of
another type there (a damaged file, or one edited by hand) failed with a traceback as the
scheduler opened, and the crawl cascaded into more. Each strategy names the shape of each key
it saves (``StrategyQueue.state_shapes``), and the JOBDIR check (``focused.jobchecks``) refuses
a state of another shape before anything starts.

A shape is a predicate on the value JSON gave back. They are deliberately as strict as what
``restore`` and the code after it read: whole numbers for counts, finite numbers for scores,
hexadecimal strings for fingerprints.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

Shape = Callable[[Any], bool]

# An SQLite INTEGER: the frontier stores the sequence numbers there.
MAX_INTEGER = 2**63 - 1


def whole(value: Any) -> bool:
    """A whole number of 0 or more, that SQLite can store."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INTEGER


def number(value: Any) -> bool:
    """A finite number (JSON also gives back NaN and Infinity)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def text(value: Any) -> bool:
    return isinstance(value, str)


def flag(value: Any) -> bool:
    return isinstance(value, bool)


def fingerprint(value: Any) -> bool:
    """A request fingerprint as hexadecimal text."""
    if not isinstance(value, str):
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def optional(shape: Shape) -> Shape:
    return lambda value: value is None or shape(value)


def list_of(shape: Shape) -> Shape:
    return lambda value: isinstance(value, list) and all(shape(item) for item in value)


def dict_of(key: Shape, value: Shape) -> Shape:
    return lambda found: (
        isinstance(found, dict) and all(key(name) and value(item) for name, item in found.items())
    )


def row(*shapes: Shape) -> Shape:
    """A list of fixed length, one shape per place (JSON has no tuples)."""
    return lambda value: (
        isinstance(value, list)
        and len(value) == len(shapes)
        and all(shape(item) for shape, item in zip(shapes, value, strict=True))
    )


def record(required: dict[str, Shape], optional_keys: dict[str, Shape] | None = None) -> Shape:
    """A dict with every key of ``required`` and perhaps those of ``optional_keys``, each of
    its shape (other keys are let be)."""
    others = optional_keys or {}

    def fits(value: Any) -> bool:
        if not isinstance(value, dict) or not required.keys() <= value.keys():
            return False
        shapes = required | others
        return all(shape(value[name]) for name, shape in shapes.items() if name in value)

    return fits


def whole_text(value: Any) -> bool:
    """A whole number as a JSON object's key (``int(key)`` is read back)."""
    return isinstance(value, str) and value.isascii() and value.isdigit()


def random_state(value: Any) -> bool:
    """What ``schedulers.local.random_state`` saves (or nothing: the seed starts it again)."""
    if not value:
        return value is None or value == []
    try:
        version, internal, gauss = value
        random.Random().setstate((version, tuple(internal), gauss))
    except (TypeError, ValueError, OverflowError):
        return False
    return True
