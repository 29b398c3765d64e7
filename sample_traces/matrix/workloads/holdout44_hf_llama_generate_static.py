"""holdout44_hf_llama_generate_static: Hugging Face generate() run eagerly with its dynamic KV cache -> the static
cache, which generate() compiles the forward for itself (mode="reduce-overhead": CUDA graphs), as transformers
documents it.

Forty-fourth held-out set (pre-registered 2026-12-04 before it was recorded): the library's own generation loop,
which the matrix had only as hand-written decode loops (holdout30_*). One step is one generate() call.
Model: transformers' LlamaForCausalLM built from a config (no weights downloaded): 4 layers, width 512, 8 heads,
MLP 1408, vocabulary 8192, SDPA, bf16 weights, eval, inference_mode; batch 1, a 32-token prompt, 16 new tokens,
greedy (min_new_tokens = max_new_tokens, so every call decodes all 16: the model is random). generate() asks
whether every sequence has finished after each token (a device sync per token) in both variants.
before: generate() with the default dynamic cache, eager.
after:  generate(cache_implementation="static"). On a GPU generate() then compiles the model's forward itself
        (transformers 5.17's default CompileConfig: Inductor, mode="reduce-overhead", so each token's forward is
        replayed as a CUDA graph); the prefill, generate's own Python, its logits processors and the per-token
        check stay eager. (Compiling model.forward by hand in mode="reduce-overhead" instead failed the two-step
        check before registering: generate() read a CUDA-graph output that the next replay had overwritten.)
"""

import torch

from ._util import Step, cpu_mode, is_cuda

NAME = "holdout44_hf_llama_generate_static"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'generate(cache_implementation="static"): generate() compiles the forward in mode="reduce-overhead" (CUDA graphs)'
SIZE = {"layers": 4, "width": 512, "heads": 8, "kv_heads": 8, "mlp": 1408, "vocab": 8192, "batch": 1, "prompt": 32,
        "new": 16}
DESCRIPTION = {
    "before": "transformers LlamaForCausalLM (4 x 512, from a config, bf16) generate(), batch 1, prompt 32, 16 new "
              "tokens greedy, dynamic cache, eager",
    "after": 'same, cache_implementation="static" (generate() compiles the forward, mode="reduce-overhead")',
}
WARMUP_STEPS = 8      # (after compiles and records its graphs in the first of them)


def make_generate(model_cls, cfg_cls, s, variant, device, **cfg_extra):
    """The generate() step shared by the set's two generation workloads."""
    cuda = is_cuda(device)
    static = variant == "after"
    compiled = static and cuda and not cpu_mode()
    if compiled:
        torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = cfg_cls(num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
                  num_key_value_heads=s["kv_heads"], intermediate_size=s["mlp"], vocab_size=s["vocab"],
                  max_position_embeddings=512, attn_implementation="sdpa", **cfg_extra)
    model = model_cls(cfg).to(device=device, dtype=torch.bfloat16).eval()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(2, s["vocab"], (s["batch"], s["prompt"]), generator=g).to(device) for _ in range(2)]
    mask = torch.ones(s["batch"], s["prompt"], dtype=torch.long, device=device)
    kw = dict(max_new_tokens=s["new"], min_new_tokens=s["new"], do_sample=False, pad_token_id=0, eos_token_id=1)
    if static:
        kw["cache_implementation"] = "static"
    if not compiled:
        kw["disable_compile"] = True    # (generate compiles a static cache's forward itself, on a GPU)
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        with torch.inference_mode():
            out = model.generate(input_ids=prompts[i % 2], attention_mask=mask, **kw)
        if i == 2:
            from torch._dynamo.utils import counters
            done.info.update(generated=list(out.shape), dynamo_graphs=int(counters["stats"]["unique_graphs"]))

    def close():
        if compiled:
            torch._dynamo.reset()
    done = Step(step, close=close, info={**s, "static_cache": static, "generate_compiles": compiled})
    return done


def make(variant, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SIZE if is_cuda(device) else {**SIZE, "layers": 1, "width": 32, "heads": 2, "kv_heads": 2, "mlp": 64,
                                      "vocab": 128, "prompt": 8, "new": 4}
    return make_generate(LlamaForCausalLM, LlamaConfig, s, variant, device)
