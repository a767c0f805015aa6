"""mlx-lm end to end on kiln through the opt-in mlx alias, against real MLX.

A small Llama-architecture model (random float32 weights, a byte-level BPE
tokenizer trained here) is written to a temporary directory; each test runs
an mlx-lm command or API program twice in subprocesses, once under
``python -m kiln.mlx`` and once on the installed MLX, and compares what they
produce: tokens, texts, files written, training losses."""

import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import mx

_MISSING = [m for m in ("mlx_lm", "tokenizers", "transformers")
            if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.skipif(mx is None, reason="real mlx is not installed"),
    pytest.mark.skipif(bool(_MISSING), reason=f"{', '.join(_MISSING)} not installed"),
]

TIMEOUT = 150  # seconds, for any one subprocess

# The model: Llama with grouped-query attention (4 query heads, 2 kv heads).
CONFIG = dict(
    model_type="llama",
    architectures=["LlamaForCausalLM"],
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=384,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
    bos_token_id=0,
    eos_token_id=1,
    torch_dtype="float32",
)

CORPUS = [f"the quick brown fox {i} jumps over the lazy dog {7 * i} times"
          for i in range(150)] + [
    "hello world, kiln runs mlx programs on the cpu and the gpu."] * 20


def _save_safetensors(path, tensors):
    """float32 tensors in the safetensors layout (8-byte header length, JSON
    header, raw little-endian data)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.writelines(blobs)


def _weights(cfg, rng):
    h, v, inter = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    hd = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd

    def lin(o, i, scale=1.0):
        return rng.standard_normal((o, i)) * (scale / np.sqrt(i))

    def norm():
        return 1 + 0.1 * rng.standard_normal(h)

    w = {"model.embed_tokens.weight": rng.standard_normal((v, h)),
         "model.norm.weight": norm(),
         # Scaled up so that the next token is rarely a near tie.
         "lm_head.weight": lin(v, h, 4.0)}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        w[p + "self_attn.q_proj.weight"] = lin(h, h)
        w[p + "self_attn.k_proj.weight"] = lin(kv, h)
        w[p + "self_attn.v_proj.weight"] = lin(kv, h)
        w[p + "self_attn.o_proj.weight"] = lin(h, h)
        w[p + "mlp.gate_proj.weight"] = lin(inter, h)
        w[p + "mlp.up_proj.weight"] = lin(inter, h)
        w[p + "mlp.down_proj.weight"] = lin(h, inter)
        w[p + "input_layernorm.weight"] = norm()
        w[p + "post_attention_layernorm.weight"] = norm()
    return w


def _write_model(path, cfg, weights, tokenizer):
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    _save_safetensors(os.path.join(path, "model.safetensors"), weights)
    tokenizer.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast",
                   "bos_token": "<s>", "eos_token": "</s>",
                   "model_max_length": 2048}, f)


def _train_tokenizer(vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    assert tok.get_vocab_size() <= vocab_size
    return tok


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A directory with model/ (the Llama model), draft/ (its first layer
    alone, for speculative decoding) and data/ (a tiny LoRA dataset)."""
    root = tmp_path_factory.mktemp("mlx_lm")
    tok = _train_tokenizer(CONFIG["vocab_size"])
    weights = _weights(CONFIG, np.random.default_rng(0))
    _write_model(root / "model", CONFIG, weights, tok)
    draft_cfg = dict(CONFIG, num_hidden_layers=1)
    _write_model(root / "draft", draft_cfg,
                 {k: v for k, v in weights.items() if ".layers.1." not in k}, tok)
    os.makedirs(root / "data")
    for name, rows in (("train", CORPUS[:24:2]), ("valid", CORPUS[1:9:2])):
        with open(root / "data" / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in rows)
    return root


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", COLUMNS="160")
    return env


def _run(args, on_kiln, cwd):
    """Runs python [-m kiln.mlx] args; returns stdout (ANSI colours
    removed); fails with stderr's tail when the program fails."""
    cmd = [sys.executable] + (["-m", "kiln.mlx"] if on_kiln else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(),
                       cwd=cwd, timeout=TIMEOUT)
    who = "kiln" if on_kiln else "mlx"
    assert r.returncode == 0, f"{who}: {' '.join(map(str, args))}\n{r.stderr[-6000:]}"
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", r.stdout)


def _both(args, cwd):
    return _run(args, True, cwd), _run(args, False, cwd)


def _generated(stdout):
    """The text mlx_lm generate prints between its ===== rules, and its
    prompt and generation token counts."""
    parts = stdout.split("==========\n")
    assert len(parts) >= 3, stdout
    counts = re.findall(r"^(Prompt|Generation): (\d+) tokens", stdout, re.M)
    return parts[1], counts


