"""Token generation through mlx-lm's Python API, kiln (under the mlx alias)
against MLX: prompt and decode tokens/s and peak memory of Llama-shaped
models of about 0.1B and 1B parameters, with random weights written to a
temporary directory (a config, no download), in bfloat16 (or float16) and
quantized to 4 bits (affine, groups of 64), for batch 1 (stream_generate)
and batch 8 (batch_generate).

    PYTHONPATH=build/python python3 benchmarks/generate_bench.py
    PYTHONPATH=build/python python3 benchmarks/generate_bench.py \\
        --sizes 0.1b --prompt 64 --decode 32          # quick

Each (library, model) pair runs in a subprocess of its own: kiln's as
``python -m kiln.mlx generate_bench.py --worker ...``, MLX's as the plain
program. Each batch size gets one untimed warm-up generation (16-token
prompts), then --trials timed ones; the best of each figure is kept. Token
rates are what mlx-lm reports (batch 8: tokens of all sequences together);
"peak" is mx.get_peak_memory() over the timed runs and "RSS" the process's
peak resident size. The ratio is kiln/MLX (above 1: kiln is faster, or
uses more memory in the memory columns). "decode bound" is batch x the
machine's read bandwidth / the bytes of weights one decode step reads.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

# Llama shapes (grouped-query attention, SwiGLU, tied embeddings).
SIZES = {
    "0.1b": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 num_key_value_heads=4, intermediate_size=2048, vocab_size=32000),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, intermediate_size=8192, vocab_size=32000),
}


def shapes(cfg):
    """Name -> shape of every weight of a Llama checkpoint."""
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (h // cfg["num_attention_heads"])
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out.update({
            p + "self_attn.q_proj.weight": (h, h),
            p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.o_proj.weight": (h, h),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        })
    return out


def param_count(cfg):
    return sum(int(np.prod(s)) for s in shapes(cfg).values())


def write_weights(path, cfg, dtype, seed=0):
    """Random weights (normal, std 0.02; norms 1) as a safetensors file in
    bfloat16 or float16, streamed tensor by tensor."""
    rng = np.random.default_rng(seed)
    code = {"bfloat16": "BF16", "float16": "F16"}[dtype]
    table, header, offset = shapes(cfg), {"__metadata__": {"format": "pt"}}, 0
    for name, shape in table.items():
        nbytes = 2 * int(np.prod(shape))
        header[name] = {"dtype": code, "shape": list(shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in table.items():
            if len(shape) == 1:
                x = np.ones(shape, np.float32)
            else:
                x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            if dtype == "float16":
                f.write(x.astype("<f2").tobytes())
            else:  # round to nearest even, keep the high half
                u = x.view(np.uint32)
                u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
                f.write(u.astype("<u2").tobytes())


def write_tokenizer(path, vocab_size):
    """A byte-level BPE tokenizer whose vocabulary covers every id of the
    model (bytes, two special tokens, then filler tokens), so any generated
    id decodes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    names = ["<s>", "</s>"] + alphabet
    names += [f"<t{i}>" for i in range(vocab_size - len(names))]
    tok = Tokenizer(models.BPE(vocab={n: i for i, n in enumerate(names)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast",
                   "bos_token": "<s>", "eos_token": "</s>"}, f)


def write_model(path, size, dtype):
    cfg = dict(SIZES[size], model_type="llama", architectures=["LlamaForCausalLM"],
               rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=4096,
               tie_word_embeddings=True, bos_token_id=0, eos_token_id=1,
               torch_dtype=dtype)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_weights(os.path.join(path, "model.safetensors"), cfg, dtype)
    write_tokenizer(path, cfg["vocab_size"])
    return cfg


# ---- the worker: one library, one model, in its own process


def peak_rss():
    """This process's peak resident size in bytes (VmHWM: getrusage's
    maxrss would include the parent's peak, kept across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def worker(args):
    import mlx.core as mx
    from mlx_lm import batch_generate, load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tok, cfg = load(args.model, return_config=True)
    tok.eos_token_ids = []  # random weights: never stop early
    greedy = make_sampler(temp=0.0)
    rng = np.random.default_rng(1)
    vocab = cfg["vocab_size"]

    def single(prompt, n):
        for r in stream_generate(model, tok, prompt, max_tokens=n, sampler=greedy):
            pass
        assert r.generation_tokens == n, r
        return r.prompt_tps, r.generation_tps

    def batch(prompts, n):
        s = batch_generate(model, tok, prompts, max_tokens=n, sampler=greedy).stats
        assert s.generation_tokens == n * len(prompts), s
        return s.prompt_tps, s.generation_tps

    for b in args.batches:
        prompts = rng.integers(2, vocab, (b, args.prompt)).tolist()

        def run(prompts, n):
            return single(prompts[0], n) if b == 1 else batch(prompts, n)

        # Warm-up on short prompts (MLX compiles its CPU kernels at first
        # use).
        run([q[:16] for q in prompts], 2)
        mx.reset_peak_memory()
        best = [0.0, 0.0]
        for _ in range(args.trials):
            best = [max(x, y) for x, y in zip(best, run(prompts, args.decode))]
        rss = peak_rss()
        print(json.dumps({"batch": b, "prompt_tps": best[0], "decode_tps": best[1],
                          "peak": mx.get_peak_memory(), "rss": rss}), flush=True)


# ---- the driver


def read_bandwidth_gbs(nbytes=1 << 30, threads=None):
    """Read bandwidth of this machine: sums of a 1 GiB float32 buffer split
    over one NumPy thread per CPU (NumPy releases the GIL), best of 3."""
    threads = threads or os.cpu_count()
    a = np.ones(nbytes // 4, np.float32)
    parts = np.array_split(a, threads)
    best = float("inf")
    for _ in range(3):
        ts = [threading.Thread(target=np.add.reduce, args=(p,)) for p in parts]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9


def run_worker(lib, model_dir, args):
    here = os.path.abspath(__file__)
    cmd = [sys.executable] + (["-m", "kiln.mlx"] if lib == "kiln" else []) + [
        here, "--worker", "--model", model_dir, "--prompt", str(args.prompt),
        "--decode", str(args.decode), "--trials", str(args.trials),
        "--batches", ",".join(map(str, args.batches))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if r.returncode != 0:
        print(f"{lib} failed on {model_dir}:\n{r.stderr[-3000:]}", file=sys.stderr)
        return {}
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return {row["batch"]: row for row in rows}


def quantize_dir(src, dst, lib):
    cmd = [sys.executable] + (["-m", "kiln.mlx"] if lib == "kiln" else []) + [
        "-m", "mlx_lm", "convert", "--hf-path", src, "--mlx-path", dst,
        "-q", "--q-bits", "4", "--q-group-size", "64"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=1800)


def weight_bytes_per_token(cfg, quantized):
    """Bytes of weights one decode step reads: every projection and the
    (tied) output head; embedding rows and norms are negligible."""
    n = sum(int(np.prod(s)) for name, s in shapes(cfg).items()
            if len(s) == 2 and "embed" not in name)
    n += cfg["vocab_size"] * cfg["hidden_size"]  # the head
    # 4 bits per weight plus a 16-bit scale and bias per group of 64.
    return n * (0.5 + 4 / 64) if quantized else 2 * n


def fmt_ratio(k, m):
    return f"{k / m:.2f}x" if k and m else "-"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="0.1b,1b")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    p.add_argument("--formats", default="float,q4",
                   help="float (--dtype) and/or q4 (4-bit affine, groups of 64)")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    p.add_argument("--decode", type=int, default=64, help="decoded tokens")
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--libs", default="kiln,mlx")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per worker")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    if args.worker:
        return worker(args)

    libs = args.libs.split(",")
    bw = read_bandwidth_gbs()
    print(f"# read bandwidth: {bw:.1f} GB/s ({os.cpu_count()} threads); "
          f"prompt {args.prompt}, decode {args.decode}, best of {args.trials}",
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            src = os.path.join(tmp, size)
            t0 = time.perf_counter()
            cfg = write_model(src, size, args.dtype)
            print(f"# {size}: {param_count(cfg) / 1e9:.2f}B parameters, written "
                  f"in {time.perf_counter() - t0:.0f} s", flush=True)
            for fmt in args.formats.split(","):
                path = src
                if fmt == "q4":
                    path = src + "-q4"
                    quantize_dir(src, path, "mlx" if "mlx" in libs else "kiln")
                res = {lib: run_worker(lib, path, args) for lib in libs}
                wbytes = weight_bytes_per_token(cfg, fmt == "q4")
                for b in args.batches:
                    row = {"size": size, "format": args.dtype if fmt == "float" else "q4 (g64)",
                           "batch": b, "weights_gb": wbytes / 1e9,
                           "decode_bound_tps": b * bw * 1e9 / wbytes}
                    for lib in libs:
                        row[lib] = res[lib].get(b, {})
                    rows.append(row)
                    print_row(row, libs, header=len(rows) == 1)
            for path in (src, src + "-q4"):
                shutil.rmtree(path, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bandwidth_gbs": bw, "args": vars(args), "rows": rows}, f, indent=1)


def print_row(row, libs, header):
    cols = ["prompt tok/s", "decode tok/s", "peak GB", "RSS GB"]
    keys = ["prompt_tps", "decode_tps", "peak", "rss"]
    both = sorted(libs) == ["kiln", "mlx"]
    if header:
        names = ["model", "weights", "batch"]
        for c in cols:
            names += [f"{c} {lib}" for lib in libs] + (["kiln/MLX"] if both else [])
        names += ["decode bound"]
        print("| " + " | ".join(names) + " |")
        print("|" + "---|" * len(names), flush=True)
    cells = [row["size"], row["format"], str(row["batch"])]
    for c, key in zip(cols, keys):
        vals = [row[lib].get(key) for lib in libs]
        scale = 1e9 if key in ("peak", "rss") else 1
        digits = 2 if scale > 1 else 1
        cells += [f"{v / scale:.{digits}f}" if v else "-" for v in vals]
        if both:
            cells.append(fmt_ratio(row["kiln"].get(key), row["mlx"].get(key)))
    cells.append(f"{row['decode_bound_tps']:.1f}")
    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
