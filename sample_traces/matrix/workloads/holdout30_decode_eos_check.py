"""holdout30_decode_eos_check: greedy decoding with a KV cache that asks "all finished?" after every token.

Thirtieth held-out set (pre-registered 2026-11-29 before it was recorded): the generation loop of a small
decoder-only language model, the way a hand-written or Hugging Face-style greedy ``generate`` runs it: one
prefill forward over the prompt, then one forward per new token over a static KV cache (written at the token's
position with ``index_copy_``, attention over the whole cache with a position mask), and after each token
``if finished.all(): break`` (Tensor.__bool__: a device sync per token). The end-of-sequence id is one no token
has (the model is random), so every step decodes all its tokens and the work per step is fixed.
Model: token embedding (vocab 8192) + 4 pre-norm layers (d 512, 8 heads, MLP 2048, GELU) + head, bf16 weights;
batch 8, prompt 32, 48 new tokens a step (one step = one generate call).
before: the check after every token (48 syncs a step).
after:  the check every 16 tokens (3 syncs a step), everything else eager as before.
after_graph: the check every 16 tokens and the per-token forward (static token, position and cache buffers)
        captured once in a CUDA graph and replayed per token; the prefill stays eager.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._util import Step, capture_graph, is_cuda

NAME = "holdout30_decode_eos_check"
EXPECTED_KIND = "sync_stall"
ROLE = "pair"
VARIANTS = ("before", "after", "after_graph")
FIX = "check for end of sequence every 16 tokens (after_graph: and replay the per-token forward as a CUDA graph)"
DESCRIPTION = {
    "before": ("greedy decode, 4-layer d512 decoder (bf16, static KV cache), batch 8, prompt 32, 48 new tokens; "
               "`if finished.all(): break` after every token"),
    "after": "the same decode, the finished check every 16 tokens",
    "after_graph": "the finished check every 16 tokens and the per-token forward replayed as one CUDA graph",
}
EOS = -1            # no token has it: every step decodes all its tokens


class Layer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, kc, vc, pos, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        kc.index_copy_(2, pos, k)
        vc.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab, d, layers, heads, tmax):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("slots", torch.arange(tmax))

    def forward(self, tok, caches, pos):
        """Logits of the last position; `tok` (B, T) at positions `pos` (T,), written into the caches."""
        mask = self.slots[None, :] <= pos[:, None]
        x = self.emb(tok)
        for layer, (kc, vc) in zip(self.layers, caches):
            x = layer(x, kc, vc, pos, mask)
        return self.head(self.norm(x[:, -1]))


class Generator:
    """A decoder, its static KV cache and token buffers; `token()` decodes one token on the buffers only (so it
    can be captured), `prefill(prompt)` starts a sequence, `out` holds the tokens generated so far."""

    def __init__(self, device, vocab, d, layers, heads, batch, prompt, new):
        cuda = is_cuda(device)
        dt = torch.bfloat16 if cuda else torch.float32
        tmax, dh = prompt + new, d // heads
        torch.manual_seed(0)
        self.model = Decoder(vocab, d, layers, heads, tmax).to(device=device, dtype=dt).eval()
        self.caches = [(torch.zeros(batch, heads, tmax, dh, device=device, dtype=dt),
                        torch.zeros(batch, heads, tmax, dh, device=device, dtype=dt)) for _ in range(layers)]
        self.prompts = [torch.randint(1, vocab, (batch, prompt), device=device) for _ in range(4)]
        self.ppos = torch.arange(prompt, device=device)
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.out = torch.zeros(batch, new, dtype=torch.long, device=device)
        self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.prompt, self.new = prompt, new

    @torch.no_grad()
    def prefill(self, i):
        logits = self.model(self.prompts[i % len(self.prompts)], self.caches, self.ppos)
        self.tok.copy_(logits.argmax(-1, keepdim=True))
        self.pos.fill_(self.prompt)
        self.finished.zero_()

    @torch.no_grad()
    def token(self):
        nxt = self.model(self.tok, self.caches, self.pos).argmax(-1)
        self.finished.logical_or_(nxt == EOS)
        self.out.index_copy_(1, self.pos - self.prompt, nxt[:, None])
        self.tok.copy_(nxt[:, None])
        self.pos.add_(1)
        return nxt

    def graphed(self):
        """The per-token forward captured once; returns replay()."""
        self.prefill(0)         # the warm-up tokens' positions must lie inside the cache
        g = capture_graph(self.token, warmup=3)
        return g.replay


def make(variant, device):
    cuda = is_cuda(device)
    dims = (8192, 512, 4, 8, 8, 32, 48) if cuda else (64, 16, 1, 2, 2, 4, 8)
    gen = Generator(device, *dims)
    every = 1 if variant == "before" else 16
    graphed = variant == "after_graph" and cuda
    token = gen.graphed() if graphed else gen.token
    st = {"i": 0}

    def step():
        i = st["i"] = st["i"] + 1
        gen.prefill(i)
        for t in range(gen.new):
            token()
            if (t + 1) % every == 0 and gen.finished.all():
                break
    return Step(step, info={"batch": dims[4], "new_tokens": dims[6], "check_every": every, "cuda_graph": graphed})
