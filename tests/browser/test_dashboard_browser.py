"""``%load_ext aiadvisor`` + ``%advise model x`` in JupyterLab 4 and Notebook 7 (headless chromium).

Two scenarios in each front end:
- default arguments on this machine's own device (no ``--hardware``: on a CPU-only machine the
  target is the CPU, which is not a catalog row): every tab opens without an error box, the
  batch and device sliders move by mouse drag as a user would, and "Insert below" puts the code
  under the %advise cell;
- a catalog GPU: a real click on the first "Insert below" button, the cell under the %advise
  cell holds that recommendation's code, and the clipboard fallback.
And in JupyterLab, ``--mode generate`` on the built-in decoder: the Serving tab, its concurrency
slider dragged, and an engine's code inserted.
Screenshots (each tab; light and dark theme) go to artifacts/browser/.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from .harness import JupyterServer, NotebookPage, chromium_path, launch_browser, write_notebook

pytestmark = pytest.mark.browser
OFFLINE_CHARTS = importlib.util.find_spec("vl_convert") is not None

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "browser"

SETUP = """\
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
x = torch.randn(32, 256)
"""
ADVISE = "%load_ext aiadvisor\n%advise model x --hardware \"NVIDIA A100 SXM4 80GB\""
# Kernel side, after the click: what the button reported and the code it carried.
CHECK = """\
import json
_dash = get_ipython().find_magic("advise").__self__.last_view
_button = _dash.views[-1].cards[0][1]
print(json.dumps({"status": _button.status, "code": _button.code,
                  "first": _dash.report.recommendations[0].code}))
# Where a front end has no notebook model to edit (VS Code, Colab) the button copies instead:
_dash.views[-1].cards[1][1].mode = "copy"
"""
COPIED = "print(_dash.views[-1].cards[1][1].status)"
END = "# end of notebook"


def _skip_without_browser() -> None:
    if chromium_path() is None:
        pytest.skip("needs Debian's chromium on PATH (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    pytest.importorskip("jupyterlab")


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory):
    """One ``jupyter lab`` server (it serves Notebook 7 too) and one chromium for the module."""
    _skip_without_browser()
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("jupyter")
    server = JupyterServer(root, "lab").start()
    try:
        with sync_playwright() as pw:
            context = launch_browser(pw, root / "chromium-profile")
            yield server, context
            context.close()
    finally:
        server.stop()


def _open_tab(page, title: str) -> None:
    page.locator(".aiadvisor-dashboard .lm-TabBar-tab", has_text=title).first.click()


def aa_detected_vendor() -> str:
    import aiadvisor as aa

    spec = aa.hardware.detect()
    return spec.vendor if spec.kind == "gpu" else ""


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


def _copy_fallback(page, nb: NotebookPage) -> dict:
    """Click the second button, switched to copy mode: clipboard, no new cell, "copied"."""
    count = len(nb.sources())
    page.locator(".aiadvisor-insert:visible").nth(1).click()
    page.wait_for_function("() => navigator.clipboard.readText().then(t => t.length > 0)",
                           timeout=5_000)
    clipboard = page.evaluate("() => navigator.clipboard.readText()")
    shown = page.locator(".aiadvisor-code:visible").nth(1).inner_text()
    nb.run(4)
    return {"clipboard": clipboard, "shown": shown, "status": nb.output_text(4).strip(),
            "cells_added": len(nb.sources()) - count}


def _run_scenario(jupyter, app: str, *, dark: bool) -> dict:
    server, context = jupyter
    name = f"advise_{app}.ipynb"
    write_notebook(server.root / name, [SETUP, ADVISE, CHECK, COPIED, END])
    page = context.new_page()
    started = time.perf_counter()
    try:
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(server.url(name, app))
        nb = NotebookPage(page)
        nb.wait_ready()
        nb.set_theme("JupyterLab Light")  # the settings (and a dark theme) persist across apps
        timings = {"ready_s": time.perf_counter() - started}
        nb.run(0)
        timings["setup_s"] = time.perf_counter() - started
        nb.run(1)
        page.locator(".aiadvisor-dashboard .aiadvisor-header").first.wait_for(timeout=30_000)
        timings["advise_s"] = time.perf_counter() - started
        if OFFLINE_CHARTS:  # else vega comes from a CDN, which a sandboxed CI cannot reach
            page.locator(".aiadvisor-dashboard .vega-embed svg").first.wait_for(timeout=30_000)
        _shoot(page, f"{app}_profile")
        _open_tab(page, "Recommendations")
        button = page.locator(".aiadvisor-insert:visible").first
        button.wait_for(timeout=30_000)
        shown = page.locator(".aiadvisor-code:visible").first.inner_text()
        button.click()
        inserted = nb.wait_source(2, shown)
        page.locator(".jp-Cell .cm-content", has_text=shown.splitlines()[0]).first.wait_for(
            timeout=5_000)
        _shoot(page, f"{app}_recommendations")
        page.locator(".jp-Cell").nth(2).scroll_into_view_if_needed()
        _shoot(page, f"{app}_inserted")
        nb.run(3)  # CHECK moved from 2 to 3 by the inserted cell
        kernel_side = json.loads(nb.output_text(3).strip().splitlines()[-1])
        copied = _copy_fallback(page, nb) if app == "lab" else None
        if dark:
            nb.set_theme("JupyterLab Dark")
            _open_tab(page, "Profile")
            time.sleep(0.5)
            _shoot(page, f"{app}_profile_dark")
            _open_tab(page, "Hardware")
            time.sleep(0.5)
            _shoot(page, f"{app}_hardware_dark")
        timings["done_s"] = time.perf_counter() - started
        print(app, {k: round(v, 1) for k, v in timings.items()})
        return {"inserted": inserted, "shown": shown, "kernel": kernel_side, "copied": copied,
                "sources": nb.sources(), "errors": errors}
    except Exception:
        _shoot(page, f"{app}_ERROR")
        raise
    finally:
        page.close()
        server.delete_sessions()  # free the CPU for the next front end


# --- default arguments on the attached device ---------------------------------------------------
ADVISE_DEFAULT = "%load_ext aiadvisor\n%advise model x"
STATE = """\
import json
_dash = get_ipython().find_magic("advise").__self__.last_view
print(json.dumps({"batch": _dash.report.profile.batch_size,
                  "devices": _dash.report.options["num_devices"],
                  "target": _dash.report.hardware_spec.name,
                  "kind": _dash.report.hardware_spec.kind,
                  "measured": _dash.report.hardware_spec.measured,
                  "calibrate_shown": _dash.calibrate_row.layout.display != "none",
                  "errors": [o.get("text", "") for o in _dash.errors.outputs],
                  "first": _dash.report.recommendations[0].code}))
