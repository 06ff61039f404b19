"""Rendering: names are validated identifiers, values are repr'd literals, every snippet parses."""

from __future__ import annotations

import ast

import pytest

from aiadvisor.codegen import SNIPPETS, CodeNames, literal, render, snippet
from aiadvisor.errors import AIAdvisorError, InvalidArgumentError

# Values every template needs, as a tactic rule would pass them.
EXAMPLE_VALUES = {
    "tf32": {},
    "autocast_train": {"dtype": "bfloat16", "device_type": "cuda"},
    "autocast_infer": {"dtype": "bfloat16", "device_type": "cuda"},
    "fp8": {"recipe": "rowwise", "min_features": 1024},
    "fp8_infer": {},
    "mxfp8": {"min_features": 1024},
    "fp4_infer": {},
    "int8_gpu": {},
    "channels_last": {},
    "torch_compile": {"mode": "default"},
    "cuda_graphs": {},
    "sdpa": {"causal": True},
    "checkpointing": {"selective": False},
    "distributed": {"strategy": "fsdp", "nproc": 8, "bf16": True, "num_steps": 10,
                    "reshard_after_forward": True},
    "deepspeed": {"stage": 3, "offload": True, "nproc": 8, "micro_batch": 1, "accum_steps": 4,
                  "bf16": True},
    "tensor_parallel": {"tp": 8, "dp": 4, "nproc": 32},
    "pipeline_parallel": {"pp": 4, "microbatches": 16},
    "expert_parallel": {"ep": 8, "dp": 2, "nproc": 8, "num_steps": 10},
    "optimizer_8bit": {"class_name": "AdamW8bit"},
    "fused_optimizer": {},
    "foreach_optimizer": {},
    "dataloader": {"num_workers": 8, "batch_size": 32, "prefetch": 4},
    "cpu_threads": {"threads": 8, "current": 2},
    "grad_accumulation": {"accum_steps": 4, "effective_batch": 32},
    "larger_batch": {"batch_size": 64, "old_batch_size": 16},
    "larger_batch_infer": {"batch_size": 8, "old_batch_size": 1},
    "dynamic_int8": {},
    "embedding_int8": {},
    "weight_only_int8": {},
    "weight_only_int4": {"group_size": 128},
    "weight_only_nf4": {},
    "sparsity_24": {"dtype": "float16"},
    "serving": {"seq_len": 4096, "kv_cache_gib": 0.5, "max_num_seqs": 64, "max_tokens": 256},
    "serve_vllm": {"model_id": "meta-llama/Llama-3.1-8B", "save_first": False,
                   "tokens_per_s": 1200.0, "tpot_s": 0.02, "dtype": "auto", "tp": 2,
                   "quantization": "awq", "kv_cache_dtype": "fp8", "max_num_seqs": 64,
                   "max_model_len": 640, "max_tokens": 128},
    "serve_vllm_server": {"model_id": "aiadvisor_serving", "save_first": True,
                          "tokens_per_s": 1200.0, "tpot_s": 0.02,
                          "flags": ["--tensor-parallel-size", "2", "--quantization", "fp8"]},
    "serve_sglang": {"model_id": "m", "save_first": False, "tokens_per_s": 1200.0,
                     "tpot_s": 0.02, "flags": ["--tp", "2", "--quantization", "fp8"]},
    "serve_tgi": {"model_id": "aiadvisor_serving", "save_first": True, "tokens_per_s": 1200.0,
                  "tpot_s": 0.02, "flags": ["--num-shard", "2", "--quantize", "eetq"]},
    "serve_tensorrt_llm": {"model_id": "m", "save_first": False, "tokens_per_s": 1200.0,
                           "tpot_s": 0.02, "tp": 2, "quant_algo": None, "kv_dtype": "auto",
                           "max_batch_size": 64, "max_tokens": 128},
    "generate_static_compiled": {"tokens_per_s": 50.0, "tpot_s": 0.02, "dtype": "bfloat16",
                                 "max_new_tokens": 128},
    "onnx_export": {},
    "distill_prune": {"prune_percent": 20, "amount": 0.2, "temperature": 2.0},
}

