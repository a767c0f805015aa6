"""The JIT and AOT builds' gpu_bench.py tables side by side (scripts/gpu-check
compare): each workload's kiln figure in both, and the AOT figure over the
JIT one for the first number of each (times: above 1 means the JIT build is
faster; rates such as TB/s or TFLOP/s: above 1 means the AOT build is)."""

import json
import re
import sys


def first_number(text):
    m = re.search(r"[-+]?\d+(\.\d+)?(e[-+]?\d+)?", text)
    return float(m.group(0)) if m else None


def workload_key(name):
    """A row's name without the measured figures some names carry, such as
    "(3.71 TB/s)" or "(219 TFLOP/s)", so the two builds' rows meet."""
    return re.sub(r"\s*\([^()]*\d[^()]*(TB/s|TFLOP/s)\)", "", name)


def main(jit_path, aot_path):
    with open(jit_path) as f:
        jit = {r[0]: r[1] for r in json.load(f)}
    with open(aot_path) as f:
        aot = {workload_key(r[0]): r[1] for r in json.load(f)}
    print("| workload | JIT build | AOT build | AOT / JIT |")
    print("| --- | --- | --- | --- |")
    for name, j in jit.items():
        a = aot.get(workload_key(name), "n/a")
        nj, na = first_number(j), first_number(a)
        ratio = f"{na / nj:.3f}" if nj and na else "n/a"
        print(f"| {name} | {j} | {a} | {ratio} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: compare_variants.py JIT.json AOT.json")
    main(sys.argv[1], sys.argv[2])
