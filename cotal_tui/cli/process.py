"""What the ``cotal`` process sets up before a command runs: the aiohttp deferral for nats-py,
library logs kept off the terminal, the ``COTAL_LOG`` log file (with, at exit, what kept
``except Exception`` handlers let go and which owned tasks failed), and glibc's mmap threshold.

Done here, by the entry point, never by importing a package: ``import meshview`` changes
nothing in the interpreter that imports it."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from pathlib import Path

from meshview.link import natsload
from meshview.link.home import cotal_home

LOG_ENV = "COTAL_LOG"
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL}
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LIBRARY_LOGGERS = ("nats", "asyncio")
_log_file: Path | None = None


def prepare_process() -> None:
    """Before any command module is imported: nats-py must not pull in aiohttp (~450 ms of
    CPU) unless a websocket URL needs it (:mod:`meshview.link.natsload`)."""
    natsload.install()


def quiet_library_logs() -> None:
    """Libraries' log records never reach the terminal raw: stderr carries our own one-sentence
    diagnostics (and stdout the line stream), so a stray nats-py warning such as "Server may
    ignore filters…" would break both. Failures that matter reach us through callbacks."""
    for name in LIBRARY_LOGGERS:
        log = logging.getLogger(name)
        log.addHandler(logging.NullHandler())
        log.propagate = False
    # our own loggers (``cotal.observer``...) too: with no handler anywhere, Python's last
    # resort would print their warnings on stderr
    logging.getLogger("cotal").addHandler(logging.NullHandler())


def log_level(value: str) -> int | None:
    """``COTAL_LOG``'s level: a level name (``debug``, ``info``...); unset, empty or ``0`` is
    off; any other value means debug."""
    v = value.strip().lower()
    if v in ("", "0"):
        return None
    return LOG_LEVELS.get(v, logging.DEBUG)


def log_path(command: str, home: Path | None = None) -> Path:
    """``$COTAL_HOME/log/cotal-<command>-<pid>.log``: one file per process."""
    return (home or cotal_home()) / "log" / f"cotal-{command}-{os.getpid()}.log"


def start_log_file(command: str) -> Path | None:
    """With ``COTAL_LOG`` set, Python logging (ours and the libraries') goes to a file under
    ``$COTAL_HOME/log/``; without it nothing is written anywhere. Returns the file's path."""
    global _log_file
    level = log_level(os.environ.get(LOG_ENV, ""))
    if level is None or _log_file is not None:  # once per process (`cotal demo` runs `watch`)
        return _log_file
    path = log_path(command)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as e:
        print(f"cotal: {LOG_ENV} is set but {path} cannot be written ({e.strerror or e}); "
              "not logging.", file=sys.stderr)
        return None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    for name in LIBRARY_LOGGERS:  # kept off the terminal, not out of the file
        logging.getLogger(name).addHandler(handler)
    _log_file = path
    atexit.register(report_counts)  # after logging's own atexit: runs first, the file still open
    return path


def report_counts() -> None:
    """Into the log file, at exit: every exception a kept ``except Exception`` let go and every
    owned task that failed, by site (``meshview.errors.swallowed``, ``meshview.tasks``)."""
    from meshview.errors import swallowed_counts
    from meshview.tasks import task_failures

    log = logging.getLogger("cotal.errors")
    for what, counts in (("swallowed", swallowed_counts()), ("task failed", task_failures())):
        if not counts:
            log.info("%s: none", what)
        for site, n in sorted(counts.items()):
            log.warning("%s: %d at %s", what, n, site)


# glibc raises its mmap threshold each time a large block is freed, so after the first ~1 MiB
# message every later one comes from the heap, which fragments and never shrinks: measured
# +101 MB RSS (135 MB on a loaded CI box) over 300 messages of 900 KiB, against +43 MB with the
# threshold pinned. Pinned, a block of 256 KiB or more is its own mapping, returned on free.
MMAP_THRESHOLD = 256 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt(3) parameter number


def steady_malloc() -> bool:
    """Pin glibc's mmap threshold so freed large messages go back to the OS; False where the
    C library is not glibc (musl, macOS), which leaves the allocator as it is."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
