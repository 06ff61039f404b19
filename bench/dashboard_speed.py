"""How fast the notebook front end answers: ``%load_ext aiadvisor`` and the dashboard sliders.

Prints medians side by side with the goals:

* ``%load_ext aiadvisor`` in a fresh interpreter (goal <= 0.3 s), and the heavy modules it pulled in
  (goal: none of torch, pandas, ipywidgets, anywidget, altair);
* each dashboard control (batch size, sequence length, devices, precision, target device) set the
  way the front end sets it, on each tab: ``Report.with_options()`` alone and the whole update,
  goal <= 100 ms. The Report computes its tables lazily, on first access, so the whole update
  (headline, the visible tab's tables and charts) is the number that counts.

Wall time and CPU time are both printed: on a shared machine wall time includes waiting for a core.

Usage: ``python bench/dashboard_speed.py [--repeats 5] [--loads 5]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

LOAD_GOAL_S = 0.3
SLIDER_GOAL_S = 0.100
HEAVY = ("torch", "pandas", "ipywidgets", "anywidget", "altair", "sklearn")

_LOAD_SNIPPET = f"""
import json, sys, time
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
t0 = time.perf_counter()
ip.run_line_magic("load_ext", "aiadvisor")
elapsed = time.perf_counter() - t0
print(json.dumps({{"s": elapsed, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def measure_load(num_loads: int) -> None:
    runs = []
    for _ in range(num_loads):
        out = subprocess.run([sys.executable, "-c", _LOAD_SNIPPET], capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    median_s = statistics.median(r["s"] for r in runs)
    heavy = sorted({m for r in runs for m in r["heavy"]})
    print(f"%load_ext aiadvisor   median {median_s * 1e3:7.1f} ms   goal {LOAD_GOAL_S * 1e3:.0f} ms"
          f"   ratio {median_s / LOAD_GOAL_S:5.2f}   heavy modules imported: {heavy or 'none'}")


def _tiny_transformer():
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512,
                                       batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 128), nn.TransformerEncoder(layer, num_layers=2),
                          nn.Linear(128, 1000))
    return model, torch.randint(0, 1000, (8, 64))


def _timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _pairs(control) -> list:
    """Two values to move a control between (as a user drags it back and forth)."""
    options = list(control.options)
    i = options.index(control.value)
    other = options[i + 1] if i + 1 < len(options) else options[i - 1]
    return [other, control.value]


def _time_control(dash, name: str, control, repeats: int) -> tuple[float, float, float]:
    """Medians of with_options alone, the whole update (wall) and its CPU time."""
    wo, full, cpu = [], [], []
    for _ in range(repeats):
        for value in _pairs(control):
            current = dash.report
            wo.append(_timed(lambda: current.with_options(**{name: value}))[0])  # noqa: B023
            # The front end sends the new index (selection sliders) or the new value.
            state = ({"index": list(control.options).index(value)} if hasattr(control, "index")
                     else {"value": value})
            w, c = _timed(lambda: control.set_state(state))  # noqa: B023
            full.append(w)
            cpu.append(c)
    return statistics.median(wo), statistics.median(full), statistics.median(cpu)


def measure_sliders(repeats: int) -> None:
    import aiadvisor as aa
    from aiadvisor.widgets.dashboard import Dashboard

    model, x = _tiny_transformer()
    t0 = time.perf_counter()
    report = aa.advise(model, x, mode="train", hardware="NVIDIA H100 SXM", model_name="model",
                       inputs_name="x")
    print("advise() on a 2-layer transformer (batch 8, seq 64, H100): "
          f"{time.perf_counter() - t0:.2f} s")
    dash = Dashboard(report, cell_id="bench")
    dash.render_all()
    controls = {name: c for name, c in dash._controls().items() if not c.disabled}
    header = f"{'control':<12} {'tab':<16} {'with_options':>13} {'dashboard':>10} " \
             f"{'(cpu)':>8} {'goal':>6} {'ratio':>6}"
    print(header)
    for name, control in controls.items():
        for tab, title in enumerate(dash.tabs.titles):
            dash.tabs.selected_index = tab
            m_wo, m_full, m_cpu = _time_control(dash, name, control, repeats)
            if dash.errors.outputs:
                print("  error:", dash.errors.outputs[-1].get("text", "")[:200])
            print(f"{name:<12} {title:<16} {m_wo * 1e3:10.1f} ms {m_full * 1e3:7.1f} ms "
                  f"{m_cpu * 1e3:5.1f} ms {SLIDER_GOAL_S * 1e3:4.0f} ms "
                  f"{m_full / SLIDER_GOAL_S:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="back-and-forth moves per cell")
    parser.add_argument("--loads", type=int, default=5, help="fresh interpreters for %%load_ext")
    args = parser.parse_args()
    measure_load(args.loads)
    measure_sliders(args.repeats)


if __name__ == "__main__":
    main()
