"""Token generation of Llama-shaped models: mlx-lm's Python API on kiln
(under the mlx alias) against MLX, and a plain PyTorch eager Llama on the
same weights: prompt and decode tokens/s and peak memory of models of about
0.1B and 1B parameters, with random weights written to a temporary
directory (a config and a local tokenizer, no download), in bfloat16 (or
float16) and quantized to 4 bits (affine, groups of 64), for batch 1
(stream_generate) and batch 8 (batch_generate).

    PYTHONPATH=build/python python3 benchmarks/generate_bench.py
    PYTHONPATH=build/python python3 benchmarks/generate_bench.py \\
        --sizes 0.1b --prompt 64 --decode 32          # quick
    PYTHONPATH=build/python python3 benchmarks/generate_bench.py \\
        --device gpu --libs kiln,torch --check       # on a CUDA machine

Libraries (--libs): kiln, mlx, torch. --device gpu puts kiln's and MLX's
default device on the GPU and runs torch on cuda. Each (library, model)
pair runs in a subprocess of its own: kiln's as ``python -m kiln.mlx
generate_bench.py --worker ...``, MLX's as the plain program, torch's with
--torch-python (default: this interpreter), which needs only torch and
NumPy (it reads the safetensors file itself). The workers set
HF_HUB_OFFLINE=1: everything they load is in the temporary directory.
Each batch size gets one untimed warm-up generation (16-token prompts),
then --trials timed ones; the best of each figure is kept.

Token rates. kiln and MLX: what mlx-lm reports (batch 8: tokens of all
sequences together; stream_generate's decode rate counts all n generated
tokens over the time from the first to the last, which holds n-1 steps, so
it reads up to n/(n-1) high: 1.6% at 64 tokens). torch: prompt = batch x
prompt length / the time to the first token (prefill of the whole prompt,
the head on the last position only, the argmax); decode = batch x (n-1) /
the time of the n-1 steps after it. The torch model is eager PyTorch with
no compilation: F.linear projections, F.scaled_dot_product_attention with
grouped-query heads, rotate-half RoPE (mlx-lm llama's traditional=False,
the config's rope theta), RMSNorm in float32, SwiGLU, the tied embedding
as the head; a KV cache preallocated for prompt + decode tokens, greedy
tokens kept on the device (no host sync per step), under
torch.inference_mode. torch has no 4-bit format here: it runs the float
weights only, and its columns in 4-bit rows are empty; "kiln/torch" in a
4-bit row compares kiln's 4-bit figure with torch's float (--dtype)
figure of the same size and batch.

Memory. "peak": mx.get_peak_memory() (kiln, MLX), and on the GPU
torch.cuda.max_memory_allocated() (torch), over the timed runs (weights
included); "RSS": the process's peak resident size, which is torch's peak
on the CPU. Ratios are kiln/MLX and kiln/torch (above 1: kiln is faster,
or uses more memory in the memory columns).

Bandwidth bound. Each worker measures a device-to-device copy of a large
float32 buffer (1 GiB on the GPU, 256 MiB on the CPU; torch: copy_; kiln
and MLX: y = x + 1, which also reads and writes each element once),
counted as bytes read + bytes written, the median of several, after its
timed runs (outside the memory figures); on the CPU the driver also
measures a NumPy copy on one thread per core. The bound uses the highest
of these measured so far, BW (the "copy GB/s" column):

    decode bound (tokens/s) = B x BW / (W + B x KV(C))

    W     bytes of weights one decode step reads: every projection of
          every layer and the (tied) output head, at 2 bytes a weight in
          16 bits, 0.5 + 4/64 bytes (4-bit values, a 16-bit scale and bias
          per group of 64) in 4 bits; embedding rows and norms are left out
    KV(C) bytes of the KV cache one sequence's step reads at context C:
          2 (keys, values) x layers x KV heads x head size x C x 2 bytes
    C     the decode's average context length, prompt + decode / 2
    B     the batch (one step makes B tokens and reads W once)

"% bound" is each library's decode tokens/s over that bound.

--check runs the first size in float32 (the same weights, cast) and
compares the first 8 greedy tokens of each of 4 prompts from torch with
those of mlx-lm on kiln (and on MLX when it is in --libs), printing match
or mismatch, and the largest difference of the log-probabilities of the
top 5 ids of each step; bfloat16 runs may differ in a near tie, which is
fine. The benchmark follows.
"""