# ---- mlx_lm generate


@pytest.mark.parametrize("extra", [
    [],
    ["--max-kv-size", "12"],                         # rotating KV cache
    ["--kv-bits", "4", "--kv-group-size", "16"],     # quantized KV cache
], ids=["plain", "rotating-cache", "quantized-cache"])
def test_generate_greedy_matches_mlx(work, extra):
    args = ["-m", "mlx_lm", "generate", "--model", str(work / "model"),
            "--prompt", "the quick brown fox", "--max-tokens", "32",
            "--temp", "0", *extra]
    k, m = (_generated(out) for out in _both(args, work))
    assert k == m
    assert len(k[0]) > 10 and k[1][1] == ("Generation", "32")


def test_categorical_of_one_distribution_draws_as_mlx():
    """A sampler's single prompt: MLX 0.32.1+ draws by inverse CDF, and so
    must kiln for a seeded generation to match."""
    import kiln.core as kc

    logits = np.log(np.linspace(1, 2, 16, dtype=np.float32))[None]
    keys = range(8)
    k = [kc.random.categorical(kc.array(logits), key=kc.random.key(s)).item() for s in keys]
    m = [mx.random.categorical(mx.array(logits), key=mx.random.key(s)).item() for s in keys]
    assert k == m
    for shape in [(7,), (3, 4)]:
        k = kc.random.categorical(kc.array(logits[0]), shape=shape, key=kc.random.key(5))
        m = mx.random.categorical(mx.array(logits[0]), shape=shape, key=mx.random.key(5))
        assert np.array(k).tolist() == np.array(m).tolist()


def test_generate_sampled_with_seed_matches_mlx(work):
    args = ["-m", "mlx_lm", "generate", "--model", str(work / "model"),
            "--prompt", "the quick brown fox", "--max-tokens", "32",
            "--temp", "0.8", "--top-p", "0.95", "--seed", "3"]
    k, m = (_generated(out) for out in _both(args, work))
    assert k == m


# ---- the Python API: stream_generate, batch_generate, prompt caches,
# speculative decoding; one program per backend, one JSON section per test.

