"""Run the notebooks in notebooks/ in a real kernel (nbclient) for the notebook tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: First cell of an offline run: the kernel refuses every name lookup and connection that does
#: not stay on this machine, so a notebook that tries to download anything fails loudly.
OFFLINE_GUARD = '''
import socket as _socket

_LOCAL = {"localhost", "127.0.0.1", "::1"}
_real_getaddrinfo, _real_connect = _socket.getaddrinfo, _socket.socket.connect
_real_connect_ex = _socket.socket.connect_ex


def _check_host(host):
    if isinstance(host, bytes):
        host = host.decode()
    if host not in _LOCAL:
        raise OSError(f"blocked by the offline guard: {host!r}")


def _getaddrinfo(host, *args, **kwargs):
    _check_host(host)
    return _real_getaddrinfo(host, *args, **kwargs)


def _connect(self, address):
    if self.family in (_socket.AF_INET, _socket.AF_INET6):
        _check_host(address[0])
    return _real_connect(self, address)


def _connect_ex(self, address):
    if self.family in (_socket.AF_INET, _socket.AF_INET6):
        _check_host(address[0])
    return _real_connect_ex(self, address)


_socket.getaddrinfo, _socket.socket.connect, _socket.socket.connect_ex = (
    _getaddrinfo, _connect, _connect_ex)
'''

#: Last cell of an offline run: proves the guard was still in place at the end.
#: 192.0.2.1 is TEST-NET-1 (RFC 5737), never routed, so even a failed guard sends nothing out.
OFFLINE_PROBE = '''
import socket as _socket
try:
    _socket.create_connection(("192.0.2.1", 80), timeout=1)
except OSError as error:
    print(error)
'''


def shared_cache_dir(tmp_path_factory: Any) -> Path:
    """One aiadvisor cache folder for the whole test session, so the notebooks that benchmark
    this machine (``aa.verify``) calibrate it once between them, not each on its own; never the
    user's ~/.cache."""
    path = tmp_path_factory.getbasetemp() / "aiadvisor-cache"
    path.mkdir(exist_ok=True)
    return path


def execute_notebook(path: Path, *, timeout_s: int = 600, offline: bool = False) -> Any:
    """Execute the notebook at ``path`` top to bottom and return it with its outputs.

    ``timeout_s`` is per cell. With ``offline=True`` a first cell blocks the network in the
    kernel and a last cell probes it (see :data:`OFFLINE_GUARD`); both are tagged
    ``offline-guard``. The file on disk is not changed.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if offline:
        tags = {"tags": ["offline-guard"]}
        nb.cells.insert(0, nbformat.v4.new_code_cell(OFFLINE_GUARD, metadata=tags))
        nb.cells.append(nbformat.v4.new_code_cell(OFFLINE_PROBE, metadata=tags))
    client = nbclient.NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path(path).parent)}})
    client.execute()
    return nb


def error_outputs(nb: Any) -> list[dict]:
    """Every error output of the notebook's code cells."""
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "error"]


def cell_outputs(nb: Any, source_start: str) -> list[dict]:
    """Outputs of the one code cell whose source starts with ``source_start``."""
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(source_start)]
    return cell.outputs


def output_text(outputs: list[dict]) -> str:
    """Printed text and plain-text results of a cell, joined."""
    parts = []
    for o in outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif "data" in o:
            parts.append(o["data"].get("text/plain", ""))
    return "\n".join(parts)


def course_checks(path: Path, *, exercises: int = 4, timeout_s: int = 300,
                  benchmarks: bool = False) -> dict[str, Any]:
    """The fixtures and checks every course notebook shares, for a test module to take in with
    ``globals().update(course_checks(NOTEBOOK))``: ``committed`` (the notebook as stored) and
    ``executed`` (run offline), and three tests: every cell runs without touching the network,
    the stored notebook carries no outputs, and each exercise's solution sits under a collapsed
    "#### Solution" heading and runs. The module is skipped when a package the course notebooks
    need is missing. ``benchmarks``: the notebook benchmarks this machine (``aa.verify``); its
    cache goes to the session's temporary folder (:func:`shared_cache_dir`), not ``~/.cache``."""
    import os

    import pytest

    nbformat = pytest.importorskip("nbformat")
    for package in ("nbclient", "torch", "transformers", "altair"):
        pytest.importorskip(package)

    @pytest.fixture(scope="module")
    def committed():
        return nbformat.read(path, as_version=4)

    @pytest.fixture(scope="module")
    def executed(tmp_path_factory):
        if not benchmarks:
            return execute_notebook(path, timeout_s=timeout_s, offline=True)
        # The kernel inherits this environment.
        old = os.environ.get("AIADVISOR_CACHE_DIR")
        os.environ["AIADVISOR_CACHE_DIR"] = str(shared_cache_dir(tmp_path_factory))
        try:
            return execute_notebook(path, timeout_s=timeout_s, offline=True)
        finally:
            if old is None:
                os.environ.pop("AIADVISOR_CACHE_DIR", None)
            else:
                os.environ["AIADVISOR_CACHE_DIR"] = old

    def test_every_cell_runs_without_error_and_offline(executed):
        assert error_outputs(executed) == []
        assert output_text(executed.cells[-1].outputs).startswith("blocked by the offline guard")

    def test_committed_notebook_has_no_outputs(committed):
        code = [c for c in committed.cells if c.cell_type == "code"]
        assert code and all(c.outputs == [] and c.execution_count is None for c in code)

    def test_each_solution_sits_under_a_collapsed_heading_and_runs(committed, executed):
        headings = [i for i, c in enumerate(committed.cells)
                    if c.source.startswith("#### Solution")]
        assert len(headings) == exercises
        for i in headings:
            assert committed.cells[i].metadata["jp-MarkdownHeadingCollapsed"] is True
            answer = committed.cells[i + 1]
            assert answer.cell_type == "code" and "solution" in answer.metadata["tags"]
        answers = [c for c in executed.cells if "solution" in c.metadata.get("tags", [])]
        assert len(answers) == exercises and all(c.outputs for c in answers)

    return {name: value for name, value in locals().items()
            if name in ("committed", "executed") or name.startswith("test_")}