NAME_SETS = [
    CodeNames(),
    CodeNames(model="net", inputs="batch", optimizer="opt", call_style="star"),
    CodeNames(model="m2", inputs="features", optimizer="adam_opt", call_style="kwargs"),
]


def _names_in(code: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}


def test_every_snippet_has_example_values():
    assert set(EXAMPLE_VALUES) == set(SNIPPETS)


@pytest.mark.parametrize("names", NAME_SETS, ids=lambda n: n.call_style)
@pytest.mark.parametrize("snippet_id", sorted(SNIPPETS))
def test_every_snippet_parses_and_uses_the_users_names(snippet_id, names):
    code = snippet(snippet_id, names=names, **EXAMPLE_VALUES[snippet_id])
    tree = ast.parse(code)
    assert "$" not in code  # no placeholder left
    used = _names_in(code)
    if snippet_id not in ("tf32", "dataloader", "larger_batch"):
        assert names.model in used, snippet_id
    # The default names never leak into code rendered for other names.
    if names.model != "model":
        assert "model" not in used
    assert tree.body  # not empty


@pytest.mark.parametrize(
    "bad", ["model; import os", "class", "1x", "a b", "", "x\nimport os", "nöt ok()", None, 3]
)
def test_names_must_be_identifiers(bad):
    with pytest.raises(InvalidArgumentError, match="Python variable name"):
        CodeNames(model=bad)


def test_identifier_error_names_the_parameter_and_value():
    with pytest.raises(AIAdvisorError, match=r"inputs_name='x y'"):
        CodeNames(inputs="x y")


@pytest.mark.parametrize(
    "value",
    ['H100"; import os; os.system("echo pwned") #', "a\nimport os\n", "'''", '\\"\n)', "\x00\r\t"],
)
def test_hostile_string_values_become_one_literal(value):
    code = render("name = $v_name\n", names=CodeNames(), values={"name": value})
    tree = ast.parse(code)
    assert len(tree.body) == 1
    assign = tree.body[0]
    assert isinstance(assign, ast.Assign) and isinstance(assign.value, ast.Constant)
    assert assign.value.value == value


def test_hostile_value_in_a_comment_stays_in_the_comment():
    # repr() escapes newlines, so a value placed in a comment cannot start a new line.
    code = render("# device: $v_name\nx = 1\n", names=CodeNames(), values={"name": "a\nimport os"})
    assert len(code.splitlines()) == 2
    assert [type(n).__name__ for n in ast.parse(code).body] == ["Assign"]


def test_literal_refuses_objects_and_non_finite_numbers():
    with pytest.raises(InvalidArgumentError, match="cannot go into generated code"):
        literal(object())
    with pytest.raises(InvalidArgumentError, match="finite"):
        literal(float("nan"))
    assert literal((1,)) == "(1,)"
    assert literal([1.5, "a", None, True]) == "[1.5, 'a', None, True]"


def test_missing_value_is_reported():
    with pytest.raises(AIAdvisorError, match="placeholder"):
        render("x = $v_missing\n", names=CodeNames())


def test_unknown_snippet_suggests_a_name():
    with pytest.raises(InvalidArgumentError, match="Did you mean 'tf32'"):
        snippet("tf23", names=CodeNames())


def test_call_styles():
    assert CodeNames(model="net", inputs="b").call == "net(b)"
    assert CodeNames(model="net", inputs="b", call_style="star").call == "net(*b)"
    assert CodeNames(model="net", inputs="b", call_style="kwargs").call == "net(**b)"
    with pytest.raises(InvalidArgumentError, match="call_style"):
        CodeNames(call_style="other")
