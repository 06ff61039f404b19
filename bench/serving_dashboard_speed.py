"""How fast the Serving tab answers: each control moved the way the front end moves it.

Builds the ``mode="generate"`` dashboard for the built-in tiny-gpt example on a catalog GPU,
then sets every serving control (prompt tokens, output tokens, concurrent sequences, weight and
KV format) to values it has not shown yet (the report keeps answers, so a return visit costs
nothing: first visits are the cost that counts) and prints the median and worst wall and CPU
time per move against the goal (< 0.5 s per move on a CPU like this one's). No move re-traces
the model: the script counts calls of the generation capture and prints them (goal: 0).

Usage: ``python bench/serving_dashboard_speed.py [--hardware "NVIDIA L4"]``
"""

from __future__ import annotations

import argparse
import statistics
import time

GOAL_S = 0.5


def _select(control, value) -> None:
    labels = [o[1] if isinstance(o, tuple) else o for o in control.options]
    control.set_state({"index": labels.index(value)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardware", default="NVIDIA L4")
    args = parser.parse_args()

    import aiadvisor as aa
    import aiadvisor.serving
    from aiadvisor import examples
    from aiadvisor.widgets.dashboard import Dashboard

    model, x = examples.build("tiny-gpt")
    t0 = time.perf_counter()
    report = aa.advise(model, x, mode="generate", hardware=args.hardware)
    t1 = time.perf_counter()
    dash = Dashboard(report, cell_id="bench")
    t2 = time.perf_counter()
    view = dash.views[-1]
    print(f"advise (trace + tables): {t1 - t0:.2f} s; dashboard with the Serving tab drawn: "
          f"{t2 - t1:.2f} s")
    traces = []
    original = aiadvisor.serving.profile_generation
    aiadvisor.serving.profile_generation = lambda *a, **k: traces.append(a) or original(*a, **k)
    moves = [("concurrency", v) for v in (2, 8, 64, 256)]
    moves += [("prompt", v) for v in (256, 128, 64)]
    moves += [("output", v) for v in (64, 256, 32)]
    moves += [("weights", v) for v in ("fp8", "int4", "nf4")]
    moves += [("kv", "fp8")]
    print(f"{'control':<12} {'value':>6} {'wall s':>8} {'cpu s':>8}  goal < {GOAL_S} s")
    by_control: dict[str, list[float]] = {}
    for name, value in moves:
        control = getattr(view, name)
        w0, c0 = time.perf_counter(), time.process_time()
        _select(control, value)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        assert not dash.errors.outputs, dash.errors.outputs
        by_control.setdefault(name, []).append(wall)
        verdict = "ok" if wall < GOAL_S else "SLOW"
        print(f"{name:<12} {value!s:>6} {wall:8.3f} {cpu:8.3f}  {verdict}")
    print()
    for name, walls in by_control.items():
        print(f"{name:<12} median {statistics.median(walls):.3f} s, worst {max(walls):.3f} s "
              f"({'within' if max(walls) < GOAL_S else 'over'} the {GOAL_S} s goal)")
    print(f"re-traces during the moves: {len(traces)} (goal 0)")
    print("All figures on the tab are estimated by the cost model; these timings are measured.")


if __name__ == "__main__":
    main()
