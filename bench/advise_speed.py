"""How fast is advice? Targets (issue 5): a full ``advise()`` on a profiled model <= 1 s;
re-advising after a batch-size or device-count change (``Report.with_options``) <= 100 ms.

Prints medians side by side with the targets for two models: a small GPT-2 (real weights, CPU)
and Llama-3-8B built on the meta device. Every ``with_options`` call uses a batch size or device
count not seen before, so nothing is answered from a cache of an identical request. A Report
computes each table when it is first read; "all tables" reads every one of them (what
``to_json`` needs), the per-tab rows read what one dashboard tab shows.

Usage: .venv/bin/python bench/advise_speed.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time


def _gpt2():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=384, n_head=6, vocab_size=8000, n_positions=512,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config), torch.randint(0, 8000, (8, 512))


def _llama8b():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=8192, tie_word_embeddings=False)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    return model, torch.randint(0, 128256, (1, 2048), device="meta")


def _median_s(fn, repeats: int) -> tuple[float, float]:
    """Median wall-clock and median CPU (this process) seconds of ``fn(i)``."""
    wall, cpu = [], []
    for i in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(i)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _touch_all(report) -> None:
    report.parallel, report.hardware, report.precision, report.prediction  # noqa: B018
    report.recommendations, report.notes  # noqa: B018


def _touch_tab(report) -> None:
    report.parallel, report.recommendations, report.prediction  # noqa: B018


def bench(name: str, build, *, hardware: str, num_devices: int, precision: str,
          repeats: int) -> list[tuple[str, float, float]]:
    import aiadvisor as aa

    model, inputs = build()
    start = time.perf_counter()
    first = aa.advise(model, inputs, hardware=hardware, num_devices=num_devices,
                      precision=precision)
    _touch_all(first)
    with_profiling_s = (time.perf_counter() - start, float("nan"))
    prof = first.profile

    def full_advise(i: int) -> None:  # fresh caches every time
        _touch_all(aa.advise(prof, hardware=hardware, num_devices=num_devices,
                             precision=precision))

    base = prof.batch_size
    sizes = iter(range(2, 10_000))
    counts = [2, 4, 16, 32, 64, 3, 6, 12, 24, 48]  # devices = count x the first report's
    devices = iter(c * num_devices for c in counts * 4)

    def batch_change(touch):
        return lambda i: touch(first.with_options(batch_size=base * next(sizes)))

    def devices_change(touch):
        return lambda i: touch(first.with_options(num_devices=next(devices)))

    label = f"{name}: "
    return [
        (label + "advise(model) incl. profiling (once)", with_profiling_s, float("nan")),
        (label + "advise(profile), all tables", _median_s(full_advise, repeats), 1.0),
        (label + "with_options(batch_size), all tables",
         _median_s(batch_change(_touch_all), repeats), 0.1),
        (label + "with_options(num_devices), all tables",
         _median_s(devices_change(_touch_all), repeats), 0.1),
        (label + "with_options(batch_size), plans+recommendations tab",
         _median_s(batch_change(_touch_tab), repeats), 0.1),
        (label + "with_options(num_devices), plans+recommendations tab",
         _median_s(devices_change(_touch_tab), repeats), 0.1),
    ]


def main(argv: list[str] | None = None) -> int:
    import math
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(wall time grows with other processes; CPU time is this process's own work)")
    rows = bench("GPT-2 6x384 (train, 8 x 512)", _gpt2, hardware="H100 SXM", num_devices=1,
                 precision="fp32", repeats=args.repeats)
    rows += bench("Llama-3-8B meta (train, 1 x 2048, 8 x H100)", _llama8b, hardware="H100 SXM",
                  num_devices=8, precision="bf16", repeats=args.repeats)
    width = max(len(r[0]) for r in rows)
    print(f"{'measurement'.ljust(width)}  {'wall':>9}  {'cpu':>9}  {'target':>8}  "
          f"{'wall/target':>11}  ok")
    ok_all = True
    for label, (wall, cpu), target in rows:
        cpu_text = "-" if math.isnan(cpu) else f"{cpu * 1e3:7.1f}ms"
        if math.isnan(target):  # informational
            print(f"{label.ljust(width)}  {wall * 1e3:7.1f}ms  {cpu_text:>9}  {'-':>8}  "
                  f"{'-':>11}  -")
            continue
        ok = wall <= target
        ok_all &= ok
        print(f"{label.ljust(width)}  {wall * 1e3:7.1f}ms  {cpu_text:>9}  {target * 1e3:6.0f}ms  "
              f"{wall / target:11.2f}  {'yes' if ok else 'NO'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
