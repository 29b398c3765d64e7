"""holdout44_hf_qwen2_generate_static: Hugging Face generate() of a grouped-query-attention model on a batch of 16,
eager with its dynamic KV cache -> the static cache, which generate() compiles the forward for (mode="reduce-overhead").

Forty-fourth held-out set (pre-registered 2026-12-04 before it was recorded; see holdout44_hf_llama_generate_static,
whose generate() step this shares). Model: transformers' Qwen2ForCausalLM built from a config (no weights): 6 layers,
width 768, 12 query heads over 2 key/value heads, MLP 2048, vocabulary 16384, SDPA, bf16 weights, eval,
inference_mode; batch 16, a 64-token prompt, 16 new tokens, greedy (every call decodes all 16).
before: generate() with the default dynamic cache, eager.
after:  generate(cache_implementation="static"): on a GPU generate() compiles the forward itself (Inductor,
        mode="reduce-overhead": each token's forward a CUDA graph).
"""

from ._util import is_cuda
from .holdout44_hf_llama_generate_static import make_generate

NAME = "holdout44_hf_qwen2_generate_static"
EXPECTED_KIND = "launch_overhead"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = 'generate(cache_implementation="static"): generate() compiles the forward in mode="reduce-overhead" (CUDA graphs)'
SIZE = {"layers": 6, "width": 768, "heads": 12, "kv_heads": 2, "mlp": 2048, "vocab": 16384, "batch": 16, "prompt": 64,
        "new": 16}
DESCRIPTION = {
    "before": "transformers Qwen2ForCausalLM (6 x 768, GQA 12/2, from a config, bf16) generate(), batch 16, prompt 64, "
              "16 new tokens greedy, dynamic cache, eager",
    "after": 'same, cache_implementation="static" (generate() compiles the forward, mode="reduce-overhead")',
}
WARMUP_STEPS = 8


def make(variant, device):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    s = SIZE if is_cuda(device) else {**SIZE, "layers": 1, "width": 32, "heads": 4, "kv_heads": 2, "mlp": 64,
                                      "vocab": 128, "batch": 2, "prompt": 8, "new": 4}
    return make_generate(Qwen2ForCausalLM, Qwen2Config, s, variant, device)
