#!/usr/bin/env python3
"""Writes COVERAGE.md: every public name of MLX's Python modules, and
whether kiln has it with the same signature.

For each module pair (mlx.core and kiln.core, mlx.nn and kiln.nn, ...) and
each public class's methods (mlx.core.array, nn.Module, optim.Optimizer), a
name is "ok" when kiln has it and, for callables, the parameters agree in
name, kind (positional-only, keyword-only, *args) and default; "differs" when
the signatures disagree; "missing" otherwise. Type annotations are not
compared (kiln spells its array-like parameters differently).

Usage: PYTHONPATH=<build>/python python3 scripts/coverage.py [--out COVERAGE.md] [--check]
Needs the mlx package (pip install mlx[cpu]). --check exits 1 if any name
outside the deferred families is missing or differs.
"""

import argparse
import importlib
import inspect
import re
import sys

MODULES = [
    ("mlx.core", "kiln.core"),
    ("mlx.core.fast", "kiln.core.fast"),
    ("mlx.core.random", "kiln.core.random"),
    ("mlx.core.linalg", "kiln.core.linalg"),
    ("mlx.core.fft", "kiln.core.fft"),
    ("mlx.core.distributed", "kiln.core.distributed"),
    ("mlx.nn", "kiln.nn"),
    ("mlx.nn.init", "kiln.nn.init"),
    ("mlx.nn.losses", "kiln.nn.losses"),
    ("mlx.nn.utils", "kiln.nn.utils"),
    ("mlx.optimizers", "kiln.optimizers"),
    ("mlx.utils", "kiln.utils"),
]
CLASSES = [
    ("mlx.core", "array", "kiln.core", "array"),
    ("mlx.nn", "Module", "kiln.nn", "Module"),
    ("mlx.optimizers", "Optimizer", "kiln.optimizers", "Optimizer"),
]

# Families left out on purpose so far (none: quantization is there in every
# mode, with gather_qmm, qqmm and the fp8 conversions, and function export).
DEFERRED = re.compile(r"(?!)")
# Names that are imports inside MLX's Python modules, not its API.
NOT_API = {
    "Any", "Callable", "List", "Literal", "Optional", "Tuple", "Union",
    "get_args", "math", "mx", "partial", "reduce", "wraps", "tree_flatten",
    "tree_map", "tree_reduce", "tree_unflatten", "tree_merge", "Module",
    "Reduction", "defaultdict", "OrderedDict", "nn", "np", "annotations",
    "Dict", "zip_longest",
}


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


def split_top(text):
    """Split a parameter list on commas outside brackets and quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def norm_default(text):
    text = text.strip()
    text = re.sub(r"\b(mlx\.core|kiln\.core|mx|kc)\.", "", text)
    text = text.replace("Dtype.", "").replace("DeviceType.", "")
    text = text.replace('"', "'")
    if text in ("()", "[]"):
        return "[]"
    return text


def nb_params(fn):
    """(name, kind, default) triples from a nanobind function's signature."""
    sig = getattr(fn, "__nb_signature__", None)
    if not sig:
        return None
    text, _, defaults = sig[0]
    m = re.match(r"def [^(]*\((.*)\)(\s*->.*)?$", text, re.S)
    if not m:
        return None
    out, kind = [], "pos"
    for p in split_top(m.group(1)):
        if p == "/":
            out = [(n, "posonly", d) for n, _, d in out]
            continue
        if p == "*":
            kind = "kwonly"
            continue
        if p.startswith("**"):
            out.append(("**" + p[2:].split(":")[0].strip(), "varkw", None))
            continue
        if p.startswith("*"):
            out.append(("*" + p[1:].split(":")[0].strip(), "varpos", None))
            kind = "kwonly"
            continue
        name, _, rest = p.partition(":")
        name = name.split("=")[0].strip()
        default = None
        if " = " in p:
            d = p.split(" = ", 1)[1].strip()
            ph = re.fullmatch(r"\\(\d+)", d)
            default = repr(defaults[int(ph.group(1))]) if ph and defaults else d
            default = norm_default(default)
        out.append((name, kind, default))
    return [p for p in out if p[0] != "self"]


def py_params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "posonly",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
        inspect.Parameter.KEYWORD_ONLY: "kwonly",
        inspect.Parameter.VAR_POSITIONAL: "varpos",
        inspect.Parameter.VAR_KEYWORD: "varkw",
    }
    out = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        name = {"varpos": "*", "varkw": "**"}.get(kinds[p.kind], "") + p.name
        default = None
        if p.default is not inspect.Parameter.empty:
            default = norm_default(repr(p.default))
            if callable(p.default):
                default = "<callable>"
        out.append((name, kinds[p.kind], default))
    return out


def params(obj):
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__")
        if init is None:
            for base in obj.__mro__[1:]:
                if "__init__" in base.__dict__:
                    init = base.__dict__["__init__"]
                    break
        obj = init
        if obj is None or obj is object.__init__:
            return []
    if isinstance(obj, property):
        return None
    return nb_params(obj) if hasattr(obj, "__nb_signature__") else py_params(obj)


