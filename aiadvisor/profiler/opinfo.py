"""Per-aten-op facts the recorder needs: class, whether it moves data, and FLOP formulas for
ops that ``torch.utils.flop_counter`` does not count (recurrent layers, elementwise math).
"""

from __future__ import annotations

import math

import torch

from ..hardware.calibrate import CHANNELS_LAST_SUFFIX, EVAL_SUFFIX, STEP_SUFFIX

aten = torch.ops.aten

# Ops that only read metadata: never recorded (the same list FlopCounterMode skips).
METADATA_OPS = {
    aten.is_contiguous.default,
    aten.is_contiguous.memory_format,
    aten.is_strides_like_format.default,
    aten.is_non_overlapping_and_dense.default,
    aten.size.default,
    aten.sym_size.default,
    aten.stride.default,
    aten.sym_stride.default,
    aten.storage_offset.default,
    aten.sym_storage_offset.default,
    aten.numel.default,
    aten.sym_numel.default,
    aten.dim.default,
    torch.ops.prim.layout.default,
    torch.ops.prim.device.default,
}
if hasattr(aten, "sym_is_contiguous"):  # newer PyTorch releases
    METADATA_OPS.add(aten.sym_is_contiguous.default)

# Ops that return a view or alias: no data moves, so no bytes and no new storage.
VIEW_PACKETS = {
    aten.view, aten._unsafe_view, aten.reshape, aten.t, aten.transpose, aten.permute,
    aten.expand, aten.slice, aten.select, aten.squeeze, aten.unsqueeze, aten.as_strided,
    aten.detach, aten.alias, aten.unbind, aten.split, aten.split_with_sizes, aten.chunk,
    aten.narrow, aten.diagonal, aten.view_as_real, aten.view_as_complex, aten.unfold,
    aten.lift_fresh, aten._reshape_alias, aten.numpy_T, aten.mT,
}

#: Ops that allocate an uninitialised tensor and launch no kernel (``torch.empty`` and kin): their
#: output takes memory but nothing is read or written (:func:`no_bytes`). A CPU trace meets them
#: where PyTorch decomposes an op: ``dropout`` in training (``empty_like`` then ``bernoulli_``),
#: batch norm in eval (its saved-statistics outputs). They stay op records, so that the host
#: side still counts the dispatch they come with (the per-op host cost was measured that way).
ALLOC_PACKETS = {
    aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
    aten.empty_permuted,
}

GEMM_PACKETS = {
    aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.matmul, aten.linear, aten._addmm_activation,
    aten._int_mm, aten._weight_int8pack_mm, aten._scaled_mm,
}
#: Grouped GEMMs: mixture-of-experts layers run every expert's tokens in one call (transformers
#: 5 ``grouped_mm`` experts). flop_counter does not count them.
GROUPED_GEMM_PACKETS = {getattr(aten, name) for name in ("_grouped_mm", "_scaled_grouped_mm")
                        if hasattr(aten, name)}
GEMM_PACKETS |= GROUPED_GEMM_PACKETS
CONV_PACKETS = {
    aten.convolution, aten._convolution, aten.convolution_backward, aten.conv2d, aten.conv1d,
    aten.conv3d, aten.mkldnn_convolution, aten.cudnn_convolution,
}
ATTENTION_PACKETS = {
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._flash_attention_forward, aten._flash_attention_backward,
    aten._efficient_attention_forward, aten._efficient_attention_backward,
    aten.scaled_dot_product_attention,
}
EMBEDDING_PACKETS = {aten.embedding, aten.embedding_backward, aten.embedding_dense_backward,
                     aten._embedding_bag, aten.embedding_bag}
#: Forward lookups whose second argument holds the indices (one table row gathered each).
LOOKUP_PACKETS = {aten.embedding, aten._embedding_bag, aten._embedding_bag_forward_only}
RNN_PACKETS = {
    aten.mkldnn_rnn_layer, aten.mkldnn_rnn_layer_backward, aten._cudnn_rnn,
    aten._cudnn_rnn_backward, aten.lstm, aten.gru, aten.rnn_tanh, aten.rnn_relu,
    aten._thnn_fused_lstm_cell, aten._thnn_fused_gru_cell, aten.miopen_rnn,
    aten.miopen_rnn_backward,
}