API_PROGRAM = textwrap.dedent(
    """
    import json, sys, traceback

    import mlx.core as mx
    from mlx_lm import batch_generate, load, stream_generate
    from mlx_lm.models.cache import (load_prompt_cache, make_prompt_cache,
                                     save_prompt_cache, trim_prompt_cache)
    from mlx_lm.sample_utils import make_sampler

    model_dir, draft_dir, out_dir = sys.argv[1:4]
    model, tok = load(model_dir)
    greedy = make_sampler(temp=0.0)
    results = {"backend": mx.__name__}
    PROMPTS = ["hello world, kiln", "the lazy dog 12 jumps over", "fox"]


    def run(prompt, n, **kw):
        toks, lps, text = [], [], ""
        for r in stream_generate(model, tok, prompt, max_tokens=n,
                                 sampler=kw.pop("sampler", greedy), **kw):
            toks.append(r.token)
            lps.append(r.logprobs[r.token].item())
            text += r.text
        return toks, lps, text, r


    def section(fn):
        try:
            results[fn.__name__] = fn()
        except Exception:
            results[fn.__name__] = {"error": traceback.format_exc()}


    @section
    def stream():
        toks, lps, text, last = run("the quick brown fox", 24)
        return {"tokens": toks, "logprobs": lps, "text": text,
                "prompt_tokens": last.prompt_tokens,
                "finish_reason": last.finish_reason}


    @section
    def batch():
        prompts = [tok.encode(p) for p in PROMPTS]
        n = [10, 6, 8]
        out = batch_generate(model, tok, prompts, max_tokens=n, sampler=greedy,
                             return_token_ids=True, return_logprobs=True)
        return {"texts": out.texts, "tokens": out.token_ids,
                "logprobs": out.logprobs,
                "single": [run(p, k)[0] for p, k in zip(prompts, n)]}


    @section
    def batch_sampled():
        mx.random.seed(7)
        out = batch_generate(model, tok, [tok.encode(p) for p in PROMPTS],
                             max_tokens=8, sampler=make_sampler(temp=0.9),
                             return_token_ids=True)
        return {"tokens": out.token_ids}


    @section
    def prompt_cache():
        a_prompt = tok.encode("the quick brown fox")
        b_prompt = tok.encode(" jumps over the lazy")
        c_prompt = tok.encode(" dog 7")
        cache = make_prompt_cache(model)
        a = run(a_prompt, 6, prompt_cache=cache)[0]
        b = run(b_prompt, 6, prompt_cache=cache)[0]
        offset = cache[0].offset
        # The cache holds both prompts and every token generated.
        full = run(a_prompt + a + b_prompt, 6)[0]
        path = out_dir + "/prompt_cache.safetensors"
        save_prompt_cache(path, cache, {"who": "test"})
        c = run(c_prompt, 6, prompt_cache=cache)[0]
        loaded, meta = load_prompt_cache(path, return_metadata=True)
        c_loaded = run(c_prompt, 6, prompt_cache=loaded)[0]
        trim_prompt_cache(loaded, len(c_prompt) + 6)
        c_trimmed = run(c_prompt, 6, prompt_cache=loaded)[0]
        return {"a": a, "b": b, "offset": offset, "full": full, "c": c,
                "c_loaded": c_loaded, "c_trimmed": c_trimmed, "meta": meta}


    @section
    def speculative():
        draft = load(draft_dir)[0]
        toks, drafted = [], []
        for r in stream_generate(model, tok, "the quick brown fox",
                                 max_tokens=16, sampler=greedy,
                                 draft_model=draft, num_draft_tokens=3):
            toks.append(r.token)
            drafted.append(bool(r.from_draft))
        return {"tokens": toks, "from_draft": drafted,
                "plain": run("the quick brown fox", 16)[0]}


    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def api(work):
    """{"kiln": sections, "mlx": sections} from API_PROGRAM's runs."""
    (work / "api.py").write_text(API_PROGRAM)
    out = {}
    for who in ("kiln", "mlx"):
        os.makedirs(work / f"api_{who}", exist_ok=True)
        stdout = _run(["api.py", str(work / "model"), str(work / "draft"),
                       str(work / f"api_{who}")], who == "kiln", work)
        out[who] = json.loads(stdout.strip().splitlines()[-1])
    assert out["kiln"]["backend"] == "kiln.core", out["kiln"]["backend"]
    assert out["mlx"]["backend"] == "mlx.core", out["mlx"]["backend"]
    return out


def _section(api, name):
    k, m = api["kiln"][name], api["mlx"][name]
    assert "error" not in m, "mlx: " + m["error"]
    assert "error" not in k, "kiln: " + k["error"]
    return k, m


# Log-probabilities of float32 models agree to a few float32 ulps of the
# logits (|logit| < 30 here): the two libraries sum the matmuls and softmax
# in different orders.
LOGPROB_ATOL = 1e-4


def test_stream_generate(api):
    k, m = _section(api, "stream")
    assert k["tokens"] == m["tokens"] and len(k["tokens"]) == 24
    assert k["text"] == m["text"]
    assert (k["prompt_tokens"], k["finish_reason"]) == (m["prompt_tokens"], m["finish_reason"])
    np.testing.assert_allclose(k["logprobs"], m["logprobs"], atol=LOGPROB_ATOL)


def test_batch_generate(api):
    k, m = _section(api, "batch")
    assert k["tokens"] == m["tokens"] and k["texts"] == m["texts"]
    # Left-padded batching gives each prompt what it gives alone.
    assert k["tokens"] == k["single"]
    for a, b in zip(k["logprobs"], m["logprobs"]):
        np.testing.assert_allclose(a, b, atol=LOGPROB_ATOL)


def test_batch_generate_sampled_with_seed(api):
    k, m = _section(api, "batch_sampled")
    assert k["tokens"] == m["tokens"]


def test_prompt_cache_reuse_save_load_trim(api):
    k, m = _section(api, "prompt_cache")
    assert k == m
    assert k["meta"] == {"who": "test"}
    assert k["full"] == k["b"]  # reusing the cache = running the whole prompt
    assert k["c_loaded"] == k["c"] and k["c_trimmed"] == k["c"]


def test_speculative_decoding(api):
    k, m = _section(api, "speculative")
    assert k == m
    assert k["tokens"] == k["plain"]  # greedy drafts never change the output
    assert any(k["from_draft"]) and not all(k["from_draft"])


def _load_mlx(path):
    """A safetensors file read by real MLX, as NumPy arrays."""
    return {n: np.array(a.view(mx.uint16) if a.dtype == mx.bfloat16 else a)
            for n, a in mx.load(str(path)).items()}


def test_prompt_cache_files_cross_load(work):
    """mlx_lm cache_prompt under one library, generate from its file under
    the other."""
    files = {}
    for who in ("kiln", "mlx"):
        files[who] = work / f"cache_{who}.safetensors"
        _run(["-m", "mlx_lm", "cache_prompt", "--model", str(work / "model"),
              "--prompt", "hello world, the lazy dog",
              "--prompt-cache-file", str(files[who])], who == "kiln", work)
    a, b = _load_mlx(files["kiln"]), _load_mlx(files["mlx"])
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-5, err_msg=name)
    outs = set()
    for source in files.values():
        args = ["-m", "mlx_lm", "generate", "--model", str(work / "model"),
                "--prompt-cache-file", str(source), "--prompt", " jumps over",
                "--max-tokens", "20", "--temp", "0"]
        outs.update(_generated(out)[0] for out in _both(args, work))
    assert len(outs) == 1, outs


