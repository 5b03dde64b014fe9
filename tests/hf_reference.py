#!/usr/bin/env python3
"""An independent check that shardlab's Hugging Face directories follow transformers'
conventions, for GPT2LMHeadModel and LlamaForCausalLM (numpy only; tests/hf_convert.sh
runs it).

  hf_reference.py make gpt2|llama DIR              a random model to import
  hf_reference.py check DIR GENERATE CKPT [--and-broken]
  hf_reference.py index DIR                        a sharded export's files, as transformers writes them

`make` writes config.json and model.safetensors with random weights large enough that
every logit stands apart (a trained toy model's greedy tokens hardly depend on some
weights), from the first seed whose greedy continuation has no byte 0 or newline (generate
prints bytes). `check` reads DIR/config.json and DIR/model.safetensors (or the shards its
model.safetensors.index.json names) by itself and runs
the forward as transformers defines it -- GPT-2: Conv1D weights [in, out] (y = x W + b),
c_attn's columns q | k | v, GELU's tanh form, the head tied to transformer.wte.weight;
LLaMA: [out, in] projections, RMSNorm, RoPE by rotate_half (dim i with i + H/2), GQA, SwiGLU.
It asks `GENERATE --ckpt CKPT` (shardlab, on the checkpoint imported from or exported to
DIR) for greedy tokens after a prompt and checks that each is the reference's argmax (or
within 1e-4 of its largest logit, for near ties). --and-broken also computes what a
converter that forgot a convention would give -- GPT-2: attn.c_proj not transposed; LLaMA:
q and k not permuted between the RoPE pairings -- and requires that it disagrees.
Exits 0 on agreement, 1 otherwise, 77 when numpy is missing."""
import json, os, struct, subprocess, sys

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

PROMPT, MAX_NEW = b"12+34=", 8


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {name: np.frombuffer(raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                                dtype={"F32": "<f4"}[e["dtype"]]).reshape(e["shape"]).astype(np.float64)
            for name, e in header.items()}


def read(directory):
    """As transformers loads: model.safetensors, else the shards model.safetensors.index.json names."""
    config = json.load(open(f"{directory}/config.json"))
    if os.path.exists(f"{directory}/model.safetensors"):
        return config, read_safetensors(f"{directory}/model.safetensors")
    weight_map = json.load(open(f"{directory}/model.safetensors.index.json"))["weight_map"]
    weights = {}
    for shard in sorted(set(weight_map.values())):
        weights.update({k: v for k, v in read_safetensors(f"{directory}/{shard}").items() if weight_map.get(k) == shard})
    return config, weights


def check_index(directory):
    """The index and shards as transformers' save_pretrained writes them (json.dumps(index,
    indent=2, sort_keys=True) + newline; huggingface_hub's shard names; total_size the bytes
    of every tensor), and no model.safetensors beside them."""
    path = f"{directory}/model.safetensors.index.json"
    text = open(path).read()
    index = json.loads(text)
    ok = text == json.dumps(index, indent=2, sort_keys=True) + "\n" and set(index) == {"metadata", "weight_map"}
    shards = sorted(set(index["weight_map"].values()))
    ok &= shards == [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    total = 0
    for shard in shards:
        names = [k for k, v in index["weight_map"].items() if v == shard]
        tensors = read_safetensors(f"{directory}/{shard}")
        ok &= sorted(tensors) == sorted(names)
        total += sum(4 * t.size for t in tensors.values())
    ok &= index["metadata"] == {"total_size": total} and not os.path.exists(f"{directory}/model.safetensors")
    print(("index as transformers writes it" if ok else "BAD INDEX") + f": {len(shards)} shards, {total} bytes")
    return ok


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
    r = normal(seed)
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


def normal(seed):
    rng = np.random.default_rng(seed)
    return lambda *shape: rng.normal(0.0, 0.3, shape)


def random_llama(seed, V=256, T=32, D=32, N=4, K=2, F=64, L=2):
    r, H = normal(seed), D // N
    w = {"model.embed_tokens.weight": r(V, D), "model.norm.weight": 1 + r(D), "lm_head.weight": r(V, D)}
    for l in range(L):
        p = f"model.layers.{l}."
        w.update({p + "input_layernorm.weight": 1 + r(D), p + "self_attn.q_proj.weight": r(N * H, D),
                  p + "self_attn.k_proj.weight": r(K * H, D), p + "self_attn.v_proj.weight": r(K * H, D),
                  p + "self_attn.o_proj.weight": r(D, N * H), p + "post_attention_layernorm.weight": 1 + r(D),
                  p + "mlp.gate_proj.weight": r(F, D), p + "mlp.up_proj.weight": r(F, D),
                  p + "mlp.down_proj.weight": r(D, F)})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
              "max_position_embeddings": T, "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
              "num_attention_heads": N, "num_key_value_heads": K, "hidden_act": "silu", "rms_norm_eps": 1e-05,
              "rope_theta": 10000.0, "tie_word_embeddings": False}
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


