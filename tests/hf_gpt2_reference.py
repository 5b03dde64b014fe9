#!/usr/bin/env python3
"""An independent check that shardlab's Hugging Face GPT-2 directories follow transformers'
conventions (numpy only; tests/hf_convert.sh runs it).

  hf_gpt2_reference.py make DIR                               a random GPT-2 to import
  hf_gpt2_reference.py check DIR GENERATE CKPT [--break-transpose]

`make` writes config.json and model.safetensors of a GPT2LMHeadModel with random weights
large enough that every logit stands apart (a trained toy model's greedy tokens hardly
depend on some weights), and a seed whose greedy continuation has no byte 0 or newline
(generate prints bytes). `check` reads DIR/config.json and DIR/model.safetensors by itself and runs
GPT2LMHeadModel's forward as transformers defines it: Conv1D weights [in, out] (y = x W + b),
c_attn's columns q | k | v, GELU's tanh form, the head tied to transformer.wte.weight.
It asks `GENERATE --ckpt CKPT` (shardlab, on the checkpoint imported back from DIR) for
greedy tokens after a prompt, and checks that each is the reference's argmax (or within
1e-4 of its largest logit, for near ties). --break-transpose multiplies attn.c_proj by its
transpose, as a converter that forgot Conv1D's layout would: the check must then fail.
Exits 0 on agreement, 1 otherwise, 77 when numpy is missing."""
import json, os, struct, subprocess, sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

PROMPT, MAX_NEW = b"12+34=", 8
break_transpose = "--break-transpose" in sys.argv


def read(directory):
    config = json.load(open(f"{directory}/config.json"))
    raw = open(f"{directory}/model.safetensors", "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    weights = {name: np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                                   dtype={"F32": "<f4"}[e["dtype"]]).reshape(e["shape"]).astype(np.float64)
               for name, e in header.items()}
    return config, weights


def write(directory, config, weights):
    os.makedirs(directory, exist_ok=True)
    json.dump(config, open(f"{directory}/config.json", "w"), indent=2)
    header, offset = {}, 0
    for name, w in weights.items():
        header[name] = {"dtype": "F32", "shape": list(w.shape), "data_offsets": [offset, offset + 4 * w.size]}
        offset += 4 * w.size
    text = json.dumps(header).encode()
    with open(f"{directory}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for w in weights.values():
            f.write(w.astype("<f4").tobytes())


def random_gpt2(seed, V=256, T=32, D=32, N=4, L=2):
    rng = np.random.default_rng(seed)
    r = lambda *shape: rng.normal(0.0, 0.3, shape)
    w = {"transformer.wte.weight": r(V, D), "transformer.wpe.weight": r(T, D)}
    for l in range(L):
        p = f"transformer.h.{l}."
        w.update({p + "ln_1.weight": 1 + r(D), p + "ln_1.bias": r(D), p + "attn.c_attn.weight": r(D, 3 * D),
                  p + "attn.c_attn.bias": r(3 * D), p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
                  p + "ln_2.weight": 1 + r(D), p + "ln_2.bias": r(D), p + "mlp.c_fc.weight": r(D, 4 * D),
                  p + "mlp.c_fc.bias": r(4 * D), p + "mlp.c_proj.weight": r(4 * D, D), p + "mlp.c_proj.bias": r(D)})
    w.update({"transformer.ln_f.weight": 1 + r(D), "transformer.ln_f.bias": r(D)})
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": T,
              "n_embd": D, "n_layer": L, "n_head": N, "n_inner": 4 * D, "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-05, "tie_word_embeddings": True}
    return config, {k: v.astype(np.float32).astype(np.float64) for k, v in w.items()}


def layer_norm(x, p, W, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]


def conv1d(x, p, W, flip=False):  # transformers' Conv1D: weight [in, out]
    w = W[p + ".weight"]
    return x @ (w.T if flip else w) + W[p + ".bias"]


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def logits(config, W, tokens):
    D, N, L, eps = config["n_embd"], config["n_head"], config["n_layer"], config["layer_norm_epsilon"]
    H, T = D // N, len(tokens)
    h = W["transformer.wte.weight"][tokens] + W["transformer.wpe.weight"][:T]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = f"transformer.h.{l}."
        q, k, v = np.split(conv1d(layer_norm(h, p + "ln_1", W, eps), p + "attn.c_attn", W), 3, axis=-1)
        q, k, v = (a.reshape(T, N, H).transpose(1, 0, 2) for a in (q, k, v))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(H) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, D)
        h = h + conv1d(y, p + "attn.c_proj", W, flip=break_transpose)
        m = gelu_new(conv1d(layer_norm(h, p + "ln_2", W, eps), p + "mlp.c_fc", W))
        h = h + conv1d(m, p + "mlp.c_proj", W)
    h = layer_norm(h, "transformer.ln_f", W, eps)
    head = W.get("lm_head.weight", W["transformer.wte.weight"])  # tied
    return h @ head.T


def greedy(config, W):
    tokens = list(PROMPT)
    while len(tokens) < len(PROMPT) + MAX_NEW:
        tokens.append(int(logits(config, W, tokens)[-1].argmax()))
    return tokens


def check(directory, generate, ckpt):
    config, W = read(directory)
    out = subprocess.run([generate, "--ckpt", ckpt, "--prompt", PROMPT.decode(), "--max-new", str(MAX_NEW)],
                         capture_output=True, check=True).stdout
    assert out.startswith(PROMPT) and out.endswith(b"\n"), out
    tokens = list(out[:-1])
    ok = len(tokens) == len(PROMPT) + MAX_NEW
    for t in range(len(PROMPT), len(tokens)):
        z = logits(config, W, tokens[:t])[-1]
        best = int(z.argmax())
        if z[tokens[t]] < z[best] - 1e-4:
            print(f"token {t}: shardlab chose {tokens[t]} (logit {z[tokens[t]]:.6f}), "
                  f"the reference {best} (logit {z[best]:.6f})")
            ok = False
    print(("agree" if ok else "DISAGREE") + f": {len(tokens) - len(PROMPT)} greedy tokens after {PROMPT!r}: {out[:-1]!r}")
    return ok


if sys.argv[1] == "make":
    seed = next(s for s in range(100) if not {0, 10} & set(greedy(*random_gpt2(s))[len(PROMPT):]))
    write(sys.argv[2], *random_gpt2(seed))
    sys.exit(0)
sys.exit(0 if check(*sys.argv[2:5]) else 1)
