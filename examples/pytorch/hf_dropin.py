#!/usr/bin/env python3
"""A Hugging Face MoE model with its MoE blocks replaced by the compiled
moe-mlir layer (docs/PyTorch.md). Needs torch, transformers 5.x and the
moe_mlir package; on a CUDA machine (with the CUDA toolkit for compiling)
the layer runs as a torch custom op on the GPU, elsewhere on the CPU JIT.

  python3 examples/pytorch/hf_dropin.py [--device cpu|cuda] [--cache DIR]
"""

import argparse

import torch
import transformers

from moe_mlir.hf import patch_moe_blocks, unpatch_moe_blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument(
        "--cache", default=None, help="compile cache folder (default: ~/.cache/moe_mlir)"
    )
    args = ap.parse_args()

    # A small Qwen3-MoE built from its config (a checkpoint works the same:
    # AutoModelForCausalLM.from_pretrained(...)).
    config = transformers.Qwen3MoeConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=16,
        num_experts_per_tok=4,
    )
    config._experts_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(args.device).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 8), device=args.device)

    with torch.no_grad():
        eager = model.generate(prompt, max_new_tokens=12, do_sample=False)
        # Every MoE block now runs the compiled layer on the model's own
        # parameters (compiled once per block configuration, then cached).
        backend = "cuda" if args.device.startswith("cuda") else "cpu"
        patched = patch_moe_blocks(model, backend=backend, cache_dir=args.cache)
        ours = model.generate(prompt, max_new_tokens=12, do_sample=False)
        unpatch_moe_blocks(model)

    print("patched blocks:", ", ".join(patched))
    print("same tokens as the eager model:", bool(torch.equal(ours, eager)))
    return 0 if torch.equal(ours, eager) else 1


if __name__ == "__main__":
    raise SystemExit(main())
