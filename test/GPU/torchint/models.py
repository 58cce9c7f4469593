"""The small Hugging Face models of the PyTorch-integration check (built
from their configs, random weights with a fixed seed), shared by
build_torchint.py (here) and torchint_check.py (on the GPU)."""

FAMILIES = ("qwen3-moe", "mixtral", "gpt-oss", "deepseek-v3")


def config(family, size="small"):
    import transformers as T

    wide = size == "decode"  # a larger model for the decode-speed timing
    H = 1024 if wide else 128
    layers = 4 if wide else 2
    base = dict(vocab_size=1024, hidden_size=H, num_hidden_layers=layers, num_attention_heads=8)
    if family == "qwen3-moe":
        cfg = T.Qwen3MoeConfig(
            **base,
            intermediate_size=2 * H,
            moe_intermediate_size=H // 2,
            num_key_value_heads=4,
            num_experts=64 if wide else 16,
            num_experts_per_tok=8 if wide else 4,
            head_dim=H // 8,
        )
    elif family == "mixtral":
        cfg = T.MixtralConfig(
            **base,
            intermediate_size=H,
            num_key_value_heads=4,
            num_local_experts=8,
            num_experts_per_tok=2,
        )
    elif family == "gpt-oss":
        cfg = T.GptOssConfig(
            **base,
            intermediate_size=H,
            num_key_value_heads=4,
            num_local_experts=16,
            num_experts_per_tok=4,
            head_dim=H // 8,
            layer_types=["full_attention"] * layers,
        )
    elif family == "deepseek-v3":
        cfg = T.DeepseekV3Config(
            **base,
            intermediate_size=2 * H,
            moe_intermediate_size=H // 2,
            num_key_value_heads=8,
            n_routed_experts=16,
            num_experts_per_tok=4,
            n_group=4,
            topk_group=2,
            first_k_dense_replace=0,
            q_lora_rank=64,
            kv_lora_rank=64,
            qk_rope_head_dim=16,
            qk_nope_head_dim=16,
            v_head_dim=32,
            n_shared_experts=1,
        )
    else:
        raise KeyError(family)
    cfg._experts_implementation = "eager"
    return cfg


def build(family, dtype, device, size="small", seed=0):
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config(family, size))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "experts" in n or "gate" in n or "router" in n:
                p.normal_(0, 0.5 if "bias" in n else 0.05)
    return model.to(device=device, dtype=dtype).eval()


def moe_blocks(model):
    """The sparse-MoE blocks of `model` (those moe_mlir_runtime.hf patches)."""
    names = ("MixtralSparseMoeBlock", "Qwen3MoeSparseMoeBlock", "GptOssMLP", "DeepseekV3MoE")
    return [m for m in model.modules() if type(m).__name__ in names]


def choice_scores(family, block, x):
    """The scores the block's router ranks for its top-k (f32, [tokens, E])
    of the block input `x`: softmax of the logits (Qwen3-MoE, Mixtral), the
    logits (gpt-oss: top-k first), sigmoid + correction bias (DeepSeek-V3,
    its group-limited selection aside)."""
    import torch
    import torch.nn.functional as F

    x = x.reshape(-1, x.shape[-1])
    if family == "gpt-oss":
        return F.linear(x, block.router.weight, block.router.bias).float()
    if family == "deepseek-v3":
        lg = F.linear(x.float(), block.gate.weight.float())
        return torch.sigmoid(lg) + block.gate.e_score_correction_bias.float()
    return torch.softmax(F.linear(x, block.gate.weight).float(), dim=-1)


def choices(family, block, x, k):
    """(sorted expert ids [tokens, k], tie [tokens]) the block's router
    picks for `x` as the family's routing defines it (DeepSeek-V3: among
    its top groups), tie where an exact tie decides a pick (a group or an
    expert at the boundary)."""
    import torch

    sc = choice_scores(family, block, x)
    tie = torch.zeros(sc.shape[0], dtype=torch.bool, device=sc.device)
    if family == "deepseek-v3":
        g = block.gate
        E = sc.shape[-1]
        grouped = sc.view(-1, g.num_group, E // g.num_group)
        gs = grouped.topk(2, dim=-1).values.sum(dim=-1)
        top = gs.sort(dim=-1, descending=True).values
        if g.topk_group < g.num_group:
            tie |= top[:, g.topk_group - 1] == top[:, g.topk_group]
        keep = torch.zeros_like(gs).scatter_(1, gs.topk(g.topk_group, dim=-1).indices, 1.0)
        mask = keep.unsqueeze(-1).expand_as(grouped).reshape(-1, E)
        sc = sc.masked_fill(mask == 0, float("-inf"))
    top = sc.sort(dim=-1, descending=True).values
    tie |= top[:, k - 1] == top[:, k]
    return sc.topk(k, dim=-1).indices.sort(dim=-1).values, tie
