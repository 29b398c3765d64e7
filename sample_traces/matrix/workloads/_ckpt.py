"""Shared by the fifty-second held-out set: activation checkpointing, as users switch it on (per layer, or per segment
of a Sequential), on a model whose activations fit without it."""

from torch.utils.checkpoint import checkpoint

from .holdout48_per_seq_loss_train import Tagger


class CkptTagger(Tagger):
    """holdout48's tagger whose encoder layers each run under torch.utils.checkpoint.checkpoint (use_reentrant=False,
    as Hugging Face's gradient_checkpointing_enable() and the PyTorch docs now advise) when `ckpt` is set."""

    def __init__(self, vocab, dim, heads, layers, seq, ckpt):
        super().__init__(vocab, dim, heads, layers, seq)
        self.ckpt = ckpt

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos
        for layer in self.body.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        return self.head(x)
