"""The interpreter's cyclic garbage collector, set for a process that does nothing but serve.

A question allocates many short-lived containers (coroutines, futures, tasks, a page's
record). At CPython's default generation-0 threshold (700 net container allocations) the
collector runs a couple of times per question, and what is merely in flight at that moment is
promoted to the older generations, whose collections then walk every object the process
holds: 6 ms of CPU a question on ``bench/peers.py``'s loopback world, about a tenth of the
service process's own. At a threshold of 10,000 most of those containers die young without
ever being walked, and the older generations are next to never collected; freezing what
warm-up loaded (modules, templates, parsed lists) moves it out of the collector's sight for
good. Together: 2.6 ms a question.

This is process-wide state, so only the process's owner sets it: ``external-query serve``
does, from ``[server] gc_threshold`` and ``gc_freeze``, once the service has warmed up; a
host that embeds the library decides for its own process (``tune_collector``).
"""

from __future__ import annotations

import gc

__all__ = ["tune_collector"]


def tune_collector(threshold: int = 0, *, freeze: bool = False) -> None:
    """Set the collector's generation-0 ``threshold`` (0 leaves it as it is; the older
    generations' thresholds are kept) and, with ``freeze``, collect once and then move every
    object the process holds now into the permanent generation (``gc.freeze``): call it after
    warm-up, so that what stays for the process's life is never walked again. The collection
    first means no garbage is frozen with the rest. Raises ``ValueError`` for a negative
    threshold."""
    if threshold < 0:
        raise ValueError(f"threshold must be 0 or more, not {threshold}")
    if threshold:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
    if freeze:
        gc.collect()
        gc.freeze()
