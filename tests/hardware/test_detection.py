"""Detection of the attached device: CPU parsing, catalog matching, CUDA absent, CUDA broken,
CUDA present (mocked), and the import boundary (no torch at import)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from aiadvisor.hardware import CpuInfo, detect, detection, probe
from aiadvisor.hardware.detection import parse_cpuinfo

# Two sockets x 2 cores x 2 hyper-threads = 8 logical CPUs, 4 physical cores.
CPUINFO = "\n\n".join(
    f"""processor\t: {i}
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8480+
cpu MHz\t\t: 2000.000
physical id\t: {i // 4}
core id\t\t: {(i // 2) % 2}
flags\t\t: fpu sse sse4_2 avx avx2 fma f16c avx512f avx512bw """
    "avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 aes"
    for i in range(8)
)
MEMINFO = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"


def test_parse_cpuinfo_counts_physical_cores_and_keeps_isa_flags():
    info = parse_cpuinfo(CPUINFO, meminfo=MEMINFO)
    assert info.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert info.num_threads == 8 and info.num_cores == 4  # (socket, core) pairs
    assert info.family == 6 and info.mhz == 2000.0 and info.vendor_id == "GenuineIntel"
    assert {"avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "avx2", "fma"} <= set(info.isa_flags)
    assert "aes" not in info.isa_flags and "fpu" not in info.isa_flags
    assert info.memory_bytes == 16384000 * 1024
    assert info.fast_bf16 and info.fast_fp16


def _no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)


def _fake_cpu(monkeypatch, **fields):
    info = CpuInfo(**{"model": "AMD EPYC", "vendor_id": "AuthenticAMD", "family": 25,
                      "num_cores": 2, "num_threads": 2, "mhz": 2445.4,
                      "isa_flags": ("avx", "avx2", "fma"), "memory_bytes": 24 * 2**30, **fields})
    monkeypatch.setattr(detection, "cpu_info", lambda: info)
    # The whole fake CPU is this process's, and its figures are the formula's: the tests of
    # a container's share and of the quick-matmul anchor below undo these two.
    monkeypatch.setattr(detection, "usable_cpu_cores",
                        lambda cpu: (cpu.num_cores, "physical cores"))
    monkeypatch.setattr(detection, "anchored_cpu_spec", lambda spec: spec)
    return info


def test_cuda_absent_falls_back_to_the_cpu_and_says_why(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch)
    device = probe()
    assert device.backend == "cpu"
    assert "CUDA" in device.fallback_reason
    spec = detect()
    assert spec.kind == "cpu" and not spec.measured
    assert "Fell back to the CPU" in spec.notes and "CUDA" in spec.notes


def test_unknown_cpu_gets_an_estimate_that_says_so(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch)
    spec = detect()
    # 2 cores x 2.4454 GHz x 32 FLOP/cycle (AVX2: 2 FMA x 8 lanes x 2) = 156.5 GFLOP/s.
    assert spec.fp32_tflops == pytest.approx(2 * 2.4454 * 32 / 1000, rel=1e-3)
    assert "ESTIMATED" in spec.notes
    assert spec.memory_gb == 24  # 24 GiB read as binary GB
    # Bandwidth estimated from the core count: 2 cores x 15 GB/s (a single core streams about
    # 18 GB/s on the 2-core VMs measured here), and the note says it is an estimate.
    assert spec.memory_bw_gbs == pytest.approx(30.0)
    assert "memory_bw_gbs is ESTIMATED" in spec.notes
    assert spec.name == "AMD EPYC (local CPU, 2 cores)"


def test_the_bandwidth_estimate_stops_at_what_the_memory_channels_carry(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, num_cores=64)
    # 64 x 15 = 960 GB/s would be more than 8 DDR4-3200 channels carry: capped at 160.
    assert detect().memory_bw_gbs == pytest.approx(160.0)


def test_zen4_avx512_counts_a_256_bit_datapath(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, model="AMD Ryzen Weird", isa_flags=("avx2", "fma", "avx512f"))
    # Zen 4 runs AVX-512 as two 256-bit halves: still 32 FP32 FLOP/cycle -> 2 x 2.4454 x 32.
    assert detect().fp32_tflops == pytest.approx(0.1565, rel=1e-3)


def test_an_amx_cpu_gets_an_estimated_bf16_peak_from_its_flags(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, model="Intel Xeon Unknown", vendor_id="GenuineIntel", family=6,
              mhz=2600.0, isa_flags=("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"))
    spec = detect()
    # AMX tile unit: 1024 BF16 FLOP/cycle/core (Intel AMX overview) -> 2 x 2.6 GHz x 1024
    # = 5.325 TFLOP/s; fp32 2 x 2.6 x 64 = 0.333. A peak, said to be an estimate.
    assert spec.bf16_tflops == pytest.approx(5.3248, rel=1e-4)
    assert spec.fp32_tflops == pytest.approx(0.3328, rel=1e-4)
    assert "bf16_tflops is ESTIMATED" in spec.notes and "AMX-BF16" in spec.notes
    from aiadvisor.hardware.support import support_level
    assert support_level(spec, "bf16") == "full"  # was "emulated" without a figure


def test_avx512_bf16_without_amx_counts_twice_the_fp32_fma_rate(monkeypatch):
    _no_accelerator(monkeypatch)
    # Cooper Lake-like Intel: VDPBF16PS, 4 FLOP per FP32 lane where an FMA does 2: 2 x 64
    # = 128 FLOP/cycle -> 2 cores x 2.4454 GHz x 128 = 0.626 TFLOP/s.
    _fake_cpu(monkeypatch, model="Intel Xeon CPL", vendor_id="GenuineIntel", family=6,
              isa_flags=("avx2", "fma", "avx512f", "avx512_bf16"))
    spec = detect()
    assert spec.bf16_tflops == pytest.approx(2 * 2.4454 * 128 / 1000, rel=1e-4)
    assert "VDPBF16PS" in spec.notes
    # Zen 4 (AVX-512 on 256-bit halves): 2 x 32 = 64 FLOP/cycle -> 0.313 TFLOP/s.
    _fake_cpu(monkeypatch, model="AMD Ryzen Weird", isa_flags=("avx2", "fma", "avx512f",
                                                               "avx512_bf16"))
    assert detect().bf16_tflops == pytest.approx(2 * 2.4454 * 64 / 1000, rel=1e-4)


def test_a_cpu_without_bf16_flags_has_no_bf16_figure(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, isa_flags=("avx2", "fma", "avx512f"))
    spec = detect()
    assert spec.bf16_tflops is None and "bf16_tflops" not in spec.notes


def test_a_known_cpu_matches_its_catalog_row(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, model="Intel(R) Xeon(R) Platinum 8480+", vendor_id="GenuineIntel",
              family=6, num_cores=56)
    device = probe()
    assert device.catalog_name == "Intel Xeon Platinum 8480+"
    assert device.spec.bf16_tflops == pytest.approx(114.7)
    assert device.spec.notes.startswith("Detected local CPU")


def test_a_broken_cuda_driver_falls_back_without_raising(monkeypatch):
    _fake_cpu(monkeypatch)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)

    def broken():
        raise RuntimeError("CUDA driver initialization failed, you might not have a CUDA gpu.")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    device = probe()
    assert device.backend == "cpu"
    assert "cuda probe failed: RuntimeError: CUDA driver initialization failed" in (
        device.fallback_reason)
    spec = detect()  # never raises in a notebook
    assert spec.kind == "cpu" and "CUDA driver initialization failed" in spec.notes


def test_unreadable_cpu_info_and_missing_torch_still_give_a_spec(monkeypatch):
    def unreadable():
        raise OSError("no /proc")

    monkeypatch.setattr(detection, "cpu_info", unreadable)
    monkeypatch.setitem(sys.modules, "torch", None)  # "import torch" raises ImportError
    device = probe()
    assert device.backend == "cpu" and "torch is not importable" in device.fallback_reason
    assert detect().kind == "cpu"


def _fake_cuda(monkeypatch, name: str, memory_bytes: int, sms: int, cc=(9, 0)):
    props = SimpleNamespace(name=name, total_memory=memory_bytes, multi_processor_count=sms,
                            major=cc[0], minor=cc[1])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: name)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(detection, "_nvml_details", lambda: {"power_limit_w": 700.0})


def test_a_cuda_device_matches_its_catalog_row(monkeypatch):
    # What torch reports on an H100 SXM: "NVIDIA H100 80GB HBM3", 132 SMs, 79.6 GiB.
    _fake_cuda(monkeypatch, "NVIDIA H100 80GB HBM3", 85_520_809_984, 132)
    device = probe()
    assert device.backend == "cuda" and device.fallback_reason is None
    assert device.catalog_name == "NVIDIA H100 SXM"
    assert device.num_sm == 132 and device.compute_capability == "9.0"
    assert device.num_devices == 8 and device.power_limit_w == 700.0
    spec = detect()
    assert spec.name == "NVIDIA H100 SXM" and spec.bf16_tflops == pytest.approx(989.4)
    assert "via cuda" in spec.notes


def test_an_unknown_cuda_device_is_built_from_what_the_driver_says(monkeypatch):
    _fake_cuda(monkeypatch, "NVIDIA Imaginary 9000", 48 * 2**30, 100, cc=(8, 9))
    spec = detect()
    assert spec.name == "NVIDIA Imaginary 9000" and spec.vendor == "NVIDIA"
    assert spec.memory_gb == 48 and spec.fp32_tflops is None and spec.tdp_w == 700.0
    assert "Not in the catalog" in spec.notes


def test_importing_the_package_does_not_import_torch_or_pandas():
    code = ("import sys, aiadvisor, aiadvisor.hardware as hw; "
            "assert 'torch' not in sys.modules, 'torch'; "
            "assert 'pandas' not in sys.modules, 'pandas'; "
            "hw.get('H100'); assert 'torch' not in sys.modules, 'torch after get'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize(
    ("memory_bytes", "expected"),
    [
        (62_800_000_000, "NVIDIA Jetson AGX Orin 64GB"),  # what an AGX Orin 64GB reports
        (7_600_000_000, "Orin"),  # an Orin Nano: not the AGX; Nano vs Nano Super undecidable
    ],
)
def test_a_shared_device_name_is_checked_against_the_reported_memory(
        monkeypatch, memory_bytes, expected):
    # Every Jetson Orin module reports the CUDA name "Orin"; memory tells them apart.
    _fake_cuda(monkeypatch, "Orin", memory_bytes, 16, cc=(8, 7))
    spec = detect()
    assert spec.name == expected
    if expected == "Orin":
        # 7.6e9 bytes reported, read as binary GB like the catalog's sizes
        assert spec.memory_gb == pytest.approx(7.6e9 / 2**30) and "Not in the catalog" in spec.notes


def test_a_reported_memory_far_from_the_catalog_row_is_not_matched(monkeypatch):
    _fake_cuda(monkeypatch, "NVIDIA H100 80GB HBM3", 16 * 10**9, 132)
    assert detect().name == "NVIDIA H100 80GB HBM3"  # 16 GB is no H100 SXM (80 GB)


def test_apple_silicon_matches_whatever_memory_it_was_bought_with(monkeypatch):
    # Catalog rows list the maximum unified memory (M3 Max: 128 GB); a 36 GB machine is still
    # an M3 Max.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(detection, "_sysctl", lambda key: "Apple M3 Max")
    _fake_cpu(monkeypatch, model="Apple M3 Max", memory_bytes=36 * 2**30)
    device = probe()
    assert device.backend == "mps" and device.catalog_name == "Apple M3 Max (40-core GPU)"


def test_a_container_quota_prices_the_cores_the_process_has(monkeypatch):
    """Binder and Docker show the host's /proc/cpuinfo (here 64 cores) while the cgroup quota
    gives the process 2 CPUs: the estimate counts the 2."""
    from aiadvisor.hardware import threads

    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, num_cores=64, num_threads=128)
    monkeypatch.setattr(detection, "usable_cpu_cores", _real_usable_cores)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda root="/sys/fs/cgroup": 2.0)
    monkeypatch.setattr(detection.os, "sched_getaffinity", lambda pid: set(range(128)))
    spec = detect()
    # 2 cores x 2.4454 GHz x 32 FLOP/cycle (AVX2) = 156.5 GFLOP/s, 2 x 15 GB/s of bandwidth.
    assert spec.fp32_tflops == pytest.approx(2 * 2.4454 * 32 / 1000, rel=1e-3)
    assert spec.memory_bw_gbs == pytest.approx(30.0)
    assert spec.name == "AMD EPYC (local CPU, 2 cores)"
    assert "container CPU quota" in spec.notes


def test_a_catalog_cpu_in_a_container_keeps_its_share_of_the_row(monkeypatch):
    from aiadvisor.hardware import threads

    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, model="Intel(R) Xeon(R) Platinum 8480+", vendor_id="GenuineIntel",
              family=6, num_cores=56)
    monkeypatch.setattr(detection, "usable_cpu_cores", _real_usable_cores)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda root="/sys/fs/cgroup": 2.0)
    monkeypatch.setattr(detection.os, "sched_getaffinity", lambda pid: set(range(128)))
    spec = detect()
    # The row: 56 cores, fp32 7.17, bf16 (AMX) 114.7 TFLOP/s, 307.2 GB/s. Two of its cores:
    # 7.17 x 2/56 = 0.256, 114.7 x 2/56 = 4.096, bandwidth 2 x 15 = 30 GB/s.
    assert spec.fp32_tflops == pytest.approx(0.2561, rel=1e-3)
    assert spec.bf16_tflops == pytest.approx(4.096, rel=1e-3)
    assert spec.memory_bw_gbs == pytest.approx(30.0)
    assert "2 of the row's 56 cores (container CPU quota)" in spec.notes
    assert spec.notes.startswith("Detected local CPU")


def test_the_quick_matmul_scales_the_estimated_peaks(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, isa_flags=("avx", "avx2", "fma", "avx512f", "avx512_bf16"))
    monkeypatch.setattr(detection, "anchored_cpu_spec", _real_anchor)
    monkeypatch.setattr(detection, "_ANCHORS", {})
    plain = detect(anchor=False)
    learned = detection._learned_matmul_seconds(plain, 512)
    # The matmul ran 1.5x faster than the cost model priced it at the estimated peak: every
    # peak x 1.5 (fp32 2 x 2.4454 GHz x 32 = 0.1565 -> 0.2348; bf16 twice that).
    monkeypatch.setattr(detection, "_quick_matmul_seconds", lambda n, repeats=9: learned / 1.5)
    # A one-element add took 1.5 us: the per-op cost, where 5 us is assumed without it.
    monkeypatch.setattr(detection, "_tiny_op_us", lambda: 1.5)
    spec = detect()
    assert plain.launch_overhead_us is None and spec.launch_overhead_us == 1.5
    assert "Per-op cost 1.5 us (a one-element add timed here; 5 us is assumed" in spec.notes
    assert spec.fp32_tflops == pytest.approx(2 * 2.4454 * 32 / 1000 * 1.5, rel=1e-3)
    assert spec.bf16_tflops == pytest.approx(2 * 2.4454 * 64 / 1000 * 1.5, rel=1e-3)
    assert spec.notes.startswith("Peaks scaled by a quick matmul (x1.50)")
    assert "fp32_tflops is ESTIMATED" in spec.notes and not spec.measured
    assert spec.memory_bw_gbs == plain.memory_bw_gbs and spec.name == plain.name
    # A busy reading of the tiny op (50 us or more) is not used.
    monkeypatch.setattr(detection, "_ANCHORS", {})
    monkeypatch.setattr(detection, "_tiny_op_us", lambda: 80.0)
    assert detect().launch_overhead_us is None
    # A timing 10x away from the estimate is not trusted: the estimate stays.
    monkeypatch.setattr(detection, "_ANCHORS", {})
    monkeypatch.setattr(detection, "_quick_matmul_seconds", lambda n, repeats=9: learned / 10)
    assert detect().fp32_tflops == plain.fp32_tflops


def test_the_quick_matmul_draws_no_random_numbers_and_sizes_up_with_the_peak(monkeypatch):
    monkeypatch.setattr(detection, "_ANCHORS", {})
    torch.manual_seed(7)
    state = torch.get_rng_state()
    spec = _real_anchor(detect(anchor=False))
    assert torch.equal(torch.get_rng_state(), state)
    assert spec.kind != "cpu" or spec.measured or spec.notes.startswith(detection.ANCHOR_MARK)
    # n doubles from 512 while the estimated peak would run it in under 1 ms:
    # 2 x 512^3 = 0.27 GFLOP -> 1.3 ms at 0.2 TFLOP/s; 2 x 1024^3 = 2.1 GFLOP -> 1.07 ms at 2.
    assert detection._anchor_size(0.2) == 512
    assert detection._anchor_size(2.0) == 1024
    assert detection._anchor_size(100.0) == 2048


def _matmul_anchored(monkeypatch, cache: str):
    """(the fake CPU's spec without the anchor, with it: its quick matmul ran 1.5x faster than
    priced), every anchor cache emptied."""
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, isa_flags=("avx", "avx2", "fma", "avx512f"))
    monkeypatch.setattr(detection, "anchored_cpu_spec", _real_anchor)
    monkeypatch.setattr(detection, "_ANCHORS", {})
    monkeypatch.setattr(detection, cache, {})
    plain = detect(anchor=False)
    monkeypatch.setattr(detection, "_quick_matmul_seconds",
                        lambda n, repeats=9: detection._learned_matmul_seconds(plain, 512) / 1.5)
    spec = detect()
    assert spec.notes.startswith(detection.ANCHOR_MARK)
    return plain, spec


def test_a_quick_lstm_layer_gives_the_recurrent_factors_of_the_attached_cpu(monkeypatch):
    import math

    plain, spec = _matmul_anchored(monkeypatch, "_RECURRENT_ANCHORS")
    # The layer ran 2x its price at batch 8 and 1.2x at batch 64 (inference): the price as
    # recurrent_anchor reads it, inside its guard (without the factor being measured).
    ran = {8: 2.0, 64: 1.2}

    def priced(batch, train):
        return detection._learned_recurrent_seconds(spec, batch, train=train)

    monkeypatch.setattr(detection, "_recurrent_seconds",
                        lambda batch, train: priced(batch, train) * ran[batch])
    log_b, log_f = detection.recurrent_anchor(spec, train=False)
    assert log_b == pytest.approx((math.log(8), math.log(64)))
    assert log_f == pytest.approx((math.log(2.0), math.log(1.2)))
    # Not for a spec the quick matmul did not scale (a catalog CPU, or the anchor off), nor for
    # a benchmarked one; and a factor 10x away from the price is taken as a failed timing.
    assert detection.recurrent_anchor(plain, train=False) is None
    assert detection.recurrent_anchor(dataclasses.replace(spec, measured=True),
                                      train=False) is None
    monkeypatch.setattr(detection, "_RECURRENT_ANCHORS", {})
    monkeypatch.setattr(detection, "_recurrent_seconds",
                        lambda batch, train: priced(batch, train) * 10)
    assert detection.recurrent_anchor(spec, train=False) is None


def test_two_quick_convolutions_give_the_conv_factors_of_the_attached_cpu(monkeypatch):
    import math

    plain, spec = _matmul_anchored(monkeypatch, "_CONV_ANCHORS")
    # The 3 x 3 layer ran 2x its price, the 1 x 1 projection 1.25x (training).
    three, one = detection.CONV_ANCHOR_SHAPES
    ran = {three: 2.0, one: 1.25}
    monkeypatch.setattr(detection, "_conv_seconds", lambda shape, train: detection._learned_conv(
        spec, shape, train=train)[0] * ran[shape])
    log_i, log_f = detection.conv_anchor(spec, train=True)
    # By increasing FLOPs per byte, worked by hand from the traced forward convolution (its
    # input, weight and output): the 1 x 1, 2 x 8 x 64 x 256 x 32^2 = 268.4 MFLOP over
    # 4 x (8 x 64 x 32^2 + 256 x 64 + 8 x 256 x 32^2) = 10.55 MB (25.4 FLOP a byte); the
    # 3 x 3, 2 x 8 x 64 x 64 x 9 x 32^2 = 604.0 MFLOP over 4 x (2 x 8 x 64 x 32^2 + 64 x 64 x 9)
    # = 4.34 MB (139.3).
    assert math.exp(log_i[0]) == pytest.approx(268435456 / 10551296, rel=1e-6)
    assert math.exp(log_i[1]) == pytest.approx(603979776 / 4341760, rel=1e-6)
    assert log_f == pytest.approx((math.log(1.25), math.log(2.0)))
    assert detection.conv_anchor(plain, train=True) is None
    assert detection.conv_anchor(dataclasses.replace(spec, measured=True), train=True) is None
    monkeypatch.setattr(detection, "_CONV_ANCHORS", {})
    monkeypatch.setattr(detection, "_conv_seconds", lambda shape, train: 1e-9)
    assert detection.conv_anchor(spec, train=True) is None   # 1000x off: a failed timing


def test_the_quick_convolution_leaves_the_callers_rng_alone():
    torch.manual_seed(3)
    state = torch.get_rng_state()
    assert detection._conv_seconds((2, 8, 8, 8, 3), train=True, repeats=1) > 0
    assert torch.equal(torch.get_rng_state(), state)


def test_the_quick_bernoulli_draws_from_its_own_generator(monkeypatch):
    monkeypatch.setattr(detection, "_BERNOULLI_ANCHORS", {})
    torch.manual_seed(5)
    state = torch.get_rng_state()
    spec = _real_anchor(detect(anchor=False))
    per_byte = detection.bernoulli_anchor(spec)
    assert torch.equal(torch.get_rng_state(), state)
    if spec.kind == "cpu" and not spec.measured and spec.notes.startswith(detection.ANCHOR_MARK):
        # Seconds per counted byte (8 an FP32 element): PyTorch's CPU generator draws well
        # under six billion numbers a second (the Xeon VM: 4.8 ns each), so above 2e-11 s a
        # byte (0.16 ns an element).
        assert per_byte is not None and per_byte > 2e-11
    # Only the attached CPU the quick matmul scaled: not a benchmarked spec, nor a catalog one.
    assert detection.bernoulli_anchor(dataclasses.replace(spec, measured=True)) is None
    assert detection.bernoulli_anchor(dataclasses.replace(spec, notes="catalog row")) is None


def test_the_quick_lstm_layer_draws_no_random_numbers(monkeypatch):
    torch.manual_seed(3)
    state = torch.get_rng_state()
    for train in (False, True):
        assert detection._recurrent_seconds(8, train=train, repeats=1) > 0
    assert torch.equal(torch.get_rng_state(), state)


_real_usable_cores = detection.usable_cpu_cores
_real_anchor = detection.anchored_cpu_spec


def test_a_process_pinned_to_one_cpu_is_priced_on_one_core(monkeypatch):
    _no_accelerator(monkeypatch)
    _fake_cpu(monkeypatch, num_cores=2)
    monkeypatch.setattr(detection, "usable_cpu_cores", _real_usable_cores)
    monkeypatch.setattr(detection.os, "sched_getaffinity", lambda pid: {0})   # taskset -c 0
    spec = detect()
    # 1 x 2.4454 GHz x 32 FLOP/cycle = 78.3 GFLOP/s, 15 GB/s.
    assert spec.name == "AMD EPYC (local CPU, 1 core)"
    assert spec.fp32_tflops == pytest.approx(2.4454 * 32 / 1000, rel=1e-3)
    assert spec.memory_bw_gbs == pytest.approx(15.0) and "(CPU affinity)" in spec.notes