def fmt(ps):
    if ps is None:
        return "?"
    parts, star = [], False
    for i, (n, k, d) in enumerate(ps):
        if k == "kwonly" and not star:
            parts.append("*")
        star = star or k in ("kwonly", "varpos")
        parts.append(n + ("=" + d if d is not None else ""))
        if k == "posonly" and (i + 1 == len(ps) or ps[i + 1][1] != "posonly"):
            parts.append("/")
    return "(" + ", ".join(parts) + ")"


def same(mlx_ps, kiln_ps):
    """True when every call MLX accepts is accepted by kiln with the same
    meaning: each MLX parameter exists in kiln at the same position (if MLX
    takes it positionally) and under the same name (if MLX takes it by
    keyword), with the same default; kiln's extra parameters have defaults.
    kiln may accept more (a keyword for an MLX positional-only parameter).
    A forwarding ``(*args, **kwargs)`` (kiln's array methods) matches
    anything; the function it forwards to is checked on its own."""
    if mlx_ps is None or kiln_ps is None:
        return True  # nothing to compare (a property, a constant)
    kinds = [k for _, k, _ in kiln_ps]
    if "varpos" in kinds and "varkw" in kinds and len(kiln_ps) == 2:
        return True
    by_name = {n: (i, k, d) for i, (n, k, d) in enumerate(kiln_ps)}
    used = set()
    for i, (n, k, d) in enumerate(mlx_ps):
        if k in ("varpos", "varkw"):
            if not any(kk == k for _, kk, _ in kiln_ps):
                return False
            continue
        if k == "posonly":
            if i >= len(kiln_ps) or kiln_ps[i][1] not in ("posonly", "pos"):
                return False
            kd = kiln_ps[i][2]
            used.add(kiln_ps[i][0])
        else:
            if n not in by_name:
                return False
            ki, kk, kd = by_name[n]
            if kk not in ("pos", "kwonly") or (k == "pos" and (kk != "pos" or ki != i)):
                return False
            used.add(n)
        if d is not None and kd != d:
            return False
    return all(d is not None or k in ("varpos", "varkw") or n in used for n, k, d in kiln_ps)


def compare(mlx_obj, kiln_obj, names, label, rows):
    for name in names:
        if name in NOT_API:
            continue
        m = getattr(mlx_obj, name)
        if inspect.ismodule(m) and not name in ("random", "linalg", "fast", "init", "losses"):
            continue
        deferred = bool(DEFERRED.search(name))
        if kiln_obj is None or not hasattr(kiln_obj, name):
            rows.append((label, name, "deferred" if deferred else "missing", ""))
            continue
        k = getattr(kiln_obj, name)
        # Operators are called positionally, and ArrayLike is a typing
        # construct: only their existence matters.
        is_dunder = name.startswith("__") or name == "ArrayLike"
        if callable(m) and not inspect.ismodule(m) and not is_dunder:
            pm, pk = params(m), params(k)
            if not same(pm, pk):
                rows.append((label, name, "differs", f"mlx {fmt(pm)} / kiln {fmt(pk)}"))
                continue
        rows.append((label, name, "ok", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="COVERAGE.md")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    import kiln  # noqa: F401  (registers kiln.core submodules)
    import mlx.core

    rows = []
    for mname, kname in MODULES:
        m = importlib.import_module(mname)
        try:
            k = importlib.import_module(kname)
        except ImportError:
            k = None
        compare(m, k, public(m), mname, rows)
    for mmod, mcls, kmod, kcls in CLASSES:
        mc = getattr(importlib.import_module(mmod), mcls)
        try:
            kc = getattr(importlib.import_module(kmod), kcls)
        except (ImportError, AttributeError):
            kc = None
        names = [n for n in dir(mc) if not n.startswith("_") or n in DUNDERS]
        names = [n for n in names if n not in dir(dict) or n in DUNDERS]
        compare(mc, kc, names, f"{mmod}.{mcls}", rows)

    counts = {}
    for _, _, status, _ in rows:
        counts[status] = counts.get(status, 0) + 1
    lines = [
        "# Coverage of MLX's Python API",
        "",
        f"Written by `scripts/coverage.py` against mlx {mlx.core.__version__}. "
        "A name is *ok* when kiln has it with MLX's parameters (names, kinds, "
        "defaults); *differs* when the parameters disagree; *missing* when kiln "
        "lacks it; *deferred* for the families left out on purpose "
        "(function export).",
        "",
        "Totals: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())),
        "",
    ]
    for status in ("missing", "differs", "deferred", "ok"):
        sel = [r for r in rows if r[2] == status]
        if not sel:
            continue
        lines += [f"## {status} ({len(sel)})", ""]
        if status == "ok":
            by_mod = {}
            for mod, name, _, _ in sel:
                by_mod.setdefault(mod, []).append(name)
            for mod, ns in by_mod.items():
                lines += [f"- `{mod}`: " + ", ".join(ns)]
        else:
            for mod, name, _, note in sel:
                lines += [f"- `{mod}.{name}`" + (f": {note}" if note else "")]
        lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"coverage: {', '.join(f'{v} {k}' for k, v in sorted(counts.items()))} -> {args.out}")
    if args.check and (counts.get("missing") or counts.get("differs")):
        return 1
    return 0


DUNDERS = {
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__",
    "__pow__", "__matmul__", "__getitem__", "__setitem__", "__len__",
    "__iter__", "__array__", "__dlpack__", "__call__", "__init__",
}

if __name__ == "__main__":
    sys.exit(main())