def op_class(packet) -> str:
    """The cost-model class of an aten overload packet."""
    if packet in GEMM_PACKETS or packet in RNN_PACKETS:
        return "gemm"
    if packet in CONV_PACKETS:
        return "conv"
    if packet in ATTENTION_PACKETS:
        return "attention"
    if packet in EMBEDDING_PACKETS:
        return "embedding"
    return "memory"


def _numel(shape) -> int:
    return math.prod(int(s) for s in shape)


def rnn_layer_flops(*, seq_len: int, batch: int, input_size: int, hidden_size: int,
                    num_gates: int, bidirectional: bool = False) -> int:
    """Multiply-add FLOPs of one recurrent layer's forward: at every time step the gates are
    ``x_t W_ih^T + h_{t-1} W_hh^T`` (``num_gates * hidden`` outputs, 4 for LSTM, 3 for GRU,
    1 for a plain RNN), 2 FLOPs per multiply-add; the elementwise gate math is ignored (< 1%)."""
    directions = 2 if bidirectional else 1
    return 2 * seq_len * batch * num_gates * hidden_size * (input_size + hidden_size) * directions


def mkldnn_rnn_layer_flops(args, out) -> int:
    """``aten.mkldnn_rnn_layer(input, w0 (W_ih), w1 (W_hh), w2, w3, hx, cx, reverse,
    batch_sizes, mode, hidden_size, num_layers, has_biases, bidirectional, batch_first, train)``.
    mode follows cuDNN: 0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU."""
    inp, w_ih = args[0], args[1]
    mode, hidden_size, batch_first = int(args[9]), int(args[10]), bool(args[14])
    num_gates = {0: 1, 1: 1, 2: 4, 3: 3}.get(mode, 4)
    seq_len, batch = (inp.shape[1], inp.shape[0]) if batch_first else (inp.shape[0], inp.shape[1])
    return rnn_layer_flops(seq_len=int(seq_len), batch=int(batch), input_size=int(w_ih.shape[1]),
                           hidden_size=hidden_size, num_gates=num_gates)


def mkldnn_rnn_layer_backward_flops(args, out) -> int:
    """``aten.mkldnn_rnn_layer_backward(input, w1, w2, w3, w4, hx, cx, output, hy, cy,
    grad_output, grad_hy, grad_cy, reverse, mode, hidden_size, num_layers, has_biases, train,
    bidirectional, batch_sizes, batch_first, workspace)``. Backward of a GEMM costs two GEMMs of
    the forward's size (input gradients and weight gradients)."""
    inp, w_ih = args[0], args[1]
    mode, hidden_size, batch_first = int(args[14]), int(args[15]), bool(args[21])
    num_gates = {0: 1, 1: 1, 2: 4, 3: 3}.get(mode, 4)
    seq_len, batch = (inp.shape[1], inp.shape[0]) if batch_first else (inp.shape[0], inp.shape[1])
    return 2 * rnn_layer_flops(seq_len=int(seq_len), batch=int(batch),
                               input_size=int(w_ih.shape[1]), hidden_size=hidden_size,
                               num_gates=num_gates)


def cudnn_rnn_flops(args, out) -> int:
    """``aten._cudnn_rnn(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes,
    dropout_state)``."""
    inp, weights = args[0], args[1]
    mode, hidden_size, num_layers = int(args[6]), int(args[7]), int(args[9])
    batch_first, bidirectional = bool(args[10]), bool(args[13])
    num_gates = {0: 1, 1: 1, 2: 4, 3: 3}.get(mode, 4)
    seq_len, batch = (inp.shape[1], inp.shape[0]) if batch_first else (inp.shape[0], inp.shape[1])
    total = 0
    stride = int(args[2])
    for layer in range(num_layers):
        w_ih = weights[layer * stride * (2 if bidirectional else 1)]
        total += rnn_layer_flops(seq_len=int(seq_len), batch=int(batch),
                                 input_size=int(w_ih.shape[1]), hidden_size=hidden_size,
                                 num_gates=num_gates, bidirectional=bidirectional)
    return total


