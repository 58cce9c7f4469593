# ===- test_hf_dropin.py - moe_mlir.hf on small transformers models -------=== #
#
# Part of the moe-mlir project.
#
# ===----------------------------------------------------------------------=== #
"""moe_mlir.hf.patch_moe_blocks on small models built from their configs
with random weights (needs torch and transformers 5.x; skipped without
them): Qwen3-MoE, Mixtral, gpt-oss and DeepSeek-V3, f32, with the CPU
backend (the CPU JIT of the same layer): greedy generate() gives the same
tokens as the eager model and the logits agree; the layer reads the
model's own parameters (the very tensors, no copies); unpatching restores
the blocks. The GPU backend (compile_cached + torch_op) is the device
checks'."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from moe_mlir import hf  # noqa: E402
from moe_mlir_runtime import hf as rt_hf  # noqa: E402


def _configs():
    T = transformers
    small = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
    return {
        "qwen3-moe": lambda: T.Qwen3MoeConfig(
            **small,
            intermediate_size=128,
            moe_intermediate_size=32,
            num_key_value_heads=2,
            num_experts=8,
            num_experts_per_tok=2,
            head_dim=16,
        ),
        "mixtral": lambda: T.MixtralConfig(
            **small,
            intermediate_size=32,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
        ),
        "gpt-oss": lambda: T.GptOssConfig(
            **small,
            intermediate_size=32,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            head_dim=16,
            layer_types=["full_attention", "full_attention"],
        ),
        "deepseek-v3": lambda: T.DeepseekV3Config(
            **small,
            intermediate_size=64,
            moe_intermediate_size=32,
            num_key_value_heads=4,
            n_routed_experts=8,
            num_experts_per_tok=2,
            n_group=2,
            topk_group=1,
            first_k_dense_replace=0,
            q_lora_rank=16,
            kv_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=16,
            n_shared_experts=1,
        ),
    }


@pytest.mark.parametrize("family", ["qwen3-moe", "mixtral", "gpt-oss", "deepseek-v3"])
def test_generate_matches_eager(family):
    torch.manual_seed(0)
    cfg = _configs()[family]()
    cfg._experts_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "experts" in n or "gate" in n or "router" in n:
                p.normal_(0, 0.5 if "bias" in n else 0.1)
    ids = torch.randint(0, cfg.vocab_size, (2, 6))
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=8, do_sample=False)
        want_logits = model(ids).logits
        names = hf.patch_moe_blocks(model, backend="cpu")
        assert len(names) == 2
        got = model.generate(ids, max_new_tokens=8, do_sample=False)
        got_logits = model(ids).logits
    assert torch.equal(got, want)
    err = float((got_logits - want_logits).abs().max() / want_logits.abs().max())
    assert err < 1e-5, err
    # The operands are the model's own tensors.
    block = model.get_submodule(names[0])
    hf.moe_config_of(block)  # the block maps to a preset
    ops = rt_hf.operands(block)
    assert ops[0] is block.experts.gate_up_proj and ops[1] is block.experts.down_proj
    assert sorted(hf.unpatch_moe_blocks(model)) == sorted(names)
    assert not hasattr(block, "_moe_mlir_forward")


def test_unsupported_block():
    with pytest.raises(TypeError, match="not a supported MoE block"):
        hf.moe_config_of(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="backend"):
        hf.patch_moe_blocks(torch.nn.Linear(2, 2), backend="tpu")


def test_prebuilt_cache_without_the_compiler(tmp_path, monkeypatch):
    """prebuild fills a cache folder (CUDA libraries + the signature table)
    here; moe_mlir_runtime.hf.patch_prebuilt finds each block's library by
    its signature alone. (Loading CUDA libraries needs a GPU: here load and
    torch_op are stand-ins that run the signature's CPU layer.)"""
    from helpers import gpu_toolchain_or_skip

    gpu_toolchain_or_skip()
    import moe_mlir_runtime as rt
    from moe_mlir_runtime import artifact, torch_ops

    torch.manual_seed(1)
    cfg = _configs()["qwen3-moe"]()
    cfg._experts_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with pytest.raises(rt.ManifestError, match="no prebuilt library"):
        rt.hf.patch_prebuilt(model, str(tmp_path))
    sigs = hf.prebuild(model, str(tmp_path))
    assert len(sigs) == 1 and sigs[0]["block"] == "Qwen3MoeSparseMoeBlock"
    table = rt.hf.read_table(str(tmp_path))
    library = rt.find_cached(table[rt.hf.signature_text(sigs[0])], str(tmp_path))
    assert library and rt.load_manifest(library).functions["ffn"]
    by_library = {library: sigs[0]}
    monkeypatch.setattr(artifact, "load", lambda path: path)
    monkeypatch.setattr(torch_ops, "torch_op", lambda path, fn: hf._cpu_layer(by_library[path]))
    ids = torch.randint(0, cfg.vocab_size, (1, 5))
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=6, do_sample=False)
        assert len(rt.hf.patch_prebuilt(model, str(tmp_path))) == 2
        got = model.generate(ids, max_new_tokens=6, do_sample=False)
    assert torch.equal(got, want)