import argparse
import json
import os
import shutil
import statistics
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
CHECK_TOKENS = 8  # greedy tokens compared by --check
CHECK_PROMPTS = 4  # of that many prompts
TOP = 5  # and the log-probabilities of the top ids of each step


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
    id decodes. Made here with the tokenizers package (no download);
    mlx_lm.load reads it back from the directory through transformers."""
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


def prompt_tokens(vocab, batches, length):
    """Batch size -> that many prompts of random ids (every worker draws
    the same ones)."""
    rng = np.random.default_rng(1)
    return {b: rng.integers(2, vocab, (b, length)).tolist() for b in batches}


def check_prompts(vocab, length):
    """The --check prompts: CHECK_PROMPTS of random ids."""
    rng = np.random.default_rng(2)
    return rng.integers(2, vocab, (CHECK_PROMPTS, length)).tolist()


# ---- the workers: one library, one model, in a process of their own


def peak_rss():
    """This process's peak resident size in bytes (VmHWM: getrusage's
    maxrss would include the parent's peak, kept across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def emit(obj):
    print(json.dumps(obj), flush=True)


def copy_bytes(device):
    return (1 << 30) if device == "gpu" else (1 << 28)


def mx_copy_bandwidth(mx, nbytes, reps):
    """GB/s of y = x + 1 over a float32 buffer of nbytes (read + write).
    x is an arange: kiln keeps mx.ones a broadcast scalar, which y would
    stay too."""
    x = mx.arange(nbytes // 4, dtype=mx.float32)
    mx.eval(x)
    times = []
    for i in range(reps + 2):
        mx.synchronize()
        t0 = time.perf_counter()
        y = x + 1
        mx.eval(y)
        mx.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - t0)
        del y
    del x
    mx.clear_cache()
    return 2 * nbytes / statistics.median(times) / 1e9


def mlx_worker(args):
    import mlx.core as mx

    # Before mlx_lm's import: it makes its generation stream on the default
    # device.
    mx.set_default_device(mx.gpu if args.device == "gpu" else mx.cpu)
    from mlx_lm import batch_generate, load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    model, tok, cfg = load(args.model, return_config=True)
    tok.eos_token_ids = []  # random weights: never stop early
    greedy = make_sampler(temp=0.0)
    vocab = cfg["vocab_size"]

    if args.check:
        model.set_dtype(mx.float32)
        for prompt in check_prompts(vocab, args.prompt):
            toks, top = [], []
            for r in stream_generate(model, tok, prompt, max_tokens=CHECK_TOKENS,
                                     sampler=greedy):
                toks.append(int(r.token))
                ids = mx.argsort(-r.logprobs)[:TOP].tolist()
                top.append([ids, [float(r.logprobs[i].item()) for i in ids]])
            emit({"check": toks, "top": top})
        return

    def single(prompt, n):
        for r in stream_generate(model, tok, prompt, max_tokens=n, sampler=greedy):
            pass
        assert r.generation_tokens == n, r
        return r.prompt_tps, r.generation_tps

    def batch(prompts, n):
        s = batch_generate(model, tok, prompts, max_tokens=n, sampler=greedy).stats
        assert s.generation_tokens == n * len(prompts), s
        return s.prompt_tps, s.generation_tps

    for b, prompts in prompt_tokens(vocab, args.batches, args.prompt).items():
        def run(prompts, n):
            return single(prompts[0], n) if b == 1 else batch(prompts, n)

        # Warm-up on short prompts (MLX compiles its CPU kernels at first
        # use).
        run([q[:16] for q in prompts], 2)
        mx.reset_peak_memory()
        best = [0.0, 0.0]
        for _ in range(args.trials):
            best = [max(x, y) for x, y in zip(best, run(prompts, args.decode))]
        emit({"batch": b, "prompt_tps": best[0], "decode_tps": best[1],
              "peak": mx.get_peak_memory(), "rss": peak_rss()})
    # Last, so that its buffers are in no memory figure.
    emit({"bandwidth_gbs": mx_copy_bandwidth(
        mx, copy_bytes(args.device), 10 if args.device == "gpu" else 5)})


def read_safetensors(path):
    """(name, dtype name, NumPy array) of each tensor of a safetensors
    file, read one at a time (no mapping of the file, which would count in
    the resident size); 16-bit floats come as int16 bit patterns."""
    kinds = {"BF16": np.int16, "F16": np.int16, "F32": np.float32}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            buf = bytearray(b - a)
            f.seek(8 + n + a)
            f.readinto(buf)
            yield name, t["dtype"], np.frombuffer(buf, kinds[t["dtype"]]).reshape(t["shape"])