"""
#: What an error looks like in a dashboard: a traceback or stderr in its Output, or a widget
#: that failed to render.
ERROR_BOXES = (".aiadvisor-dashboard [data-mime-type='application/vnd.jupyter.stderr'], "
               ".aiadvisor-dashboard .jp-RenderedText[data-mime-type*='error']")


def _slider_step_right(page, description: str) -> str:
    """Drag a slider's handle right, as a mouse user does, until its readout shows the next value.

    The drag moves a few pixels at a time and lets go as soon as the readout changes, so it
    lands on the next option whatever the slider's width. (A keyboard step is not used: Notebook 7
    does not pass arrow keys on to the handle.) Returns the readout after the drag.
    """
    slider = page.locator(".aiadvisor-controls .widget-slider", has_text=description).first
    handle = slider.locator(".noUi-handle")
    readout = slider.locator(".widget-readout")
    before = readout.inner_text().strip()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for dx in range(2, 400, 2):
        page.mouse.move(x + dx, y)
        if readout.inner_text().strip() != before:
            break
    page.mouse.up()
    return readout.inner_text().strip()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _wait_header(page, text: str) -> None:
    page.locator(".aiadvisor-dashboard .aiadvisor-header", has_text=text).first.wait_for(
        timeout=30_000)


def _tab_problems(page) -> list[str]:
    boxes = page.locator(ERROR_BOXES)
    texts = [boxes.nth(i).inner_text() for i in range(boxes.count())]
    failed = page.locator(".aiadvisor-dashboard", has_text="Error displaying widget")
    return texts + (["Error displaying widget"] if failed.count() else [])


def _run_default_scenario(jupyter, app: str) -> dict:
    server, context = jupyter
    name = f"default_{app}.ipynb"
    write_notebook(server.root / name, [SETUP, ADVISE_DEFAULT, STATE, END])
    page = context.new_page()
    try:
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.goto(server.url(name, app))
        nb = NotebookPage(page)
        nb.wait_ready()
        nb.set_theme("JupyterLab Light")
        nb.run(0)
        nb.run(1)  # raises if the cell shows an error
        _wait_header(page, "per step on")
        if OFFLINE_CHARTS:
            page.locator(".aiadvisor-dashboard .vega-embed svg").first.wait_for(timeout=30_000)
        problems = {}
        for title in ("Profile", "Hardware", "Precision", "Parallelism", "Recommendations"):
            _open_tab(page, title)
            page.locator(".aiadvisor-dashboard .lm-TabBar-tab.lm-mod-current",
                         has_text=title).first.wait_for(timeout=10_000)
            time.sleep(0.5)  # the tab's content is drawn by the kernel on first opening
            problems[title] = _tab_problems(page)
            _shoot(page, f"{app}_default_{title.lower()}")
        _open_tab(page, "Profile")
        # The example batch is 32: one step right on the batch slider is 64, on devices 2.
        _slider_step_right(page, "batch size")
        _wait_header(page, "batch 64")
        _slider_step_right(page, "devices")
        _wait_header(page, "× 2")
        _shoot(page, f"{app}_default_sliders")
        problems["after sliders"] = _tab_problems(page)
        _open_tab(page, "Recommendations")
        # Opening the tab asks the kernel to redraw the cards for the new settings; until that
        # arrives the page still shows the cards drawn at batch 32 on one device. The STATE
        # cell queues behind the redraw, so once it printed, wait for the page to show the
        # kernel's first recommendation, then click.
        nb.run(2)
        state = json.loads(nb.output_text(2).strip().splitlines()[-1])
        code = page.locator(".aiadvisor-code:visible").first
        deadline = time.monotonic() + 30
        while _lines(code.inner_text()) != _lines(state["first"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        button = page.locator(".aiadvisor-insert:visible").first
        button.wait_for(timeout=30_000)
        before = len(nb.sources())
        button.click()
        # The page shows the code as text (the browser may drop trailing spaces): wait for the
        # new cell, then compare line by line with trailing whitespace stripped.
        deadline = time.monotonic() + 10
        while len(nb.sources()) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        inserted = len(nb.sources()) == before + 1
        _shoot(page, f"{app}_default_inserted")
        return {"inserted": inserted, "state": state, "problems": problems,
                "sources": nb.sources(), "console": console}
    except Exception:
        _shoot(page, f"{app}_default_ERROR")
        raise
    finally:
        page.close()
        server.delete_sessions()


@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_default_arguments_on_this_machine(jupyter, app):
    import aiadvisor as aa

    result = _run_default_scenario(jupyter, app)
    state = result["state"]
    # No --hardware: the target is the attached device as detect() names it (on a CPU-only
    # machine, the CPU, which no catalog lookup knows).
    assert state["target"] == aa.hardware.detect().name
    # A fresh machine (the server's kernels see an empty benchmark cache): a CPU is priced on
    # its estimated peaks and the dashboard offers to calibrate it.
    if state["kind"] == "cpu":
        assert not state["measured"] and state["calibrate_shown"], state
    assert result["problems"] == {k: [] for k in result["problems"]}, result["problems"]
    assert (state["batch"], state["devices"]) == (64, 2)
    assert state["errors"] == []
    assert result["inserted"], result["sources"]
    assert result["sources"][1] == ADVISE_DEFAULT
    # The cell under %advise holds recommendation 1's code as the kernel has it after the
    # slider moves (the page re-renders the cards when the report changes).
    assert _lines(result["sources"][2]) == _lines(state["first"])
    assert not [e for e in result["console"] if "aiadvisor" in e or "anywidget" in e], result


# --- a catalog device: insert, copy fallback, themes -------------------------------------------
@pytest.mark.parametrize("app", ["lab", "notebook"])
def test_insert_below_puts_the_recommendation_under_the_advise_cell(jupyter, app):
    result = _run_scenario(jupyter, app, dark=app == "lab")
    assert result["inserted"], result["sources"]
    # The new cell (index 2, right under %advise) holds recommendation 1's code, as the kernel
    # knows it, and the button reported the insertion back to the kernel.
    assert result["kernel"]["code"] == result["kernel"]["first"]
    assert result["sources"][2] == result["kernel"]["first"]
    assert result["sources"][1] == ADVISE
    assert result["kernel"]["status"] == "inserted"
    if result["copied"] is not None:  # JupyterLab run: the clipboard fallback too
        copied = result["copied"]
        assert copied["status"] == "copied" and copied["cells_added"] == 0
        assert copied["clipboard"].strip() == copied["shown"].strip()
    assert not [e for e in result["errors"] if "aiadvisor" in e or "anywidget" in e], result


# --- mode generate: the Serving tab --------------------------------------------------------------
SETUP_LM = """\
from aiadvisor import examples
llm, ids = examples.build("tiny-gpt")
"""
ADVISE_LM = '%load_ext aiadvisor\n%advise llm ids --mode generate --hardware "NVIDIA L4"'
#: The same with default arguments: the machine's own device (a CPU here).
ADVISE_LM_DEFAULT = "%load_ext aiadvisor\n%advise llm ids --mode generate"
SERVING_STATE = """\
import json
import aiadvisor as aa
from aiadvisor.units import fmt_seconds
_dash = get_ipython().find_magic("advise").__self__.last_view
_view = _dash.views[-1]
_g = aa.predict_generation(_dash.report.generation_profile, hardware=_dash.report.hardware_spec,
                           **_view.request())
