"""``advise(mode="generate")``: the report's serving answer, its text section and its errors."""

from __future__ import annotations

import ast

import pandas as pd
import pytest
import torch

import aiadvisor as aa
from aiadvisor import cli, examples
from aiadvisor.errors import InvalidArgumentError, ProfileOptionError
from aiadvisor.profiler.generation import NotACausalLMError

H100 = "NVIDIA H100 SXM"


@pytest.fixture(scope="module")
def tiny_gpt():
    model, x = examples.build("tiny-gpt")  # 4 layers, 4 heads of 64 dims, 512 positions
    return model, x


@pytest.fixture(scope="module")
def report(tiny_gpt):
    model, x = tiny_gpt
    return aa.advise(model, x, mode="generate", hardware=H100)


def test_generation_is_predict_generation_at_the_report_defaults(report):
    gp = report.generation_profile
    # The example is 8 x 512 tokens and the model has 512 positions: 128 output tokens leave
    # 512 - 128 = 384 for the prompt. One user; the H100 runs bf16.
    direct = aa.predict_generation(gp, hardware=H100, prompt_len=384, output_len=128,
                                   batch_size=1, weight_precision="bf16")
    assert report.generation == direct
    # 2 (K and V) x 4 layers x 4 heads x 64 dims x 2 bytes (bf16)
    assert report.generation.kv_bytes_per_token == 2 * 4 * 4 * 64 * 2 == 4096
    assert report.options["mode"] == "generate"
    # The other tabs show the prompt forward: an inference profile of the example.
    assert (report.profile.mode, report.profile.batch_size, report.profile.seq_len) == (
        "infer", 8, 512)


def test_serving_is_plan_serving_on_the_report_device(report):
    direct = aa.plan_serving(report.generation_profile, hardware=H100, num_devices=1,
                             prompt_len=384, output_len=128)
    pd.testing.assert_frame_equal(report.serving, direct)


def test_weights_default_to_fp16_where_the_device_has_no_bf16(tiny_gpt):
    model, x = tiny_gpt
    gp = aa.profile_generation(model, x)
    # V100: fp16 tensor cores, no bf16 figure in its datasheet.
    report = aa.advise(gp, x, hardware="NVIDIA V100 SXM2 32GB")
    assert report.options["mode"] == "generate"
    assert report.generation.weight_precision == "fp16"
    assert report.generation.kv_precision == "fp16"


def test_with_options_keeps_the_serving_answer_for_more_devices(report):
    two = report.with_options(num_devices=2)
    assert two.generation.num_devices == 2
    direct = aa.predict_generation(report.generation_profile, hardware=H100, num_devices=2,
                                   prompt_len=384, output_len=128)
    assert two.generation == direct


def test_text_report_has_a_serving_section_marked_estimated(report):
    text = str(report)
    section = text[text.index("Serving (LLM generation)"):]
    g = report.generation
    assert "KV cache per token: 4.00 KiB" in section  # 4096 bytes
    assert f"max concurrency: {g.max_batch:,} sequences" in section
    for label in ("TTFT", "TPOT", "tokens/s per user", "best plan:"):
        assert label in section
    best = report.serving.iloc[0]
    assert f"{best['weight_precision']} weights, {best['kv_precision']} KV" in section
    # Every line of figures (after the title, its rule and the configuration) says estimated.
    assert all("estimated" in line for line in section.splitlines()[4:])


def test_json_has_the_generation_and_the_plan(report):
    import json

    data = json.loads(report.to_json())
    assert data["generation"]["prompt_len"] == 384
    assert data["generation"]["kv_bytes_per_token"] == 4096
    assert len(data["serving"]) == len(report.serving)


def test_serving_recommendations_come_first_with_code_that_parses(report):
    recs = report.recommendations
    ids = [r.id for r in recs[:6]]
    assert ids == ["serve_vllm", "serve_vllm_server", "serve_sglang", "serve_tgi",
                   "serve_tensorrt_llm", "generate_static_compiled"]
    best = report.serving.iloc[0]
    for rec in recs[:5]:
        ast.parse(rec.code)
        assert rec.category == "serving"
        assert rec.extra["tokens_per_s"] == round(float(best["tokens_per_s"]), 1)
        assert "estimated" in rec.title
    # The built-in decoder has no Hub id: the code saves the live model first.
    assert "model_id = 'aiadvisor_serving'" in recs[0].code


