"""The model's own Python lines: counted in the traced forward (not torch's internals, not the
fake-tensor machinery), multiplied over repeated blocks, priced per line on a CPU."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import aiadvisor as aa
from aiadvisor.costmodel.host import HostCounts, cpu_host_extra_s
from aiadvisor.hardware.host import PYTHON_LINE_MODULE_CALLS, HostCosts, measure_host_costs
from aiadvisor.profiler.pylines import MODEL, SKIP, STDLIB, file_kind


def _scale(x):
    y = x * 2          # 1
    return y           # 2


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)            # 1 (nn.Linear.forward is torch's: not counted)
        h = _scale(h)              # 2, and _scale's 2
        if h.dim() == 2:           # 3
            h = h + 1              # 4
        return h                   # 5


def test_lines_of_a_forward_counted_by_hand():
    # Counted.forward runs 5 lines, _scale 2: 7. Module calls, ops and views are priced apart.
    for mode in ("infer", "train"):
        prof = aa.profile(Counted(), torch.randn(4, 8), mode=mode, scaling=False)
        assert prof.num_python_lines == 7, mode


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        a = self.lin(x)            # 1
        b = a.relu()               # 2
        return b + x               # 3


class Stack(nn.Module):
    def __init__(self, n: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        x = x * 1.0                # 1
        for block in self.blocks:  # 2
            x = block(x)           # 3
        return x                   # 4


def test_repeated_blocks_multiply_their_lines():
    # Each block runs 3 lines; traced once and multiplied by 4: 12. The parent's loop is traced
    # over the one block kept: its 'for' line twice and the call once, with lines 1 and 4: 5.
    prof = aa.profile(Stack(4), torch.randn(2, 8), mode="infer", scaling=False)
    assert prof.num_blocks == 4
    assert prof.num_python_lines == 5 + 4 * 3
    whole = aa.profile(Stack(4), torch.randn(2, 8), mode="infer", scaling=False,
                       repeated_blocks=False)
    # Traced whole: the loop runs its 'for' line 5 times and the call 4 times: 2 + 9 + 12.
    assert whole.num_python_lines == 2 + 9 + 4 * 3


def test_file_kinds():
    assert file_kind(__file__) == MODEL                      # the user's code
    assert file_kind(torch.nn.functional.__file__) == MODEL   # F.* Python wrappers
    assert file_kind(nn.Module.__call__.__code__.co_filename) == SKIP
    assert file_kind(aa.__file__) == SKIP
    assert file_kind(sys.modules["os"].__file__) == STDLIB
    assert file_kind(sys.modules["weakref"].__file__) == SKIP  # the profiler's callbacks
    assert file_kind("<string>") == STDLIB


def test_an_active_trace_function_keeps_the_lines_uncounted_and_says_so():
    previous = sys.gettrace()

    def other(frame, event, arg):
        return None

    sys.settrace(other)
    try:
        prof = aa.profile(Counted(), torch.randn(4, 8), mode="infer", scaling=False)
    finally:
        sys.settrace(previous)
    assert prof.num_python_lines == 0
    assert any("Python lines were not counted" in n for n in prof.notes)
    # The user's trace function is left in place.
    assert sys.gettrace() is previous


def test_line_cost_priced_by_hand():
    costs = HostCosts(dispatch_us=1.0, autograd_us=0.5, backward_node_us=3.0, module_us=2.0,
                      view_us=0.8, python_line_us=0.25)
    counts = HostCounts(forward_ops=10, backward_ops=0, optimizer_ops=0, module_calls=5,
                        view_ops=10, python_lines=400)
    extra, total = cpu_host_extra_s(counts, costs, train=False)
    # modules 5 x 2 + views 10 x 0.8 + lines 400 x 0.25 = 118 us; plus dispatch 10 x 1 us.
    assert extra == pytest.approx(118e-6)
    assert total == pytest.approx(128e-6)


def test_measured_line_cost_follows_the_module_call():
    costs = measure_host_costs(num_ops=50)
    assert costs.python_line_us == pytest.approx(PYTHON_LINE_MODULE_CALLS * costs.module_us)
    assert 0 < costs.python_line_us < costs.module_us


def test_a_transformers_decoder_counts_its_lines_as_a_real_run_does():
    # The trace runs on fake tensors, its machinery in Python too: what it counts must be the
    # model's lines only. This 4-layer Llama (transformers 5.25) counted 1,689-1,737 traced
    # (the first profile in a process runs once-only code too) against 1,630 in a real prompt
    # forward, and 1,673 against 1,723 in a decode step (one layer traced and multiplied).
    transformers = pytest.importorskip("transformers")
    from transformers import DynamicCache

    from aiadvisor.profiler.pylines import LineCounter

    class _Stack:
        stack = [""]

    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros((1, 32), dtype=torch.long)

    def real_lines(fn) -> int:
        counter = LineCounter(_Stack())
        with counter:
            fn()
        return sum(counter.lines.values())

    with torch.no_grad():
        model(ids, use_cache=False)   # first calls run once-only code (warnings): not counted
        prompt = real_lines(lambda: model(ids, use_cache=False))
        out = model(ids, past_key_values=DynamicCache(), use_cache=True)
        new = torch.zeros((1, 1), dtype=torch.long)
        model(new, past_key_values=out.past_key_values, use_cache=True)
        step = real_lines(lambda: model(new, past_key_values=out.past_key_values,
                                        use_cache=True))
    gp = aa.profile_generation(model, prompt_len=32)
    assert prompt > 500 and step > 500   # transformers' own Python, not a handful of lines
    assert gp.prefill.num_python_lines == pytest.approx(prompt, rel=0.1)
    assert gp.decode.num_python_lines == pytest.approx(step, rel=0.1)


def test_a_cpu_decode_step_names_the_models_own_python():
    # A tiny transformers Llama decodes in well under a millisecond of kernels a token on a
    # CPU; its own Python (about 2,600 lines for 8 layers) is a large share: the prediction
    # says how many lines and what they cost at this CPU's measured rate.
    transformers = pytest.importorskip("transformers")
    from aiadvisor.hardware.host import host_costs

    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=256)
    torch.manual_seed(0)
    gp = aa.profile_generation(transformers.LlamaForCausalLM(cfg).eval(), prompt_len=32)
    lines = gp.decode.num_python_lines
    assert lines > 1000
    g = aa.predict_generation(gp, hardware="local", weight_precision="fp32", prompt_len=32,
                              output_len=16, engine="eager")
    (note,) = [n for n in g.notes if "lines a step" in n]
    assert f"{lines:,} lines a step" in note
    assert f"{lines * host_costs().python_line_us * 1e-3:.2g} ms" in note
