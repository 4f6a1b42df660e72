"""Garbage-collector settings for a process that serves the mesh (``mesh run``, ``mesh up``).

A serving process allocates a few hundred short-lived objects per request (models, dicts,
futures) and keeps many long-lived ones (modules, schemas, the tasks it retains). With
CPython's default thresholds (700, 10, 10) the objects of the requests in flight are promoted
before they die, which sets off full collections that walk everything the process holds:
measured at ~50 us per request in the HTTP gateway and in an agent (bench/gateway.py), about a
tenth of their CPU. Once started, :func:`tune_for_serving` moves what exists to the permanent
generation (``gc.freeze``: never scanned again) and lets the youngest generation grow to
20,000 objects, so request garbage dies young: ~10-20 us per request left.

Starting is another load: loading the modules and a ``mesh run`` of 1,000 agents build a few
hundred thousand objects that live on (modules, schemas, services, connections, cards) while the
default thresholds collect the growing heap again and again (a fifth of the start's CPU, and
~80 ms of the imports alone). So :func:`tune_for_starting`, around the command from before it loads
its modules, stops collecting, and :func:`tune_for_serving` collects once, freezes what is left
and collects again from then on, with the serving thresholds.

It is process-wide, so library code never calls it; the commands that own the process do.
Reference cycles are still collected, only less often.

It also fixes glibc's mmap threshold (:data:`MMAP_THRESHOLD`). By default glibc raises that
threshold each time a large block it had mapped is freed (up to 32 MB), so after the first
0.9 MB message every later one comes from the heap, whose free pages stay with the process:
an agent fed 0.9 MB requests sat ~150 MB above what it held live (bench/retention.py). A fixed
threshold keeps large payloads in their own mappings, given back to the system when freed.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

__all__ = ["MMAP_THRESHOLD", "SERVING_THRESHOLDS", "tune_for_serving", "tune_for_starting"]

#: Blocks of this size or more get a mapping of their own (glibc's initial default, kept fixed).
MMAP_THRESHOLD = 128 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)

#: Youngest generation 20,000 allocations (CPython: 700); the older ones as CPython's.
SERVING_THRESHOLDS = (20_000, 10, 10)


def tune_for_serving() -> None:
    """Freeze what the process holds now, raise the youngest generation's threshold and collect
    again (after :func:`tune_for_starting`)."""
    gc.collect()  # what startup left as garbage is not frozen for ever
    gc.freeze()
    gc.set_threshold(*SERVING_THRESHOLDS)
    gc.enable()
    _fix_mmap_threshold()


@contextlib.contextmanager
def tune_for_starting() -> Iterator[None]:
    """Around loading the modules, building, starting and serving the components: no collection
    until :func:`tune_for_serving` (reference counting still frees what is not in a cycle);
    collecting again, whatever happens, on the way out."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _fix_mmap_threshold() -> None:
    """glibc only (Linux): musl and macOS allocators return large blocks on their own."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # only here: every command imports this module, few serve

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's, no library search
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