def test_non_causal_lm_with_generate_is_a_clear_error():
    with pytest.raises(NotACausalLMError, match="causal LM"):
        aa.advise(torch.nn.Linear(8, 8), torch.randn(2, 8), mode="generate", hardware=H100)


def test_a_step_profile_cannot_answer_generate(tiny_gpt):
    model, x = tiny_gpt
    prof = aa.profile(model, x[:1, :64], mode="infer")
    with pytest.raises(ProfileOptionError, match="aa.profile_generation"):
        aa.advise(prof, x, mode="generate", hardware=H100)


def test_generate_refuses_an_optimizer_and_measure(tiny_gpt):
    model, x = tiny_gpt
    with pytest.raises(ProfileOptionError, match="optimizer='adamw'"):
        aa.advise(model, x, mode="generate", optimizer="adamw", hardware=H100)
    with pytest.raises(ProfileOptionError, match="measure=True"):
        aa.advise(model, x, mode="generate", measure=True, hardware=H100)


def test_unknown_mode_names_generate_among_the_choices():
    with pytest.raises(InvalidArgumentError, match="'generate'") as info:
        aa.advise(torch.nn.Linear(8, 8), torch.randn(2, 8), mode="serve", hardware=H100)
    assert "'serve'" in str(info.value)


def test_train_report_has_no_serving_answer():
    report = aa.advise(torch.nn.Linear(8, 8), torch.randn(2, 8), hardware=H100)
    assert report.generation is None and report.serving is None
    with pytest.raises(InvalidArgumentError, match="mode='generate'"):
        report.generation_for(prompt_len=64)


def test_cli_demo_generate_prints_the_serving_section(capsys):
    assert cli.main(["demo", "--mode", "generate", "--hardware", "NVIDIA L4"]) == 0
    out = capsys.readouterr().out
    assert "Serving (LLM generation)" in out and "NVIDIA L4 x 1, bf16 weights" in out


def test_cli_profile_refuses_generate(capsys):
    with pytest.raises(SystemExit):
        cli.main(["profile", "--mode", "generate"])
    assert "invalid choice: 'generate'" in capsys.readouterr().err


def test_hf_model_id_goes_into_the_engine_code():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=1000, max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    model.config._name_or_path = "meta-llama/Llama-3.2-1B"  # as from_pretrained records it
    report = aa.advise(model, torch.zeros(1, 64, dtype=torch.long), mode="generate",
                       hardware=H100, model_name="llm", inputs_name="ids")
    vllm = next(r for r in report.recommendations if r.id == "serve_vllm")
    assert "model_id = 'meta-llama/Llama-3.2-1B'" in vllm.code
    assert "if False:" in vllm.code  # nothing to save: the Hub has it
    compiled = next(r for r in report.recommendations if r.id == "generate_static_compiled")
    assert "llm.generate(" in compiled.code and "(ids,)" in compiled.code
    # GQA: 2 (K, V) x 2 layers x 2 KV heads x 16 dims x 2 bytes
    assert report.generation.kv_bytes_per_token == 2 * 2 * 2 * 16 * 2
    # 64-token example prompt, 128 output tokens: 192 of the 256 positions.
    assert (report.generation.prompt_len, report.generation.output_len) == (64, 128)


def test_html_and_markdown_reports_have_the_serving_section(report):
    page = report._repr_html_()
    assert "<h2>Serving (LLM generation)</h2>" in page
    # Inside the report's block: the serving section comes before the block's closing tag.
    assert page.index("Serving (LLM generation)") < page.rindex("</div>")
    assert "KV cache per token: 4.00 KiB" in page
    markdown = report.to_markdown()
    assert "## Serving (LLM generation)" in markdown
    assert "| weights | KV | tp | concurrent |" in markdown
    # A train report has none of it.
    plain = aa.advise(torch.nn.Linear(8, 8), torch.randn(2, 8), hardware=H100)
    assert "Serving (LLM generation)" not in plain._repr_html_() + plain.to_markdown()
