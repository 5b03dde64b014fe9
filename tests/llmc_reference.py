#!/usr/bin/env python3
"""An independent reader and writer of llm.c's GPT-2 model file (numpy only;
tests/llmc_convert.sh runs it), written from llm.c itself -- train_gpt2.py's write_model
and write_tensors, train_gpt2.c's gpt2_build_from_checkpoint and fill_in_parameter_sizes --
not from shardlab's code: a header of 256 int32 (magic 20240326, version 3, maxT, V, L, NH,
C, Vp), then wte [Vp, C] (V rows, then zero rows), wpe [maxT, C], ln1w, ln1b, qkvw
[L, 3C, C], qkvb, attprojw [L, C, C], attprojb, ln2w, ln2b, fcw [L, 4C, C], fcb, fcprojw
[L, C, 4C], fcprojb, lnfw, lnfb, fp32, each stacked over layers; weights are nn.Linear's
[out, in] (llm.c's GPT loads transformers' Conv1D weights transposed).

  llmc_reference.py make FILE                  a random GPT-2 with V 300, padded to Vp 384
  llmc_reference.py check FILE GENERATE CKPT   FILE's weights, read here, in hf_reference's
                                               GPT-2 forward give generate's greedy tokens
                                               (CKPT: shardlab's import of FILE)
  llmc_reference.py same FILE HFDIR            FILE and HFDIR (both exported from one
                                               checkpoint) hold the same tensors, bit for bit

Exits 0 on agreement, 1 otherwise, 77 when numpy is missing."""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # exits 77 without numpy
from hf_reference import np

MAGIC, VERSION = 20240326, 3
# (llm.c's name, transformers' name within a block or at the top, is a Linear weight)
TENSORS = [("wte", "wte.weight", False), ("wpe", "wpe.weight", False), ("ln1w", "ln_1.weight", False),
           ("ln1b", "ln_1.bias", False), ("qkvw", "attn.c_attn.weight", True), ("qkvb", "attn.c_attn.bias", False),
           ("attprojw", "attn.c_proj.weight", True), ("attprojb", "attn.c_proj.bias", False),
           ("ln2w", "ln_2.weight", False), ("ln2b", "ln_2.bias", False), ("fcw", "mlp.c_fc.weight", True),
           ("fcb", "mlp.c_fc.bias", False), ("fcprojw", "mlp.c_proj.weight", True),
           ("fcprojb", "mlp.c_proj.bias", False), ("lnfw", "ln_f.weight", False), ("lnfb", "ln_f.bias", False)]
PER_LAYER = {"ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b", "fcw", "fcb", "fcprojw",
             "fcprojb"}


def shapes(maxT, Vp, L, C):  # fill_in_parameter_sizes, with the shapes of its comments
    return {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C), "qkvw": (L, 3 * C, C),
            "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C),
            "fcw": (L, 4 * C, C), "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,),
            "lnfb": (C,)}


def hf_name(top_or_block, layer):
    return f"transformer.{top_or_block}" if layer is None else f"transformer.h.{layer}.{top_or_block}"


def read(path):
    """The file as transformers' GPT-2 config and weights ([in, out] Conv1D), and wte's padding rows."""
    raw = open(path, "rb").read()
    magic, version, maxT, V, L, NH, C, Vp = np.frombuffer(raw[:1024], "<i4")[:8].tolist()
    assert magic == MAGIC and version == VERSION, (magic, version)
    offset, W = 1024, {}
    for name, hf, linear in TENSORS:
        shape = shapes(maxT, Vp, L, C)[name]
        count = int(np.prod(shape))
        t = np.frombuffer(raw[offset:offset + 4 * count], "<f4").reshape(shape).astype(np.float64)
        offset += 4 * count
        if name == "wte":
            W[hf_name(hf, None)], padding = t[:V], t[V:]
        elif name in PER_LAYER:
            for l in range(L):
                W[hf_name(hf, l)] = t[l].T if linear else t[l]
        else:
            W[hf_name(hf, None)] = t
    assert offset == len(raw), f"{path}: {len(raw)} bytes, the header's model needs {offset}"
    config = {"model_type": "gpt2", "vocab_size": V, "n_positions": maxT, "n_embd": C, "n_layer": L, "n_head": NH,
              "layer_norm_epsilon": 1e-5}
    return config, W, padding


def write(path, config, W):
    """As write_model: the header, wte padded with zero rows to a multiple of 128, then the rest."""
    V, C, L = config["vocab_size"], config["n_embd"], config["n_layer"]
    Vp = (V + 127) // 128 * 128
    header = np.zeros(256, "<i4")
    header[:8] = [MAGIC, VERSION, config["n_positions"], V, L, config["n_head"], C, Vp]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, hf, linear in TENSORS:
            if name == "wte":
                t = np.concatenate([W[hf_name(hf, None)], np.zeros((Vp - V, C))])
            elif name in PER_LAYER:
                t = np.stack([W[hf_name(hf, l)].T if linear else W[hf_name(hf, l)] for l in range(L)])
            else:
                t = W[hf_name(hf, None)]
            f.write(t.astype("<f4").tobytes())


def greedy_bytes(config, W):  # generate prints bytes: the continuation must be bytes, not 0 or newline
    tokens = hf_reference.greedy(config, W)[len(hf_reference.PROMPT):]
    return all(0 < t < 256 and t != 10 for t in tokens)


def make(path):
    for seed in range(100):
        config, W = hf_reference.random_gpt2(seed, V=300)
        if greedy_bytes(config, W):
            write(path, config, W)
            return True
    return False


def check(path, generate, ckpt):
    config, W, padding = read(path)
    return hf_reference.check_weights(config, W, generate, ckpt)


def same(path, directory):
    config, W, padding = read(path)
    hf_config, hf = hf_reference.read(directory)
    fields = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
    ok = all(config[k] == hf_config[k] for k in fields) and sorted(W) == sorted(hf)
    ok = ok and all(np.array_equal(W[k], hf[k]) for k in W) and not padding.any()
    print(("same" if ok else "DIFFERENT") + f": {len(W)} tensors of the llm.c file and the Hugging Face export, "
          f"V {config['vocab_size']} padded by {padding.shape[0]} zero rows")
    return ok


if __name__ == "__main__":
    command = sys.argv[1]
    ok = make(sys.argv[2]) if command == "make" else check(*sys.argv[2:5]) if command == "check" else same(*sys.argv[2:4])
    sys.exit(0 if ok else 1)
