"""Keep torch's tracing logs out of the user's cell: collect them during profiling and summarise
them once in ``prof.notes``.

FakeTensorMode logs ``log.exception("failed while attempting to run meta for %s", func)``
(``torch._subclasses.fake_tensor``) before re-raising, and the profiler then falls back to the
meta device or a real batch: the fallback is the answer, the traceback is noise.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

#: Loggers torch writes to while an op runs under fake tensors, the meta device or dispatch.
TORCH_TRACE_LOGGERS = ("torch._subclasses.fake_tensor", "torch._subclasses.meta_utils",
                       "torch._ops", "torch._dispatch.python",
                       "torch.fx.experimental.symbolic_shapes")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def torch_logs_collected() -> Iterator[list[logging.LogRecord]]:
    """Route warning-and-above records of :data:`TORCH_TRACE_LOGGERS` into the yielded list
    instead of their handlers; each logger's handlers and ``propagate`` flag are restored."""
    collect = _Collect()
    saved = []
    for name in TORCH_TRACE_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers = [collect]
        logger.propagate = False
    try:
        yield collect.records
    finally:
        for logger, handlers, propagate in saved:
            logger.handlers = handlers
            logger.propagate = propagate


def summary(records: list[logging.LogRecord]) -> str | None:
    """One note for the collected records (None when there are none): how many, which ops."""
    problems = [r for r in records if r.levelno >= logging.WARNING]
    if not problems:
        return None
    ops = []
    for r in problems:
        subject = str(r.args[0]) if isinstance(r.args, tuple) and r.args else r.getMessage()
        if subject not in ops:
            ops.append(subject)
    shown = ", ".join(ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")
    first = problems[0]
    cause = ""
    if first.exc_info and first.exc_info[1] is not None:
        exc = first.exc_info[1]
        cause = f" (first: {type(exc).__name__}: {str(exc).splitlines()[0][:160]})"
    return (f"torch logged {len(problems)} problem(s) while tracing ({shown}){cause}; they are "
            "kept here instead of stderr, and the profile came from the fallback path noted.")
