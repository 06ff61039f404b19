"""``DashboardChart``: altair's ``JupyterChart`` with cheap updates and optional offline JS.

``JupyterChart`` loads vega-embed from a CDN. Where the browser has no internet (air-gapped
clusters, CI) the charts stay empty; with ``vl-convert-python`` installed the same view is
bundled into the page instead (``altair.JupyterChart.enable_offline`` does this, taking ~3 s, so
the bundle is cached on disk per altair / vl-convert version).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import altair as alt
from altair.utils.schemapi import debug_mode

__all__ = ["DashboardChart", "quick_charts", "use_offline_bundle"]

# SVG (not canvas) so the dashboard's CSS can recolour text and axes for dark themes.
EMBED_OPTIONS = {"renderer": "svg", "actions": {"export": True, "source": False,
                                                 "compiled": False, "editor": False}}


@contextlib.contextmanager
def quick_charts() -> Iterator[None]:
    """Build charts without altair's schema validation of every object as it is created.

    Validation costs tens of milliseconds per chart, more than a slider's whole budget; the
    builders in :mod:`aiadvisor.viz` are validated by the tests instead.
    """
    with debug_mode(False):
        yield


class DashboardChart(alt.JupyterChart):
    """A ``JupyterChart`` whose chart is replaced through :meth:`show`.

    ``show`` sends the new spec without re-validating it against the Vega-Lite schema (see
    :func:`quick_charts`).
    """

    def __init__(self, chart: alt.TopLevelMixin, **kwargs: Any) -> None:
        super().__init__(None, embed_options=EMBED_OPTIONS, **kwargs)
        self.show(chart)

    def show(self, chart: alt.TopLevelMixin) -> None:
        self.spec = chart.to_dict(validate=False)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "aiadvisor"


def use_offline_bundle(setting: str = "auto") -> bool:
    """Make :class:`DashboardChart` carry vega-embed itself instead of fetching it from a CDN.

    Parameters
    ----------
    setting : {"auto", "always", "never"}
        ``auto`` bundles when vl-convert-python is installed; ``always`` requires it.

    Returns
    -------
    bool
        Whether charts are now bundled.
    """
    if setting == "never":
        return False
    if importlib.util.find_spec("vl_convert") is None:
        if setting == "always":
            from ..errors import AIAdvisorError

            raise AIAdvisorError("offline_charts='always' needs vl-convert-python: "
                                 "pip install vl-convert-python")
        return False
    if "_esm" not in DashboardChart.__dict__:
        DashboardChart._esm = _offline_esm()
    return True


def _offline_esm() -> str:
    import vl_convert

    key = f"jupyterchart-{alt.__version__}-vlc{vl_convert.__version__}.js"
    path = _cache_dir() / key
    try:
        return path.read_text()
    except OSError:
        pass
    from altair.jupyter.jupyter_chart import load_js_src

    lines = load_js_src().split("\n")
    # As altair's enable_offline: drop the CDN imports; vl-convert bundles what they named.
    while lines and (not lines[0].strip() or lines[0].startswith(("import", "//"))):
        lines.pop(0)
    from altair.utils._importers import vl_version_for_vl_convert

    bundle = vl_convert.javascript_bundle("\n".join(lines), vl_version=vl_version_for_vl_convert())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(bundle)
    except OSError:
        pass  # a read-only home: bundle again next time
    return bundle