# ---- mlx_lm convert -q


def test_convert_quantize_files_and_outputs_match(work):
    out = {}
    for who in ("kiln", "mlx"):
        out[who] = work / f"q4_{who}"
        _run(["-m", "mlx_lm", "convert", "--hf-path", str(work / "model"),
              "--mlx-path", str(out[who]), "-q", "--q-bits", "4",
              "--q-group-size", "64"], who == "kiln", work)
    configs = [json.loads((out[w] / "config.json").read_text()) for w in out]
    assert configs[0] == configs[1]
    assert configs[0]["quantization"]["bits"] == 4
    # kiln's quantized weights, scales and biases are MLX's, bit for bit.
    a, b = _load_mlx(out["kiln"] / "model.safetensors"), _load_mlx(out["mlx"] / "model.safetensors")
    assert sorted(a) == sorted(b)
    assert any(n.endswith(".scales") for n in a)
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name
    # Each library generates the same from either library's files.
    texts = {}
    for source in ("kiln", "mlx"):
        args = ["-m", "mlx_lm", "generate", "--model", str(out[source]),
                "--prompt", "the quick brown fox", "--max-tokens", "24", "--temp", "0"]
        k, m = _both(args, work)
        texts[("kiln", source)], texts[("mlx", source)] = _generated(k)[0], _generated(m)[0]
    assert len(set(texts.values())) == 1, texts


# ---- mlx_lm lora

# The losses printed for each report and validation, e.g. "  3  2.707 ▼ ..."
# and "  4  val 10.768  0.01s".
_LOSS = re.compile(r"^\s*(\d+)\s+(val\s+)?(-?\d+\.\d+)", re.M)


def test_lora_losses_and_adapters_match(work):
    losses, adapters = {}, {}
    for who in ("kiln", "mlx"):
        adapters[who] = work / f"adapters_{who}"
        out = _run(["-m", "mlx_lm", "lora", "--model", str(work / "model"),
                    "--train", "--data", str(work / "data"), "--iters", "8",
                    "--batch-size", "4", "--num-layers", "-1",
                    "--learning-rate", "1e-3", "--steps-per-report", "1",
                    "--steps-per-eval", "4", "--val-batches", "1",
                    "--grad-checkpoint", "--seed", "0",
                    "--adapter-path", str(adapters[who])], who == "kiln", work)
        losses[who] = [(int(i), bool(v), float(x)) for i, v, x in _LOSS.findall(out)]
    k, m = losses["kiln"], losses["mlx"]
    assert len(m) == 8 + 3, m  # 8 training reports, validation at 1, 4, 8
    assert [x[:2] for x in k] == [x[:2] for x in m]
    # Printed to 3 decimals; float32 runs that differ in summation order
    # differ by far less than that, so one unit in the last place (plus the
    # printed rounding) bounds them. The loss falls: training happened.
    np.testing.assert_allclose([x[2] for x in k], [x[2] for x in m], atol=1.5e-3)
    assert m[-1][2] < m[1][2] - 1
    # Adapter weights after 8 Adam steps (lr 1e-3, LoRA init from the same
    # seed): each step moves a weight by at most ~lr, and float32 gradient
    # differences of ~1e-6 relative shift those moves by far less than 1e-5.
    # A gradient that cancels to near zero is the exception: Adam's step is
    # then its sign times ~lr, so a handful of weights may differ by up to
    # a few lr-sized steps' fraction (seen: 1 of 512 by 7e-5 on AVX-512).
    a = _load_mlx(adapters["kiln"] / "adapters.safetensors")
    b = _load_mlx(adapters["mlx"] / "adapters.safetensors")
    assert sorted(a) == sorted(b) and len(a) == 2 * 7 * CONFIG["num_hidden_layers"]
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-4, atol=1e-3, err_msg=name)
        far = np.abs(a[name] - b[name]) > 1e-5 + 1e-4 * np.abs(b[name])
        assert far.mean() <= 0.01, (name, int(far.sum()), far.size)
    # Generation with the adapters: the same text under both.
    texts = set()
    for source in ("kiln", "mlx"):
        args = ["-m", "mlx_lm", "generate", "--model", str(work / "model"),
                "--adapter-path", str(adapters[source]), "--prompt", "the quick",
                "--max-tokens", "16", "--temp", "0"]
        texts.update(_generated(out)[0] for out in _both(args, work))
    assert len(texts) == 1, texts