def attention(q, k, v):  # [N, T, H] each (k, v already repeated for GQA), causal
    T, H = q.shape[1], q.shape[2]
    att = q @ k.transpose(0, 2, 1) / np.sqrt(H) + np.triu(np.full((T, T), -np.inf), 1)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    return (att @ v).transpose(1, 0, 2).reshape(T, -1)


def rope(x, theta, broken):  # x [heads, T, H]; transformers' rotate_half, or (broken) adjacent pairs
    H, T = x.shape[-1], x.shape[1]
    angle = np.arange(T)[:, None] * theta ** (-np.arange(0, H, 2) / H)[None]  # [T, H/2]
    cos, sin = np.cos(angle), np.sin(angle)
    if broken:  # the pairing shardlab uses, on HF's row order: the permutation left out
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = x0 * cos - x1 * sin, x0 * sin + x1 * cos
        return out
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    return x * cos + np.concatenate([-x[..., H // 2:], x[..., :H // 2]], -1) * sin


def llama_logits(config, W, tokens, broken):
    D, N, L = config["hidden_size"], config["num_attention_heads"], config["num_hidden_layers"]
    K, eps, theta = config["num_key_value_heads"], config["rms_norm_eps"], config["rope_theta"]
    H, T = D // N, len(tokens)
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    heads = lambda x, n: x.reshape(T, n, H).transpose(1, 0, 2)
    h = W["model.embed_tokens.weight"][tokens]
    for l in range(L):
        p = f"model.layers.{l}."
        a = rms(h, W[p + "input_layernorm.weight"])
        q = rope(heads(a @ W[p + "self_attn.q_proj.weight"].T, N), theta, broken)
        k = rope(heads(a @ W[p + "self_attn.k_proj.weight"].T, K), theta, broken)
        v = heads(a @ W[p + "self_attn.v_proj.weight"].T, K)
        y = attention(q, np.repeat(k, N // K, axis=0), np.repeat(v, N // K, axis=0))
        h = h + y @ W[p + "self_attn.o_proj.weight"].T
        m = rms(h, W[p + "post_attention_layernorm.weight"])
        gate = m @ W[p + "mlp.gate_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * (m @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    h = rms(h, W["model.norm.weight"])
    return h @ W.get("lm_head.weight", W["model.embed_tokens.weight"]).T


def logits(config, W, tokens, broken=False):
    if config["model_type"] == "llama":
        return llama_logits(config, W, tokens, broken)
    D, N, L, eps = config["n_embd"], config["n_head"], config["n_layer"], config["layer_norm_epsilon"]
    H, T = D // N, len(tokens)
    h = W["transformer.wte.weight"][tokens] + W["transformer.wpe.weight"][:T]
    for l in range(L):
        p = f"transformer.h.{l}."
        q, k, v = np.split(conv1d(layer_norm(h, p + "ln_1", W, eps), p + "attn.c_attn", W), 3, axis=-1)
        q, k, v = (a.reshape(T, N, H).transpose(1, 0, 2) for a in (q, k, v))
        y = attention(q, k, v)
        h = h + conv1d(y, p + "attn.c_proj", W, flip=broken)
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


def agrees(config, W, tokens, broken):
    ok = True
    for t in range(len(PROMPT), len(tokens)):
        z = logits(config, W, tokens[:t], broken)[-1]
        best = int(z.argmax())
        if z[tokens[t]] < z[best] - 1e-4:
            print(f"  token {t}: shardlab chose {tokens[t]} (logit {z[tokens[t]]:.6f}), "
                  f"the {'broken ' if broken else ''}reference {best} (logit {z[best]:.6f})")
            ok = False
    return ok


def check(directory, generate, ckpt, and_broken):
    return check_weights(*read(directory), generate, ckpt, and_broken)


def check_weights(config, W, generate, ckpt, and_broken=False):
    """generate's greedy tokens on CKPT are this forward's on config and W (in transformers' names)."""
    out = subprocess.run([generate, "--ckpt", ckpt, "--prompt", PROMPT.decode(), "--max-new", str(MAX_NEW)],
                         capture_output=True, check=True).stdout
    assert out.startswith(PROMPT) and out.endswith(b"\n"), out
    tokens = list(out[:-1])
    ok = len(tokens) == len(PROMPT) + MAX_NEW and agrees(config, W, tokens, False)
    print(("agree" if ok else "DISAGREE") + f": {config['model_type']}, {MAX_NEW} greedy tokens: {out[:-1]!r}")
    if and_broken:
        if agrees(config, W, tokens, True):
            print("the broken reference agrees too: the check cannot tell the conventions apart")
            return False
        print("the broken reference disagrees, as it must")
    return ok


if __name__ == "__main__":
    if sys.argv[1] == "make":
        random_model = {"gpt2": random_gpt2, "llama": random_llama}[sys.argv[2]]
        seed = next(s for s in range(100) if not {0, 10} & set(greedy(*random_model(s))[len(PROMPT):]))
        write(sys.argv[3], *random_model(seed))
        sys.exit(0)
    if sys.argv[1] == "index":
        sys.exit(0 if check_index(sys.argv[2]) else 1)
    sys.exit(0 if check(*sys.argv[2:5], "--and-broken" in sys.argv) else 1)
