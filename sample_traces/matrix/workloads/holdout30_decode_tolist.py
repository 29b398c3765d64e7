"""holdout30_decode_tolist: greedy decoding of a larger model that reads each new token to a Python list.

Thirtieth held-out set (pre-registered 2026-11-29 before it was recorded): the generation loop of
holdout30_decode_eos_check (prefill, then one forward a token over a static KV cache) on a model whose per-token
GPU work is of the order of its per-token launches, collecting the output the way many serving loops do:
``generated.append(nxt.tolist())`` after every token (a small device-to-host copy and a sync per token), the
sequences joined at the end of the step.
Model: token embedding (vocab 32000) + 6 pre-norm layers (d 3072, 24 heads, MLP 12288, GELU) + head, bf16 weights
(1.5 GB read per token); batch 16, prompt 64, 32 new tokens a step (one step = one generate call).
before: ``nxt.tolist()`` after every token (32 syncs a step).
after:  the tokens written into a GPU buffer as they are made (already in the per-token step), one ``tolist()``
        of the buffer at the end of the step.
after_graph: as after, with the per-token forward captured once in a CUDA graph and replayed per token; the
        prefill stays eager.
"""

from ._util import Step, is_cuda
from .holdout30_decode_eos_check import Generator

NAME = "holdout30_decode_tolist"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "keep the new tokens in a GPU buffer and read it once a step (after_graph: and graph the per-token forward)"
DESCRIPTION = {
    "before": ("greedy decode, 6-layer d3072 decoder (bf16, static KV cache), batch 16, prompt 64, 32 new tokens; "
               "each token read with .tolist() as it is made"),
    "after": "the same decode, the tokens kept on the GPU and read with one tolist() a step",
    "after_graph": "as after, with the per-token forward replayed as one CUDA graph",
}


def make(variant, device):
    cuda = is_cuda(device)
    dims = (32000, 3072, 6, 24, 16, 64, 32) if cuda else (64, 16, 1, 2, 2, 4, 8)
    gen = Generator(device, *dims)
    graphed = variant == "after_graph" and cuda
    token = gen.graphed() if graphed else gen.token
    st = {"i": 0, "n": 0}

    def before():
        st["i"] += 1
        gen.prefill(st["i"])
        generated = []
        for _ in range(gen.new):
            generated.append(token().tolist())
        st["n"] += len(list(zip(*generated)))

    def after():
        st["i"] += 1
        gen.prefill(st["i"])
        for _ in range(gen.new):
            token()
        st["n"] += len(gen.out.tolist())
    return Step(before if variant == "before" else after,
                info={"batch": dims[4], "new_tokens": dims[6], "cuda_graph": graphed})