def cpu_flash_attention_flops(args, out) -> int:
    """``aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, ...)``: the CPU kernel behind
    ``scaled_dot_product_attention``, counted like the CUDA kernels (flop_counter's formula)."""
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(args[0].shape, args[1].shape, args[2].shape)


def cpu_flash_attention_backward_flops(args, out) -> int:
    """Backward of the CPU flash kernel: ``(grad_out, q, k, v, out, logsumexp, ...)``."""
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(args[0].shape, args[1].shape, args[2].shape, args[3].shape)


def grouped_mm_flops(args, out) -> int:
    """``aten._grouped_mm(a, b, offs=None, ...)``: every output element is one dot product over
    the contraction dimension, ``2 x out.numel() x K``.

    * 2-D ``a`` (tokens of all groups, K) x 3-D ``b`` (groups, K, N), rows split by ``offs``
      (the MoE forward): out is (tokens, N), so ``2 x tokens x K x N`` whatever the routing;
    * 3-D x 3-D (groups, M, K) x (groups, K, N): ``2 x groups x M x K x N``;
    * 3-D ``a`` x 2-D ``b``: out (tokens, N) again, K = ``a``'s last dimension;
    * 2-D x 2-D with ``offs`` (the weight gradient, the contraction split in groups): out is
      (groups, M, N) and each group contracts over its own slice, ``2 x M x N x total K``.
    """
    a, b = args[0], args[1]
    outs = out if isinstance(out, torch.Tensor) else out[0]
    if a.dim() == 2 and b.dim() == 2:
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    return 2 * outs.numel() * a.shape[-1]


EXTRA_FLOPS = {
    **{packet: grouped_mm_flops for packet in GROUPED_GEMM_PACKETS},
    aten._scaled_dot_product_flash_attention_for_cpu: cpu_flash_attention_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: cpu_flash_attention_backward_flops,
    aten.mkldnn_rnn_layer: mkldnn_rnn_layer_flops,
    aten.mkldnn_rnn_layer_backward: mkldnn_rnn_layer_backward_flops,
    aten._cudnn_rnn: cudnn_rnn_flops,
}


def mkldnn_lstm_workspace(args) -> tuple[int, int] | None:
    """oneDNN's LSTM workspace (output 3 of ``mkldnn_rnn_layer``), which the fake kernel reports
    as empty. Measured on PyTorch 2.13 CPU (T steps, B batch, H hidden; sizes 64x16x128,
    32x16x128, 64x8x128, 64x16x64): ``4 * (T*B*(15H + 16) + 10*B*H)`` bytes, independent of
    the input size; kept for backward only when training (``train`` argument)."""
    inp, mode, hidden, batch_first, train = args[0], int(args[9]), int(args[10]), bool(args[14]), \
        bool(args[15])
    if not train or mode != 2:
        return None
    seq_len, batch = (inp.shape[1], inp.shape[0]) if batch_first else (inp.shape[0], inp.shape[1])
    t, b = int(seq_len), int(batch)
    return 3, 4 * (t * b * (15 * hidden + 16) + 10 * b * hidden)


HIDDEN_BYTES = {aten.mkldnn_rnn_layer: mkldnn_lstm_workspace}


def pool_window(kernel) -> tuple[int, int]:
    """``(kh, kw)`` of a pooling op's ``kernel_size`` argument (an int or a 1- or 2-list)."""
    k = [int(kernel)] if isinstance(kernel, int) else [int(v) for v in kernel]
    return (k[0], k[-1])


def _channels_last(tensor) -> bool:
    return (isinstance(tensor, torch.Tensor) and tensor.dim() == 4
            and tensor.is_contiguous(memory_format=torch.channels_last)
            and not tensor.is_contiguous())


