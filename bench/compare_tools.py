"""aiadvisor beside the tools users know that are installed here: PyTorch's own FlopCounterMode
(FLOPs) and MemTracker (``torch.distributed._tools.mem_tracker``, peak training memory).

For each model (transformers configs and a built-in decoder; random weights on the CPU, small
enough to run for real), one fp32 training step with AdamW:

* FLOPs: ``FlopCounterMode`` around a real forward + backward, vs ``aa.profile(...).flops_forward
  + flops_backward`` (traced on fake tensors; the AdamW update, which FlopCounterMode does not
  count, left out);
* peak memory: ``MemTracker`` around two real steps (the second has AdamW's state resident),
  vs ``aa.profile(...).memory.peak_bytes`` (fake tensors, nothing allocated);
* wall time of each, on this machine.

Then the same FLOPs for a model too big to run here (Llama-3-8B shape on the meta device), which
only tools that never allocate can answer. The README's "Compared with tools you know" table
quotes this script's output. Run: ``.venv/bin/python bench/compare_tools.py`` (about a minute on
two cores).
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import transformers
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils.flop_counter import FlopCounterMode

import aiadvisor as aa
from aiadvisor import examples


def models():
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=256, n_head=4, n_positions=256, vocab_size=8192, bos_token_id=0,
        eos_token_id=0))
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=8192, max_position_embeddings=256))
    tiny, ids = examples.build("tiny-gpt", batch_size=4, seq_len=128)
    x = torch.randint(0, 8192, (4, 128))
    return {"GPT-2 (2 x 256, transformers)": (gpt2, x),
            "Llama (2 x 256, GQA, transformers)": (llama, x),
            "tiny-gpt (aiadvisor.examples)": (tiny, ids)}


def loss_of(model, x):
    # the scalar aa.profile calls backward on when a model returns no loss: the output's sum
    out = model(x)
    return (out.logits if hasattr(out, "logits") else out).sum()


def torch_flops(model, x):
    start = time.perf_counter()
    with FlopCounterMode(display=False) as counter:
        loss_of(model, x).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops(), time.perf_counter() - start


def torch_peak(model, x):
    model = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters())
    start = time.perf_counter()
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        for step in range(2):
            loss_of(model, x).backward()
            optimizer.step()
            optimizer.zero_grad()
            if step == 0:
                tracker.reset_mod_stats()  # MemTracker refuses a second iteration otherwise
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    return peak, time.perf_counter() - start


def ours(model, x):
    start = time.perf_counter()
    prof = aa.profile(model, x, mode="train", optimizer="adamw", precision="fp32")
    return prof, time.perf_counter() - start


def main() -> None:
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads")
    header = (f"{'model':36s} {'FLOPs torch':>13s} {'FLOPs aa':>13s} {'ratio':>6s} "
              f"{'peak torch MB':>13s} {'peak aa MB':>11s} {'ratio':>6s} "
              f"{'t torch s':>9s} {'t aa s':>7s}")
    print(header)
    for name, (model, x) in models().items():
        flops, t_flops = torch_flops(model, x)
        peak, t_peak = torch_peak(model, x)
        prof, t_ours = ours(model, x)
        mine = prof.flops_forward + prof.flops_backward
        print(f"{name:36s} {flops:13.4g} {mine:13.4g} {mine / flops:6.3f} "
              f"{peak / 1e6:13.1f} {prof.memory.peak_bytes / 1e6:11.1f} "
              f"{prof.memory.peak_bytes / peak:6.3f} {t_flops + t_peak:9.2f} {t_ours:7.2f}")
    big, ids = examples.build("llama-3-8b", batch_size=1, seq_len=4096)  # meta device
    start = time.perf_counter()
    prof = aa.profile(big, ids, mode="train", precision="bf16")
    t_ours = time.perf_counter() - start
    print(f"\nLlama-3-8B shape, 1 x 4096 tokens, on the meta device ({prof.num_params:,} "
          f"parameters): aiadvisor {(prof.flops_forward + prof.flops_backward) / 1e12:.1f} TFLOP, "
          f"peak {prof.memory.peak_bytes / 1e9:.1f} GB in {t_ours:.1f} s; running it for "
          "FlopCounterMode or MemTracker needs the ~128 GB of a real step")


if __name__ == "__main__":
    main()
