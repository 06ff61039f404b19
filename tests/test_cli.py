"""The ``aiadvisor`` command on built-in example models."""

from __future__ import annotations

import pytest

from aiadvisor import cli, examples


def test_models_lists_every_example(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in examples.available():
        assert name in out


def test_profile_command_prints_the_profile(capsys):
    assert cli.main(["profile", "--model", "mlp", "--batch", "4"]) == 0
    out = capsys.readouterr().out
    # MLP 784-1024-1024-10: weights 784*1024 + 1024*1024 + 1024*10 plus biases 1024+1024+10
    params = 784 * 1024 + 1024 * 1024 + 1024 * 10 + 1024 + 1024 + 10
    assert f"{params:,}" in out
    assert "fake tensors" in out


def test_unknown_model_is_a_clear_error(capsys):
    assert cli.main(["profile", "--model", "gtp2"]) == 2
    err = capsys.readouterr().err
    assert "'gtp2' is not a built-in example" in err and "Did you mean 'gpt2'?" in err


def test_large_examples_are_built_on_the_meta_device():
    model, x = examples.build("llama-3-8b", batch_size=1, seq_len=128)
    assert next(model.parameters()).device.type == "meta"
    # Llama-3-8B: 32 layers x (q,o 4096^2 + k,v 4096*1024 + MLP 3*4096*14336 + 2 norms)
    # + embeddings and head 2 * 128256 * 4096 + final norm = 8,030,261,248
    assert sum(p.numel() for p in model.parameters()) == 8_030_261_248
    assert x.shape == (1, 128)


def test_seq_longer_than_positions_is_rejected():
    with pytest.raises(examples.InvalidArgumentError, match="at most 1024"):
        examples.build("gpt2", seq_len=4096)


def test_calibrate_prints_the_op_grid_and_writes_json(capsys, monkeypatch, tmp_path):
    import functools
    import json

    from aiadvisor.hardware import bench

    small = {"sizes": (32,), "precisions": ("fp32",), "bandwidth_bytes": 2**16,
             "min_time_s": 0.001, "op_elements": (2**10,)}
    monkeypatch.setattr(bench, "benchmark", functools.partial(bench.benchmark,
                                                              cache_dir=tmp_path, **small))
    out_file = tmp_path / "calibration.json"
    assert cli.main(["calibrate", "--quiet", "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "matmul fp32 GFLOP/s  n=32:" in out and "per-op overhead" in out
    assert "gelu_backward" in out and "bernoulli_" in out
    assert "optimizer adamw:" in out and "us per tensor" in out
    data = json.loads(out_file.read_text(encoding="utf-8"))
    # 30 memory-bound ops at one size (max pools in 2 windows x 2 layouts, batch norms in 2
    # modes x 2 layouts and a backward in 2 among them) + 6
    # linear shapes x (forward, backward) + 2 large-weight
    # linear shapes and 7 + 7 skinny (decode-step) shapes at K = 2048 and K = 512, 4 of them
    # again cycling 32 MiB and 4 on one weight in cache (recurrent steps), forward only
    # + 7 convolutions and a 1,024-MAC one (the per-call time) in 2 layouts (NCHW,
    # channels_last) and 4 LSTM layers x (forward, backward) + the first touch
    # of a fresh 128 MiB buffer + the square root of zeros; no decode-cache points with a 1
    # K-element grid.
    assert len(data["ops"]) == 30 + 12 + 2 + 14 + 4 + 4 + 32 + 8 + 1 + 1 \
        and len(data["optimizer"]) == 12
    assert "sqrt[zeros]" in out and "ns an element" in out
    assert data["config"]["op_elements"] == [2**10]

    # A first touch that cost nothing extra (fresh no slower than reused: timing noise) and an
    # op too fast for the clock are printed as such, not divided by (CI once failed on it).
    import dataclasses

    from aiadvisor.hardware.calibrate import OpPoint
    from aiadvisor.hardware.cli import calibration_text

    result = bench.benchmark()
    assert result.from_cache
    zero = dataclasses.replace(result, ops=[
        OpPoint(op="alloc.first_touch", family="first-touch", num_bytes=128 * 2**20, flops=0.0,
                seconds=0.0),
        OpPoint(op="alloc.first_touch", family="first-touch", num_bytes=128 * 2**20, flops=0.0,
                seconds=0.02),
        OpPoint(op="aten.relu", family="elementwise", num_bytes=2**20, flops=0.0, seconds=0.0),
        OpPoint(op="aten.sqrt[zeros]", family="sqrt-zero", num_bytes=4 * 2**20, flops=0.0,
                seconds=0.7e-3)])
    text = calibration_text(zero)
    # 0.7 ms over 2^20 elements = 0.67 ns an element
    assert "1 M elements +0.67 ns an element" in text
    # 0.02 s over 128 MiB = 156.25 us per MiB
    assert "128 MiB +0.0 us/MiB" in text and "128 MiB +156.2 us/MiB" in text
    assert "1.00 MiB too fast to time" in text


def test_report_can_rank_hardware_by_owning_it(capsys):
    import json

    argv = ["report", "--model", "mlp", "--batch", "4", "--hardware", "H100 SXM",
            "--format", "json", "--own", "--years", "4"]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["options"]["price"] == {"basis": "own", "years": 4.0, "utilisation": 0.5,
                                        "usd_per_kwh": 0.15}
    assert "purchase price where a device has one" in data["price_note"]
    rows = {r["hardware"]: r for r in data["hardware"]}
    # RTX 4090 owned over 4 years at 50 % use: 1599 / 17520 + 0.45 * 0.15 = 0.15877 $/h.
    assert rows["NVIDIA GeForce RTX 4090"]["usd_per_hour"] == pytest.approx(0.15877, abs=1e-5)
    assert rows["NVIDIA GeForce RTX 4090"]["price_basis"].startswith("own: 1,599 USD over 4 y")


def test_measurements_lists_the_store_and_the_correction_then_clears_it(capsys,
                                                                        measurement_store):
    from aiadvisor import __version__
    from aiadvisor.costmodel import measurements

    assert cli.main(["measurements"]) == 0
    assert f"{measurement_store} (0 records)" in capsys.readouterr().out
    for measured in (0.012, 0.012):  # predicted 10 ms, measured 12 ms: ratio 1.2
        measurements.append(measurements.Measurement(
            device="Test CPU", device_key="cpu/Test CPU", model="Linear", flops=1e9,
            batch_size=8, mode="train", precision="fp32", predicted_step_s=0.010,
            measured_step_s=measured, num_steps=5, aiadvisor_version=__version__,
            torch_version="2.x", timestamp="2026-12-03T17:00:00+00:00"))
    assert cli.main(["measurements"]) == 0
    out = capsys.readouterr().out
    assert "(2 records)" in out and "predicted    10.000 ms  measured    12.000 ms  x1.20" in out
    # 2 records at 1.2 with 2 prior pseudo-records: 1.2^(2/4) = 1.0954.
    assert "Test CPU: hardware='local' predictions corrected by 2 measurements on this " \
           "device (x1.10;" in out
    assert cli.main(["measurements", "--clear"]) == 0
    assert f"Cleared 2 measurements from {measurement_store}." in capsys.readouterr().out
    assert measurements.load() == []
    measurement_store.write_text("{", encoding="utf-8")
    assert cli.main(["measurements"]) == 0
    assert "It cannot be read (not JSON" in capsys.readouterr().out
