"""Runs a folder of MLX's own Python test files (python/tests of MLX's
repository, kept outside this repository) on kiln through the mlx alias,
and on real MLX when it is installed, one file per process so that a
crash costs one file. Prints each file's counts side by side and the
totals. MLX's MPI tests (mpi_test_distributed.py) run on kiln alone, in 8
processes of python -m kiln.launch. Exit status: 0, or 1 when any file
ends with kiln passing fewer tests than MLX does (or an MPI test fails)."""

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SKIP = ("mpi_test_distributed.py", "nccl_test_distributed.py",
        "ring_test_distributed.py", "mlx_distributed_tests.py")


def counts(python, args, test_file, env, timeout):
    """(passed, failed, skipped, note) of one test file under pytest."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "r.xml")
        cmd = [python, *args, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--junitxml={xml}", os.path.basename(test_file)]
        try:
            r = subprocess.run(cmd, cwd=os.path.dirname(test_file), env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 0, 0, 0, f"timed out after {timeout} s"
        if not os.path.exists(xml):
            tail = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
            return 0, 0, 0, f"exit {r.returncode}: {tail[0][:80]}"
        suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        total = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        note = "" if r.returncode in (0, 1) else f"exit {r.returncode}"
        return total - failed - skipped, failed, skipped, note


def distributed_counts(python, test_dir, kiln_path, env, timeout):
    """MLX's MPI tests (mpi_test_distributed.py, written for 8 processes)
    on kiln: 8 processes of python -m kiln.launch, each with the mlx alias
    on its path. (passed, failed, note); None when the file is absent."""
    test = os.path.join(test_dir, "mpi_test_distributed.py")
    if not os.path.exists(test):
        return None
    shim = subprocess.run([python, "-m", "kiln.mlx", "--path"], env=env,
                          capture_output=True, text=True).stdout.strip()
    e = dict(env)
    e["PYTHONPATH"] = os.pathsep.join([shim, os.path.abspath(kiln_path)])
    try:
        r = subprocess.run([python, "-m", "kiln.launch", "-n", "8", test],
                           cwd=test_dir, env=e, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return 0, 0, f"timed out after {timeout} s"
    out = r.stdout + r.stderr
    ran = [line for line in out.splitlines() if line.startswith("[0] Ran ")]
    if not ran:
        return 0, 0, f"exit {r.returncode}"
    total = int(ran[-1].split()[2])
    failed = 0
    for line in out.splitlines():
        if line.startswith("[0] FAILED ("):
            for part in line[len("[0] FAILED ("):-1].split(", "):
                if part.split("=")[0] in ("failures", "errors"):
                    failed += int(part.split("=")[1])
    return total - failed, failed, "" if r.returncode == 0 else f"exit {r.returncode}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir", help="folder of MLX's test_*.py and mlx_tests.py")
    ap.add_argument("--kiln-path", default="build/python",
                    help="where kiln is importable from (default build/python)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("-k", "--only", default="",
                    help="run only files whose name contains this")
    a = ap.parse_args()
    tests = sorted(
        os.path.join(os.path.abspath(a.dir), f) for f in os.listdir(a.dir)
        if f.startswith("test_") and f.endswith(".py") and f not in SKIP
        and a.only in f)
    if not tests:
        sys.exit(f"mlx-suite: no test_*.py files in {a.dir}")
    env = dict(os.environ)
    kiln_env = dict(env)
    kiln_env["PYTHONPATH"] = os.pathsep.join(
        p for p in [os.path.abspath(a.kiln_path), env.get("PYTHONPATH", "")] if p)
    has_mlx = subprocess.run([sys.executable, "-c", "import mlx.core"],
                             capture_output=True).returncode == 0
    print(f"{'file':28} {'kiln pass/fail/skip':>22} {'mlx pass/fail/skip':>22}")
    tk, tm, worse = [0, 0, 0], [0, 0, 0], []
    for t in tests:
        k = counts(sys.executable, ["-m", "kiln.mlx"], t, kiln_env, a.timeout)
        m = counts(sys.executable, [], t, env, a.timeout) if has_mlx else None
        for i in range(3):
            tk[i] += k[i]
            if m:
                tm[i] += m[i]
        ks = "{}/{}/{}".format(*k[:3]) + (f" ({k[3]})" if k[3] else "")
        ms = ("{}/{}/{}".format(*m[:3]) + (f" ({m[3]})" if m[3] else "")) if m else "-"
        print(f"{os.path.basename(t):28} {ks:>22} {ms:>22}", flush=True)
        if m and k[0] < m[0]:
            worse.append(os.path.basename(t))
    d = None if a.only else distributed_counts(
        sys.executable, os.path.abspath(a.dir), a.kiln_path, kiln_env, a.timeout)
    if d:
        ds = f"{d[0]}/{d[1]}/0" + (f" ({d[2]})" if d[2] else "")
        print(f"{'mpi_test_distributed.py (8)':28} {ds:>22} {'-':>22}")
        if d[1] or d[2]:
            worse.append("mpi_test_distributed.py")
    print(f"{'total':28} {'{}/{}/{}'.format(*tk):>22} "
          f"{('{}/{}/{}'.format(*tm) if has_mlx else '-'):>22}")
    print(f"mlx-suite: kiln passed {tk[0]}" +
          (f", MLX passed {tm[0]}" if has_mlx else " (MLX not installed)"))
    if worse:
        print("mlx-suite: kiln passes fewer than MLX in: " + ", ".join(worse))
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