def record_suffix(packet, args, param_names: dict | None = None) -> str:
    """What an op record's name adds to its aten name: a max pool's window when it is not
    2 x 2 (``"[3x3]"``), and ``"[channels_last]"`` on a convolution (forward or backward)
    whose input or weight is channels_last, or a max pool or batch norm whose input is; and
    ``"[eval]"`` on a batch norm forward with running statistics (eval mode: a single
    pass, 4-5x faster than training mode's in FP32 on the development CPU). The window sets
    a CPU max pool's time at the same bytes: on the development CPU (2 threads, torch 2.13)
    3 x 3 / stride 2 / pad 1 over 16 x 32 x 56 x 56 took 5.9 ms in FP32 and BF16, 2 x 2 /
    stride 2 3.9 ms; the input's shape at equal elements did not matter (1 x 64 x 200 x 200:
    the same). The layout sets both a convolution's and a pool's time (channels_last pools ran
    10x faster there). ``"[step]"`` on a recurrent layer's hidden-to-hidden GEMM (its weight
    is a ``weight_hh_*`` parameter, by ``param_names``: storage id -> parameter name), run once
    per time step (:data:`~aiadvisor.hardware.calibrate.STEP_SUFFIX`), and in backward the
    GEMM that takes the hidden state's gradient back through that weight. See
    :mod:`aiadvisor.costmodel.local` for how they are priced."""
    suffix = ""
    if packet is aten.native_batch_norm and len(args) > 5 and args[5] is False:
        suffix = EVAL_SUFFIX
    if packet is aten.max_pool2d_with_indices and len(args) > 1:
        kh, kw = pool_window(args[1])
        if (kh, kw) != (2, 2):
            suffix = f"[{kh}x{kw}]"
    # A convolution runs channels_last when its input or its weight is (PyTorch's CPU and
    # cuDNN layout choice), e.g. a channels_last model fed NCHW images.
    layout_args = {aten.convolution: (0, 1), aten.convolution_backward: (1, 2),
                   aten.max_pool2d_with_indices: (0,), aten.native_batch_norm: (0,),
                   aten.native_batch_norm_backward: (1,)}.get(packet, ())
    if any(len(args) > i and _channels_last(args[i]) for i in layout_args):
        suffix += CHANNELS_LAST_SUFFIX
    if param_names and packet in (aten.mm, aten.addmm) and len(args) >= 2 \
            and isinstance(args[-1], torch.Tensor):
        name = param_names.get(id(args[-1].untyped_storage()), "")
        if name.rsplit(".", 1)[-1].startswith("weight_hh"):
            suffix += STEP_SUFFIX
    return suffix


def embedding_bytes(args, out_bytes: int) -> tuple[int, int]:
    """A lookup reads the indices and only the rows it gathers (as many bytes as it writes),
    not the whole table."""
    indices = args[1]
    return indices.numel() * indices.element_size() + out_bytes, out_bytes


def embedding_bag_bytes(args, out_bytes: int) -> tuple[int, int]:
    """A bag lookup reads its indices, offsets and per-sample weights and the rows it gathers
    (one per index), not the whole table; it writes its outputs (the bags and the index
    bookkeeping ``offset2bag``, ``bag_size``, ``max_indices``)."""
    weight, indices = args[0], args[1]
    small = [t for t in args[1:] if isinstance(t, torch.Tensor)]
    row_bytes = (weight.shape[-1] if weight.dim() else 1) * weight.element_size()
    return (sum(t.numel() * t.element_size() for t in small) + indices.numel() * row_bytes,
            out_bytes)


def no_bytes(args, out_bytes: int) -> tuple[int, int]:
    """An allocation without a kernel (:data:`ALLOC_PACKETS`) reads and writes nothing."""
    return 0, 0


BYTES_RULES = {aten.embedding: embedding_bytes, aten._embedding_bag: embedding_bag_bytes,
               aten._embedding_bag_forward_only: embedding_bag_bytes,
               **{p: no_bytes for p in ALLOC_PACKETS}}