class TorchLlama:
    """mlx-lm's llama (models/llama.py) in eager PyTorch, functional over
    the checkpoint's tensors."""

    def __init__(self, torch, cfg, path, dtype, device):
        import torch.nn.functional as F

        self.torch, self.F = torch, F
        tdt = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
        w = {}
        for name, code, arr in read_safetensors(path):
            w[name] = torch.from_numpy(arr).view(tdt[code]).to(device=device, dtype=dtype)
        self.w, self.cfg, self.dtype, self.device = w, cfg, dtype, device
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // self.nh
        self.eps = cfg["rms_norm_eps"]
        self.layers = cfg["num_hidden_layers"]
        assert not cfg.get("rope_scaling"), "only the default RoPE"
        assert not cfg.get("rope_traditional", False)
        self.head = w["model.embed_tokens.weight"]
        if not cfg.get("tie_word_embeddings", True):
            self.head = w["lm_head.weight"]
        theta = cfg.get("rope_theta", 10000.0)
        inv = 1.0 / theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)
        self.inv_freq = inv.to(torch.float32)
        v = torch.__version__.split(".")
        self.gqa_kw = (int(v[0]), int(v[1])) >= (2, 5)
        self.cache_batch = self.cache_len = 0

    def alloc_cache(self, batch, length):
        """Keys and values of every layer, (batch, KV heads, length, head
        size), and the RoPE tables for positions below length."""
        torch = self.torch
        if batch == self.cache_batch and length <= self.cache_len:
            return
        self.k = self.v = None
        shape = (batch, self.nkv, length, self.hd)
        self.k = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                  for _ in range(self.layers)]
        self.v = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                  for _ in range(self.layers)]
        ang = torch.outer(torch.arange(length, dtype=torch.float32), self.inv_freq)
        self.cos = ang.cos().to(self.device, self.dtype)
        self.sin = ang.sin().to(self.device, self.dtype)
        self.cache_batch, self.cache_len = batch, length

    def rms_norm(self, x, w):
        xf = x.float()
        xf = xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * xf.to(x.dtype)

    def rope(self, x, cos, sin):
        h = self.hd // 2
        x1, x2 = x[..., :h], x[..., h:]
        return self.torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def attention(self, q, k, v, pos, t):
        F = self.F
        if self.gqa_kw:
            kw = {"enable_gqa": self.nkv != self.nh}
        else:
            rep = self.nh // self.nkv
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            kw = {}
        if t == 1:
            return F.scaled_dot_product_attention(q, k, v, **kw)
        if pos == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
        # Queries at pos..pos+t-1 against keys 0..pos+t-1.
        s = pos + t
        mask = self.torch.ones(t, s, dtype=self.torch.bool, device=self.device).tril(pos)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)

    def forward(self, tokens, pos):
        """Logits of the last position, (batch, vocab), for tokens (batch,
        t) at positions pos..pos+t-1, writing their keys and values into
        the cache."""
        F, w = self.F, self.w
        b, t = tokens.shape
        x = F.embedding(tokens, w["model.embed_tokens.weight"])
        cos, sin = self.cos[pos:pos + t], self.sin[pos:pos + t]
        for i in range(self.layers):
            p = f"model.layers.{i}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"])
            k = F.linear(h, w[p + "self_attn.k_proj.weight"])
            v = F.linear(h, w[p + "self_attn.v_proj.weight"])
            q = self.rope(q.view(b, t, self.nh, self.hd).transpose(1, 2), cos, sin)
            k = self.rope(k.view(b, t, self.nkv, self.hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, self.nkv, self.hd).transpose(1, 2)
            self.k[i][:b, :, pos:pos + t] = k
            self.v[i][:b, :, pos:pos + t] = v
            o = self.attention(q, self.k[i][:b, :, :pos + t], self.v[i][:b, :, :pos + t],
                               pos, t)
            x = x + F.linear(o.transpose(1, 2).reshape(b, t, -1), w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            g = F.linear(h, w[p + "mlp.gate_proj.weight"])
            u = F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(g) * u, w[p + "mlp.down_proj.weight"])
        x = self.rms_norm(x[:, -1], w["model.norm.weight"])
        return F.linear(x, self.head)


def torch_worker(args):
    import torch

    if args.device == "gpu":
        dev = torch.device("cuda")
        sync = torch.cuda.synchronize
    else:
        dev = torch.device("cpu")
        sync = lambda: None  # noqa: E731

    def copy_bandwidth(nbytes, reps):
        x = torch.ones(nbytes // 4, dtype=torch.float32, device=dev)
        y = torch.empty_like(x)
        times = []
        for i in range(reps + 2):
            if dev.type == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                y.copy_(x)
                b.record()
                b.synchronize()
                dt = a.elapsed_time(b) * 1e-3
            else:
                t0 = time.perf_counter()
                y.copy_(x)
                dt = time.perf_counter() - t0
            if i >= 2:
                times.append(dt)
        del x, y
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        return 2 * nbytes / statistics.median(times) / 1e9

    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    dtype = torch.float32 if args.check else getattr(torch, args.dtype)
    model = TorchLlama(torch, cfg, os.path.join(args.model, "model.safetensors"), dtype, dev)

    def generate(prompts, n):
        """Greedy: (prompt tokens/s, decode tokens/s, tokens (batch, n))."""
        b, plen = prompts.shape
        model.alloc_cache(b, plen + n)
        out = torch.empty((b, n), dtype=torch.long, device=dev)
        sync()
        t0 = time.perf_counter()
        tok = model.forward(prompts, 0).argmax(-1)
        out[:, 0] = tok
        sync()
        t1 = time.perf_counter()
        for i in range(1, n):
            tok = model.forward(tok[:, None], plen + i - 1).argmax(-1)
            out[:, i] = tok
        sync()
        t2 = time.perf_counter()
        return b * plen / (t1 - t0), (b * (n - 1) / (t2 - t1) if n > 1 else 0.0), out

    with torch.inference_mode():
        if args.check:
            for prompt in check_prompts(cfg["vocab_size"], args.prompt):
                model.alloc_cache(1, len(prompt) + CHECK_TOKENS)
                x, pos, toks, top = torch.tensor([prompt], device=dev), 0, [], []
                for _ in range(CHECK_TOKENS):
                    lp = torch.log_softmax(model.forward(x, pos)[0].float(), -1)
                    vals, ids = lp.topk(TOP)
                    toks.append(int(ids[0]))
                    top.append([ids.tolist(), vals.tolist()])
                    pos += x.shape[1]
                    x = ids[:1][None]
                emit({"check": toks, "top": top})
            return
        for b, prompts in prompt_tokens(cfg["vocab_size"], args.batches, args.prompt).items():
            prompts = torch.tensor(prompts, device=dev)
            generate(prompts[:, :16], 2)  # warm-up
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            best = [0.0, 0.0]
            for _ in range(args.trials):
                best = [max(x, y) for x, y in zip(best, generate(prompts, args.decode)[:2])]
            peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else None
            emit({"batch": b, "prompt_tps": best[0], "decode_tps": best[1],
                  "peak": peak, "rss": peak_rss()})
    model = None  # frees the weights and cache before the copy's buffers
    emit({"bandwidth_gbs": copy_bandwidth(copy_bytes(args.device),
                                          20 if dev.type == "cuda" else 5)})


# ---- the driver


def numpy_copy_bandwidth(nbytes=1 << 28, threads=None, reps=5):
    """GB/s (read + write) of copying a float32 buffer with one NumPy
    thread per CPU on its own part (NumPy releases the GIL), median."""
    threads = threads or os.cpu_count()
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)
    pairs = list(zip(np.array_split(dst, threads), np.array_split(src, threads)))
    times = []
    for i in range(reps + 1):
        ts = [threading.Thread(target=np.copyto, args=p) for p in pairs]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if i:
            times.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(times) / 1e9


def run_worker(lib, model_dir, args, check=False):
    """The worker's JSON lines: {"bandwidth_gbs"}, {"batch", ...} or
    {"check"}; None where it failed."""
    here = os.path.abspath(__file__)
    if lib == "torch":
        cmd = [args.torch_python or sys.executable]
    else:
        cmd = [sys.executable] + (["-m", "kiln.mlx"] if lib == "kiln" else [])
    cmd += [here, "--worker", "--lib", lib, "--model", model_dir,
            "--device", args.device, "--dtype", args.dtype,
            "--prompt", str(args.prompt), "--decode", str(args.decode),
            "--trials", str(args.trials), "--batches", ",".join(map(str, args.batches))]
    if check:
        cmd.append("--check")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        print(f"{lib} timed out on {model_dir}", file=sys.stderr)
        return None
    if r.returncode != 0:
        print(f"{lib} failed on {model_dir}:\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]


def quantize_dir(src, dst, lib):
    cmd = [sys.executable] + (["-m", "kiln.mlx"] if lib == "kiln" else []) + [
        "-m", "mlx_lm", "convert", "--hf-path", src, "--mlx-path", dst,
        "-q", "--q-bits", "4", "--q-group-size", "64"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    subprocess.run(cmd, check=True, capture_output=True, timeout=1800, env=env)


def weight_bytes_per_token(cfg, quantized):
    """Bytes of weights one decode step reads: every projection and the
    (tied) output head; embedding rows and norms are negligible."""
    n = sum(int(np.prod(s)) for name, s in shapes(cfg).items()
            if len(s) == 2 and "embed" not in name)
    n += cfg["vocab_size"] * cfg["hidden_size"]  # the head
    # 4 bits per weight plus a 16-bit scale and bias per group of 64.
    return n * (0.5 + 4 / 64) if quantized else 2 * n


def kv_bytes_per_sequence(cfg, context):
    """Bytes of 16-bit keys and values one sequence's decode step reads at
    this context length."""
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * hd * context * 2


def decode_bound(cfg, quantized, batch, context, bw_gbs):
    step = weight_bytes_per_token(cfg, quantized) + batch * kv_bytes_per_sequence(cfg, context)
    return batch * bw_gbs * 1e9 / step


def fmt_ratio(k, m):
    return f"{k / m:.2f}x" if k and m else "-"


def run_check(size, src, libs, args):
    """Greedy float32 tokens of torch against mlx-lm's on kiln (and MLX):
    prints match or mismatch per prompt, and how far the log-probabilities
    of torch's top ids are apart where both sides rank the same ids."""
    others = [lib for lib in ("kiln", "mlx") if lib in libs] or ["kiln"]
    got = {}
    for lib in ["torch"] + others:
        res = run_worker(lib, src, args, check=True)
        got[lib] = [r for r in res or [] if "check" in r] or None
    print(f"# check ({size}, float32, the first {CHECK_TOKENS} greedy tokens of "
          f"{CHECK_PROMPTS} prompts of {args.prompt} tokens):", flush=True)
    for lib, res in got.items():
        for i, r in enumerate(res or [None]):
            print(f"#   {lib:5} prompt {i}: {r and r['check']}", flush=True)
    ok = True
    for lib in others:
        a, b = got["torch"], got[lib]
        if a is None or b is None or len(a) != len(b):
            print(f"#   torch vs {lib} (mlx-lm): not run (a worker failed)", flush=True)
            ok = False
            continue
        verdicts, steps, same_top, diff = [], 0, 0, 0.0
        for x, y in zip(a, b):
            if x["check"] == y["check"]:
                verdicts.append("match")
            else:
                n = next(i for i, (u, v) in enumerate(zip(x["check"], y["check"])) if u != v)
                verdicts.append(f"MISMATCH at token {n}")
                ok = False
            for (ids, lp), (ids2, lp2) in zip(x["top"], y["top"]):
                steps += 1
                if ids == ids2:
                    same_top += 1
                    diff = max(diff, max(abs(u - v) for u, v in zip(lp, lp2)))
                else:
                    break  # the contexts differ from here on
        print(f"#   torch vs {lib} (mlx-lm): {', '.join(verdicts)}; top-{TOP} ids "
              f"agree at {same_top}/{steps} steps, max |logprob difference| "
              f"{diff:.2e}", flush=True)
    return ok


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
    p.add_argument("--libs", default="kiln,mlx", help="any of kiln, mlx, torch")
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"],
                   help="gpu: kiln's and MLX's default device the GPU, torch on cuda")
    p.add_argument("--torch-python", help="the interpreter of the torch worker "
                   "(default: this one); it needs torch and NumPy only")
    p.add_argument("--check", action="store_true",
                   help=f"first compare {CHECK_TOKENS} greedy float32 tokens of "
                   "torch and mlx-lm on kiln (and MLX)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per worker")
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--lib", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    if args.worker:
        return torch_worker(args) if args.lib == "torch" else mlx_worker(args)

    libs = args.libs.split(",")
    unknown = set(libs) - {"kiln", "mlx", "torch"}
    if unknown:
        p.error(f"unknown --libs {sorted(unknown)}")
    bws = {}
    if args.device == "cpu":
        bws["numpy"] = numpy_copy_bandwidth()
    print(f"# device {args.device}; prompt {args.prompt}, decode {args.decode}, "
          f"best of {args.trials}; libraries {', '.join(libs)}", flush=True)
    if "torch" in libs and "q4" in args.formats.split(","):
        print(f"# torch: no 4-bit equivalent; it runs {args.dtype} only, and "
              f"kiln/torch in the 4-bit rows compares with that", flush=True)
    rows, checks = [], {}
    context = args.prompt + args.decode / 2
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            src = os.path.join(tmp, size)
            t0 = time.perf_counter()
            cfg = write_model(src, size, args.dtype)
            print(f"# {size}: {param_count(cfg) / 1e9:.2f}B parameters, written "
                  f"in {time.perf_counter() - t0:.0f} s", flush=True)
            if args.check and not checks:
                checks[size] = run_check(size, src, libs, args)
            torch_float = {}
            if "torch" in libs:
                res = run_worker("torch", src, args) or []
                torch_float = {r["batch"]: r for r in res if "batch" in r}
                bws.update({f"torch {size}": r["bandwidth_gbs"]
                            for r in res if "bandwidth_gbs" in r})
            for fmt in args.formats.split(","):
                path = src
                if fmt == "q4":
                    path = src + "-q4"
                    quantize_dir(src, path, "mlx" if "mlx" in libs else "kiln")
                res = {}
                for lib in libs:
                    if lib == "torch":
                        res[lib] = torch_float if fmt == "float" else {}
                        continue
                    out = run_worker(lib, path, args) or []
                    res[lib] = {r["batch"]: r for r in out if "batch" in r}
                    bws.update({f"{lib} {size} {fmt}": r["bandwidth_gbs"]
                                for r in out if "bandwidth_gbs" in r})
                bw = max(bws.values()) if bws else 0.0
                for b in args.batches:
                    row = {"size": size, "format": args.dtype if fmt == "float" else "q4 (g64)",
                           "batch": b, "weights_gb": weight_bytes_per_token(cfg, fmt == "q4") / 1e9,
                           "kv_gb": b * kv_bytes_per_sequence(cfg, context) / 1e9,
                           "bandwidth_gbs": bw,
                           "decode_bound_tps": decode_bound(cfg, fmt == "q4", b, context, bw),
                           "torch_float": torch_float.get(b, {})}
                    for lib in libs:
                        row[lib] = res[lib].get(b, {})
                    rows.append(row)
                    print_row(row, libs, header=len(rows) == 1)
            for path in (src, src + "-q4"):
                shutil.rmtree(path, ignore_errors=True)
    print("# copy bandwidth (read + write), GB/s: " +
          ", ".join(f"{k} {v:.1f}" for k, v in bws.items()), flush=True)
    print(f"# decode bound = batch x copy GB/s (the highest measured by then) / "
          f"(weight bytes + batch x KV bytes at context {context:g})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bandwidth_gbs": bws, "check": checks, "args": vars(args),
                       "rows": rows}, f, indent=1)


def print_row(row, libs, header):
    cols = ["prompt tok/s", "decode tok/s", "peak GB", "RSS GB"]
    keys = ["prompt_tps", "decode_tps", "peak", "rss"]
    vs_mlx = "kiln" in libs and "mlx" in libs
    vs_torch = "kiln" in libs and "torch" in libs
    if header:
        names = ["model", "weights", "batch"]
        for c in cols:
            names += [f"{c} {lib}" for lib in libs]
            names += (["kiln/MLX"] if vs_mlx else []) + (["kiln/torch"] if vs_torch else [])
        names += ["copy GB/s", "decode bound"] + [f"% bound {lib}" for lib in libs]
        print("| " + " | ".join(names) + " |")
        print("|" + "---|" * len(names), flush=True)
    cells = [row["size"], row["format"], str(row["batch"])]
    for key in keys:
        vals = [row[lib].get(key) for lib in libs]
        scale = 1e9 if key in ("peak", "rss") else 1
        digits = 2 if scale > 1 else 1
        cells += [f"{v / scale:.{digits}f}" if v else "-" for v in vals]
        if vs_mlx:
            cells.append(fmt_ratio(row["kiln"].get(key), row["mlx"].get(key)))
        if vs_torch:
            cells.append(fmt_ratio(row["kiln"].get(key), row["torch_float"].get(key)))
    bound = row["decode_bound_tps"]
    cells += [f"{row['bandwidth_gbs']:.1f}", f"{bound:.1f}"]
    for lib in libs:
        d = row[lib].get("decode_tps")
        cells.append(f"{100 * d / bound:.0f}%" if d and bound else "-")
    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
