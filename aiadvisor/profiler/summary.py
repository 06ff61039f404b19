"""Plain-text summary of a :class:`~aiadvisor.schema.ModelProfile` (no torch needed)."""

from __future__ import annotations

from ..schema import ModelProfile
from ..units import fmt_bytes, fmt_flops


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
