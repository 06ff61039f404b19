"""The Python lines a model's own code runs in one forward, per module.

Eager PyTorch runs a model's Python every step. The cost model prices each op's dispatch, each
``nn.Module`` call and each view op from host costs measured on the CPU; the rest of the
model's Python is priced per line executed
(:attr:`aiadvisor.hardware.host.HostCosts.python_line_us`). That rest is small in a plain
``nn.Module`` (the built-in decoders run about 160 lines in a decode step of 8 layers) and
large in Hugging Face models, whose forwards build masks, caches, position ids, output
dataclasses and check their arguments and config through decorators and helpers
(``LlamaForCausalLM``: about 2,600 lines for the same 8 layers, with transformers 5.25). Counted
in one trace per profile (the lines a forward runs do not follow its shapes); in a decode step
after three others, so that code a model runs once (a first-call warning) is left out.

:class:`LineCounter` counts them with :func:`sys.settrace` while the profiler's trace runs, so
it counts exactly the code path the trace takes. Counted: lines in frames of files outside
``torch`` and outside aiadvisor (the model, transformers, the user's notebook), plus
``torch/nn/functional.py`` (the Python wrappers such as ``F.silu`` that a model calls); the
standard library and generated code (``<string>``) only where a counted frame called them
(``logging``, ``inspect``, a dataclass ``__init__`` from a model's code; not what PyTorch's own
tracing machinery runs).
Not counted: ``torch``'s internals (``nn.Module.__call__`` is priced per module call, the
dispatcher per op) and the fake-tensor machinery the trace itself runs.

When a trace function is already set (a debugger, coverage), nothing is counted:
:attr:`LineCounter.available` is False and the caller says so.
"""

from __future__ import annotations

import os
import sys
import sysconfig

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_COUNTED_TORCH = frozenset({os.path.join(_TORCH_DIR, "nn", "functional.py")})
_STDLIB_DIR = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_THIRD_PARTY = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
#: Standard-library files never counted: weak-reference callbacks (the profiler's own, as its
#: fake tensors die) run inside whatever frame is executing, a model's included.
_SKIP_STDLIB = frozenset({"weakref.py", "_weakrefset.py"})

MODEL, STDLIB, SKIP = "model", "stdlib", "skip"


def file_kind(filename: str) -> str:
    """Whether lines of ``filename`` are the model's (:data:`MODEL`), the standard library's
    (:data:`STDLIB`: counted only when a model frame calls it) or never counted (:data:`SKIP`).

    >>> file_kind(torch.nn.functional.__file__)
    'model'
    >>> file_kind(torch.nn.Module.__init__.__code__.co_filename)
    'skip'
    >>> file_kind(os.__file__), file_kind("<ipython-input-3-0a1b>")
    ('stdlib', 'model')
    """
    if filename in _COUNTED_TORCH:
        return MODEL
    if filename.startswith((_TORCH_DIR, _OWN_DIR)):
        return SKIP
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        # Generated code (``<string>``: dataclass and namedtuple methods) and frozen modules
        # count where a counted frame called them, like the standard library.
        return STDLIB
    if any(part in filename for part in _THIRD_PARTY):
        return MODEL
    real = os.path.realpath(filename) if os.path.isabs(filename) else filename
    if real.startswith(_STDLIB_DIR) or filename.startswith(_STDLIB_DIR):
        return SKIP if os.path.basename(filename) in _SKIP_STDLIB else STDLIB
    if real.startswith((_TORCH_DIR, _OWN_DIR)):
        return SKIP
    return MODEL


class LineCounter:
    """Counts, per module of ``tracker`` (a :class:`~.recorder.ModuleStack`), the Python lines
    executed while entered (see the module doc). Re-entrant use is not supported."""

    def __init__(self, tracker) -> None:
        self.tracker = tracker
        self.lines: dict[str, int] = {}
        self.available = True
        self._kinds: dict = {}
        self._set = False
        self._local_fn = self._local

    def _global(self, frame, event, arg):
        code = frame.f_code
        kind = self._kinds.get(code)
        if kind is None:
            kind = self._kinds[code] = file_kind(code.co_filename)
        if kind == SKIP:
            return None
        if kind == STDLIB:
            caller = frame.f_back
            if caller is None or caller.f_trace is not self._local_fn:
                return None
        return self._local_fn

    def _local(self, frame, event, arg):
        if event == "line":
            module = self.tracker.stack[-1]
            self.lines[module] = self.lines.get(module, 0) + 1
        return self._local_fn

    def __enter__(self):
        if sys.gettrace() is not None:
            self.available = False
            return self
        sys.settrace(self._global)
        self._set = True
        return self

    def __exit__(self, *exc) -> None:
        if self._set:
            sys.settrace(None)
            self._set = False