print(json.dumps({"tab": _dash.tabs.titles[_dash.tabs.selected_index],
                  "concurrency": _view.concurrency.value,
                  "tpot_shown": f"TPOT <b>{fmt_seconds(_g.tpot_s)}</b>" in _view.summary.value,
                  "errors": [o.get("text", "") for o in _dash.errors.outputs],
                  "first": _view.cards[0][1].code,
                  "ids": [r.id for r in _dash.report.recommendations
                          if r.category == "serving"],
                  "kind": _dash.report.hardware_spec.kind}))
"""


@pytest.mark.parametrize("advise", [ADVISE_LM, ADVISE_LM_DEFAULT], ids=["L4", "default"])
def test_serving_tab_slider_and_insert_in_jupyterlab(jupyter, advise):
    server, context = jupyter
    shot = "lab_serving" if advise == ADVISE_LM else "lab_serving_default"
    name = f"{shot}.ipynb"
    write_notebook(server.root / name, [SETUP_LM, advise, SERVING_STATE, END])
    page = context.new_page()
    try:
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.goto(server.url(name, "lab"))
        nb = NotebookPage(page)
        nb.wait_ready()
        nb.set_theme("JupyterLab Light")
        nb.run(0)
        nb.run(1)
        summary = page.locator(".aiadvisor-dashboard .aiadvisor-serving-summary").first
        summary.wait_for(timeout=60_000)  # the dashboard opens on the Serving tab
        before = summary.inner_text()
        assert _slider_step_right(page, "concurrent sequences") == "2"
        page.wait_for_function(
            "(b) => { const e = document.querySelector('.aiadvisor-serving-summary');"
            " return e && e.innerText !== b; }", arg=before, timeout=30_000)
        problems = _tab_problems(page)
        _shoot(page, shot)
        button = page.locator(".aiadvisor-insert:visible").first
        button.wait_for(timeout=30_000)
        shown = page.locator(".aiadvisor-code:visible").first.inner_text()
        button.click()
        inserted = nb.wait_source(2, shown)
        nb.run(3)  # SERVING_STATE, moved down by the inserted cell
        state = json.loads(nb.output_text(3).strip().splitlines()[-1])
        sources = nb.sources()
    except Exception:
        _shoot(page, f"{shot}_ERROR")
        raise
    finally:
        page.close()
        server.delete_sessions()
    assert problems == [], problems
    assert (state["tab"], state["concurrency"], state["tpot_shown"]) == ("Serving", 2, True)
    assert state["errors"] == []
    assert inserted, sources
    assert sources[2].strip() == shown.strip() == state["first"].strip()
    assert "from vllm import LLM" in sources[2]
    # Only engines that run on the device: TensorRT-LLM on NVIDIA GPUs, never on a CPU (a
    # machine whose own device is an NVIDIA GPU gets it in both runs).
    own_nvidia = "NVIDIA" in aa_detected_vendor()
    assert ("serve_tensorrt_llm" in state["ids"]) == (advise == ADVISE_LM or own_nvidia)
    import aiadvisor as aa

    assert state["kind"] == ("gpu" if advise == ADVISE_LM else aa.hardware.detect().kind)
    assert not [e for e in console if "aiadvisor" in e or "anywidget" in e], console
