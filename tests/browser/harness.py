"""A Jupyter server on 127.0.0.1 and a driver for JupyterLab 4 / Notebook 7 in headless chromium.

Setup (opening a notebook, running cells) goes through ``window.jupyterapp`` (the server exposes
the app, as JupyterLab's own Galata does): no focus or keyboard races. What the user does that is
under test (clicking a tab, clicking "Insert below") is a real mouse click.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

TOKEN = "aiadvisor-browser-test"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
_URL_PREFIX = {"lab": "lab/tree", "notebook": "notebooks"}


def chromium_path() -> str | None:
    return os.environ.get("CHROMIUM") or shutil.which("chromium")


def write_notebook(path: Path, sources: list[str]) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {},
              "outputs": [], "source": src} for i, src in enumerate(sources)]
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                            "name": "python3"}}}
    path.write_text(json.dumps(notebook, indent=1))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterServer:
    """``jupyter lab`` (or ``jupyter notebook``) with isolated config, settings and runtime dirs.

    A ``jupyter lab`` server also serves Notebook 7 (its server extension is enabled by
    default): ``url(name, app="notebook")`` opens the same file in Notebook 7.
    """

    def __init__(self, root: Path, app: str = "lab") -> None:
        self.root, self.app = root, app
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = root / f"server-{app}.log"

    def _env(self) -> dict[str, str]:
        state = self.root / f".jupyter-{self.app}"
        news = state / "settings" / "@jupyterlab" / "apputils-extension"
        news.mkdir(parents=True, exist_ok=True)  # no "Jupyter news?" toast over the notebook
        (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
        # An empty device-benchmark cache, as a fresh machine has: a report with no hardware
        # reads a cached benchmark of the attached device, so a developer's own calibration
        # (~/.cache/aiadvisor) must not change what the kernels show.
        return dict(os.environ, AIADVISOR_CACHE_DIR=str(state / "aiadvisor-cache"),
                    JUPYTER_CONFIG_DIR=str(state / "config"),
                    JUPYTER_DATA_DIR=str(state / "data"),
                    JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
                    JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
                    JUPYTER_RUNTIME_DIR=str(state / "runtime"))

    def start(self) -> JupyterServer:
        jupyter = Path(sys.executable).with_name("jupyter")
        cmd = [str(jupyter), self.app, "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
               f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={self.root}",
               # window.jupyterapp for the driver, in JupyterLab and in Notebook 7
               "--LabApp.expose_app_in_browser=True",
               "--JupyterNotebookApp.expose_app_in_browser=True",
               "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               "--LabApp.extension_manager=readonly"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, env=self._env(), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_up()
        return self

    def _wait_up(self, timeout_s: float = 60) -> None:
        url = f"http://127.0.0.1:{self.port}/api/status?token={TOKEN}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=1).read()
                return
            except OSError as exc:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        "jupyter exited:\n" + self.log_path.read_text()[-2000:]) from exc
                time.sleep(0.25)
        raise RuntimeError(f"jupyter {self.app} did not answer in {timeout_s} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # our own process group (start_new_session)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def url(self, notebook: str, app: str | None = None) -> str:
        prefix = _URL_PREFIX[app or self.app]
        return f"http://127.0.0.1:{self.port}/{prefix}/{notebook}?token={TOKEN}&reset"

    def delete_sessions(self) -> None:
        """Shut the kernels down (frees the CPU for the next test)."""
        base = f"http://127.0.0.1:{self.port}/api/sessions"
        headers = {"Authorization": f"token {TOKEN}"}
        sessions = json.loads(urllib.request.urlopen(
            urllib.request.Request(base, headers=headers)).read())
        for session in sessions:
            urllib.request.urlopen(urllib.request.Request(
                f"{base}/{session['id']}", method="DELETE", headers=headers))


def launch_browser(playwright: Any, profile_dir: Path) -> Any:
    # Playwright refuses --user-data-dir in args; a persistent context on a fresh dir is that.
    return playwright.chromium.launch_persistent_context(
        str(profile_dir), executable_path=chromium_path(), headless=True,
        viewport={"width": 1280, "height": 1000},
        permissions=["clipboard-read", "clipboard-write"], args=CHROMIUM_FLAGS)


PANEL = ("(() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
         " return w && w.content && w.content.model ? w : null; })()")


class NotebookPage:
    """Drives the open notebook of JupyterLab 4 or Notebook 7 through ``window.jupyterapp``."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def wait_ready(self, timeout_ms: int = 60_000) -> None:
        self.page.wait_for_function(f"""() => {{ const p = {PANEL};
            if (!p || !p.context.isReady) return false;
            const k = p.sessionContext.session && p.sessionContext.session.kernel;
            return !!k && k.connectionStatus === 'connected' && k.status === 'idle'; }}""",
                                    timeout=timeout_ms)

    def sources(self) -> list[str]:
        return self.page.evaluate(
            f"() => {PANEL}.content.model.sharedModel.cells.map(c => c.getSource())")

    def run(self, index: int, timeout_ms: int = 90_000) -> None:
        """Run cell ``index`` and wait until it has finished; fail on an error output."""
        self.page.evaluate(f"""(i) => {{ const p = {PANEL};
            p.content.activeCellIndex = i; p.content.deselectAll();
            window.jupyterapp.commands.execute('notebook:run-cell'); }}""", index)
        self.page.wait_for_function(f"""(i) => {{ const p = {PANEL};
            return p.content.model.cells.get(i).executionCount !== null &&
                   p.sessionContext.session.kernel.status === 'idle'; }}""", arg=index,
                                    timeout=timeout_ms)
        error = self.page.evaluate(
            f"""(i) => {{ const o = {PANEL}.content.model.cells.get(i).outputs;
            for (let j = 0; j < o.length; j++) {{ const d = o.get(j).toJSON();
              if (d.output_type === 'error') return d.ename + ': ' + d.evalue; }}
            return ''; }}""", index)
        if error:
            raise AssertionError(f"cell {index} raised {error}")

    def output_text(self, index: int) -> str:
        return self.page.evaluate(
            f"""(i) => {{ const o = {PANEL}.content.model.cells.get(i).outputs;
            let t = ''; for (let j = 0; j < o.length; j++) {{ const d = o.get(j).toJSON();
              t += [].concat(d.text || (d.data && d.data['text/plain']) || []).join(''); }}
            return t; }}""", index)

    def wait_source(self, index: int, expected: str, timeout_s: float = 10) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            sources = self.sources()
            if len(sources) > index and sources[index] == expected:
                return True
            time.sleep(0.02)
        return False

    def set_theme(self, theme: str) -> None:
        self.page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme',"
                           " {theme: t})", theme)
        self.page.wait_for_function("(t) => document.body.dataset.jpThemeName === t", arg=theme,
                                    timeout=10_000)
