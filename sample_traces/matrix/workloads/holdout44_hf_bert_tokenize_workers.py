"""holdout44_hf_bert_tokenize_workers: a transformers BERT classifier fed raw text tokenized per sample by a fast
(Rust) WordPiece tokenizer in DataLoader(num_workers=0) -> 4 workers.

Forty-fourth held-out set (pre-registered 2026-12-04 before it was recorded; see holdout44_hf_llama_generate_static).
The tokenizer is the `tokenizers` library's (the one transformers' fast tokenizers wrap), built in memory: a
WordPiece model over 3,000 made-up stems and 200 "##" suffixes, BERT's normaliser (lower case, accents) and
pre-tokenizer, [CLS] ... [SEP], truncated and padded to 256 tokens. Each sample is a 1,500-word document (half the
words a stem and a suffix, capitals and punctuation), tokenized whole in the Dataset's __getitem__ and then
truncated, the way an on-the-fly text dataset does it. Model: transformers' BertForSequenceClassification built from
a config (4 x 384, 6 heads, FFN 1536, 4 labels, SDPA), bf16 autocast, fused AdamW, batch 64 x 256.
before: DataLoader(num_workers=0): the tokenizing runs on the training loop's thread.
after:  DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4), non_blocking copies.
"""

import os
import random

import torch

from ._util import Step, autocast, is_cuda

NAME = "holdout44_hf_bert_tokenize_workers"
EXPECTED_KIND = "host_bound"
ROLE = "pair"
VARIANTS = ("before", "after")
FIX = "DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, prefetch_factor=4)"
SIZE = {"layers": 4, "width": 384, "heads": 6, "ffn": 1536, "batch": 64, "seq": 256, "words": 1500, "docs": 512}
DESCRIPTION = {
    "before": "transformers BertForSequenceClassification (4 x 384, from a config), bf16 autocast, batch 64 x 256, "
              "each 1,500-word document tokenized by a fast WordPiece tokenizer in __getitem__, "
              "DataLoader(num_workers=0)",
    "after": "same tokenizing in DataLoader(num_workers=4, persistent_workers=True, pin_memory=True, "
             "prefetch_factor=4)",
}
WARMUP_STEPS = 12


def _corpus(docs, words):
    """(WordPiece vocabulary, documents): made-up stems and suffixes, fixed by the seed."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    stems = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(3, 7))) for _ in range(3000)})
    suffixes = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(1, 3))) for _ in range(200)})
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", ",", "."] + stems
                                        + [f"##{x}" for x in suffixes])}
    out = []
    for _ in range(docs):
        ws = []
        for j in range(words):
            w = rng.choice(stems) + (rng.choice(suffixes) if rng.random() < 0.5 else "")
            ws.append(w.capitalize() if rng.random() < 0.1 else w)
            if j % 11 == 10:
                ws.append(rng.choice(",."))
        out.append(" ".join(ws))
    return vocab, out


def _tokenizer(vocab, seq):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.enable_truncation(seq)
    tok.enable_padding(length=seq, pad_id=0, pad_token="[PAD]")
    return tok


class Texts(torch.utils.data.Dataset):
    def __init__(self, docs, tok):
        self.docs, self.tok = docs, tok

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        enc = self.tok.encode(self.docs[i % len(self.docs)])
        return torch.tensor(enc.ids), torch.tensor(enc.attention_mask), i % 4


def make(variant, device):
    from transformers import BertConfig, BertForSequenceClassification

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")    # (one encode per sample: nothing to parallelise)
    cuda = is_cuda(device)
    s = SIZE if cuda else {**SIZE, "layers": 1, "width": 32, "heads": 2, "ffn": 64, "batch": 2, "seq": 32,
                           "words": 40, "docs": 8}
    vocab, docs = _corpus(s["docs"], s["words"])
    tok = _tokenizer(vocab, s["seq"])
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=s["width"], num_hidden_layers=s["layers"],
                     num_attention_heads=s["heads"], intermediate_size=s["ffn"], max_position_embeddings=s["seq"],
                     num_labels=4, attn_implementation="sdpa")
    model = BertForSequenceClassification(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if cuda else None)
    workers = (4 if cuda else 1) if variant == "after" else 0
    kw = dict(num_workers=workers, persistent_workers=True, pin_memory=cuda, prefetch_factor=4) if workers else {}
    loader = torch.utils.data.DataLoader(Texts(docs, tok), batch_size=s["batch"], shuffle=False, **kw)
    st = {"it": iter(loader)}

    def step():
        ids, mask, y = next(st["it"])
        ids, mask, y = (t.to(device, non_blocking=True) for t in (ids, mask, y))
        opt.zero_grad(set_to_none=True)
        with autocast(device):
            loss = model(input_ids=ids, attention_mask=mask, labels=y).loss
        loss.backward()
        opt.step()

    def close():
        st.clear()
    return Step(step, close=close, info={**s, "num_workers": workers, "vocab": len(vocab)})
