"""Plain-text summary of a :class:`~aiadvisor.schema.ModelProfile` (no torch needed)."""

from __future__ import annotations

from ..schema import ModelProfile
from ..units import fmt_bytes, fmt_flops


def process_memory_text(prof: ModelProfile) -> str | None:
    """What the process will show for the step, beside the allocator-level peak (estimated),
    or None where the profile has no such figure.

    A model on the CPU: the resident set (what ``ps`` and ``top`` show) with its P10-P90 band.
    A model on a CUDA device: ``torch.cuda.max_memory_reserved()``. Otherwise (a meta or CPU
    trace priced for a GPU): the reserved figure the same step would show on a CUDA device.
    nvidia-smi shows the CUDA context on top of either GPU figure."""
    from ..estimate.process_memory import CUDA_CONTEXT_BYTES

    m = prof.memory
    context = f"; nvidia-smi shows about {CUDA_CONTEXT_BYTES // 2**20} MiB more, the CUDA context"
    if m.process_bytes is not None and str(prof.device).startswith("cuda"):
        return (f"{fmt_bytes(m.process_bytes)} torch.cuda.max_memory_reserved() "
                f"(estimated{context})")
    if m.process_bytes is not None:
        band = (f", P10-P90 {fmt_bytes(m.process_low_bytes)} to "
                f"{fmt_bytes(m.process_high_bytes)}"
                if m.process_low_bytes is not None and m.process_high_bytes is not None else "")
        return (f"{fmt_bytes(m.process_bytes)} resident set, what ps and top show "
                f"(estimated{band})")
    if m.cuda_reserved_bytes:
        return (f"on a CUDA device: {fmt_bytes(m.cuda_reserved_bytes)} "
                f"torch.cuda.max_memory_reserved() (estimated{context})")
    return None


def profile_text(prof: ModelProfile, *, top: int = 8) -> str:
    """A readable block: sizes, FLOPs, memory breakdown and the costliest modules."""
    shape = f"batch {prof.batch_size}" + (f" x seq {prof.seq_len}" if prof.seq_len else "")
    m = prof.memory
    optimizer = f"optimizer {prof.optimizer}" if prof.mode == "train" else "no optimizer"
    flops = (f"forward {fmt_flops(prof.flops_forward)}, backward {fmt_flops(prof.flops_backward)}"
             f", optimizer {fmt_flops(prof.flops_optimizer)}")
    memory = ", ".join(f"{label} {fmt_bytes(value)}" for label, value in (
        ("weights", m.weights_bytes), ("grads", m.grads_bytes), ("optimizer", m.optimizer_bytes),
        ("activations", m.activations_bytes), ("inputs", m.inputs_bytes)))
    how = ("predicted from fake tensors" if prof.path != "real"
           else "from a real small batch, scaled")
    lines = [
        f"{prof.model_name} ({prof.model_type}) - {prof.mode}, {prof.precision}, "
        f"{optimizer}, {shape}",
        f"  parameters        {prof.num_params:,} ({prof.num_trainable_params:,} trainable)",
        f"  FLOPs per step    {flops}",
        f"  bytes moved       {fmt_bytes(prof.bytes_per_step)} per step (sum over ops)",
        f"  memory            {memory}",
        f"  peak memory       {fmt_bytes(m.peak_bytes)} ({how})",
    ]
    process = process_memory_text(prof)
    if process:
        lines.append(f"  process memory    {process}")
    if prof.measured_step_time_s is not None:
        lines.append(f"  measured          step {prof.measured_step_time_s * 1e3:.1f} ms, peak "
                     f"{fmt_bytes(prof.measured_peak_bytes or 0)} on {prof.device}")
    lines.append(f"  captured with     {prof.path} tensors on {prof.device}")
    for note in prof.notes:
        lines.append(f"  note: {note}")
    layers = prof.layers
    if not layers.empty:
        layers = layers.assign(flops=(layers.flops_forward + layers.flops_backward) * layers.repeat)
        layers = layers[layers.flops > 0].sort_values("flops", ascending=False).head(top)
        total = prof.flops_forward + prof.flops_backward or 1.0
        if not layers.empty:
            lines.append("  costliest modules (forward + backward FLOPs, all repeats):")
            for row in layers.itertuples():
                times = f" x{row.repeat}" if row.repeat > 1 else ""
                lines.append(f"    {row.name or '(root)':<40} {row.type:<18} "
                             f"{fmt_flops(row.flops):>12} {row.flops / total:6.1%}{times}")
    return "\n".join(lines)
