"""The local measurement store: every step ``aa.verify`` / ``aa.verify_plan`` times on the
attached device, beside the cost model's prediction for it (DESIGN.md, user journey 4).

One JSON file, ``measurements.json`` in the user cache directory (the benchmark cache's:
``$AIADVISOR_CACHE_DIR``, ``$XDG_CACHE_HOME/aiadvisor`` or ``~/.cache/aiadvisor``;
``$AIADVISOR_MEASUREMENTS`` names another file), with a schema version. An append reads the
file, adds the record, writes a temporary file in the same folder, flushes it to disk and
renames it over the old one (``os.replace``, atomic on POSIX and Windows), so a crash at any
point leaves either the old file or the new one, never half of one. A file that cannot be read,
or of an older schema, is kept aside under another name (never deleted) and a new store starts;
a file of a newer schema (a newer aiadvisor) is left as it is and the record is not written.

:mod:`aiadvisor.costmodel.correction` turns a device's records into a correction of the
predictions for that device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["SCHEMA_VERSION", "Measurement", "append", "clear", "load", "problem", "store_path"]

#: Version of the file layout; records of another version are never mixed with these.
SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One measured step beside its prediction on the same device."""

    device: str
    """The device's name as the benchmarked spec gives it."""
    device_key: str
    """``kind/name``: what a correction is keyed by (see :func:`device_key`)."""
    model: str
    """The model's class name."""
    flops: float
    """FLOPs of the step (forward + backward, whole batch), from the traced profile."""
    batch_size: int
    mode: str
    precision: str
    predicted_step_s: float
    """The cost model's step time *without* a measured correction (so that the ratio
    measured / predicted always compares with the same model)."""
    measured_step_s: float
    """Median of ``num_steps`` timed steps."""
    num_steps: int
    aiadvisor_version: str
    torch_version: str
    timestamp: str
    """UTC, ISO 8601."""
    seq_len: int | None = None
    source: str = "verify"
    """``verify`` or ``verify_plan`` (its step as you run it)."""

    def __post_init__(self) -> None:
        for name in ("predicted_step_s", "measured_step_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and value != float("inf")):
                raise InvalidArgumentError(
                    f"{name}={value!r} is not valid: expected seconds > 0 (a finite number).")

    @property
    def ratio(self) -> float:
        """Measured over predicted step time."""
        return self.measured_step_s / self.predicted_step_s

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def device_key(kind: str, name: str) -> str:
    """The key records of one device share: ``"cpu/AMD EPYC 7763"``."""
    return f"{kind}/{name}"


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def store_path(path: str | os.PathLike | None = None) -> Path:
    """The store file: ``path``, ``$AIADVISOR_MEASUREMENTS``, else ``measurements.json`` in
    the benchmark cache directory (:func:`aiadvisor.hardware.cache_directory`)."""
    if path is not None:
        return Path(path)
    if os.environ.get("AIADVISOR_MEASUREMENTS"):
        return Path(os.environ["AIADVISOR_MEASUREMENTS"])
    from ..hardware.bench import cache_directory

    return cache_directory() / "measurements.json"


class _Unreadable(Exception):
    """The file is not a store of this schema: ``version`` is its schema version (None when
    it has none: a corrupt file)."""

    def __init__(self, why: str, *, version: int | None = None) -> None:
        super().__init__(why)
        self.version = version


def _read(path: Path) -> list[Measurement]:
    """The records of ``path`` ([] when it does not exist); raises :class:`_Unreadable`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _Unreadable(f"not JSON ({exc})") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int):
        raise _Unreadable("no schema_version")
    if version != SCHEMA_VERSION:
        raise _Unreadable(f"schema_version {version}, this aiadvisor reads {SCHEMA_VERSION}",
                          version=version)
    try:
        return [Measurement.from_dict(r) for r in data["records"]]
    except (KeyError, TypeError, InvalidArgumentError) as exc:
        raise _Unreadable(f"a malformed record ({type(exc).__name__}: {exc})") from None


def load(path: str | os.PathLike | None = None) -> list[Measurement]:
    """Every record of the store, oldest first; [] when there is none or the file is not a
    store of this schema (the next :func:`append` deals with it). Never writes."""
    try:
        return _read(store_path(path))
    except (_Unreadable, OSError):
        return []


def problem(path: str | os.PathLike | None = None) -> str | None:
    """Why the store file cannot be read (None when it reads, or does not exist)."""
    try:
        _read(store_path(path))
    except (_Unreadable, OSError) as exc:
        return str(exc)
    return None


def _aside_name(path: Path, why: str) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return path.with_name(f"{path.stem}.{why}-{stamp}{path.suffix}")


def _write(path: Path, records: list[Measurement]) -> None:
    """Write ``records`` to a temporary file beside ``path``, flush it to disk, rename it over
    ``path``. The temporary file is removed if anything fails before the rename."""
    payload = {"schema_version": SCHEMA_VERSION, "records": [r.to_dict() for r in records]}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError, AttributeError):  # the rename itself, where supported
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s sidecar lock file, where ``fcntl`` exists (POSIX), so
    that two processes appending at once do not drop each other's record."""
    try:
        import fcntl
    except ImportError:  # Windows: the atomic rename still keeps the file whole
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def append(record: Measurement, path: str | os.PathLike | None = None) -> Path | None:
    """Add ``record`` to the store; returns the file, or None when it was not written (a
    newer schema's file, or a folder that cannot be written: a warning says which).

    A corrupt file or one of an older schema is renamed to
    ``measurements.<why>-<UTC time>.json`` beside it (with a warning naming it) and a new store
    starts with ``record``.
    """
    target = store_path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target):
            try:
                records = _read(target)
            except _Unreadable as exc:
                if exc.version is not None and exc.version > SCHEMA_VERSION:
                    warnings.warn(f"Measurement store {target} was written by a newer aiadvisor "
                                  f"({exc}): left as it is, this measurement is not recorded.",
                                  stacklevel=2)
                    return None
                aside = _aside_name(target, "corrupt" if exc.version is None
                                    else f"v{exc.version}")
                os.replace(target, aside)
                warnings.warn(f"Measurement store {target} could not be read ({exc}): kept "
                              f"aside as {aside.name}; a new store starts here.", stacklevel=2)
                records = []
            _write(target, [*records, record])
    except OSError as exc:
        warnings.warn(f"Measurement store {target} could not be written ({exc}): this "
                      "measurement is not recorded.", stacklevel=2)
        return None
    return target


def clear(path: str | os.PathLike | None = None) -> int:
    """Empty the store (an atomic write of an empty one); returns how many records it held.

    Only this schema's records are cleared: a file this aiadvisor cannot read is left alone.
    """
    target = store_path(path)
    if not target.exists():
        return 0
    with _locked(target):
        try:
            records = _read(target)
        except _Unreadable as exc:
            raise InvalidArgumentError(
                f"The measurement store {target} is not one this aiadvisor reads ({exc}): "
                "left as it is; move or delete it by hand.") from None
        _write(target, [])
    return len(records)
