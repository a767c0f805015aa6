"""python -m kiln.launch --backend nccl on this host: the launcher starts
the processes itself with their ranks, a private rendezvous file and one
GPU each; these tests need no GPU (the programs do not form a group, or
form it where one can be formed)."""

import os
import subprocess
import sys
import time

import kiln.core as kc


def launch(tmp_path, n, body, *extra, timeout=120):
    script = tmp_path / "prog.py"
    script.write_text(body)
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kiln.launch", "-n", str(n), "--backend", "nccl",
                        *extra, str(script)],
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - start


def test_every_process_gets_its_rank_and_a_private_rendezvous(tmp_path):
    rc, out, err, _ = launch(tmp_path, 3, (
        "import os\n"
        "e = os.environ\n"
        "f = e['KILN_RENDEZVOUS_FILE']\n"
        "print(e['KILN_RANK'], e['KILN_WORLD_SIZE'], e['KILN_LOCAL_RANK'], e['KILN_BACKEND'],\n"
        "      oct(os.stat(os.path.dirname(f)).st_mode & 0o777), os.path.exists(f))\n"))
    assert rc == 0, err
    lines = sorted(out.splitlines())
    assert lines == [f"[{r}] {r} 3 {r} nccl 0o700 False" for r in range(3)], out


def test_a_failing_process_ends_the_others_with_its_code(tmp_path):
    rc, out, err, took = launch(tmp_path, 3, (
        "import os, sys, time\n"
        "if os.environ['KILN_RANK'] == '1':\n"
        "    raise SystemExit('rank one gives up')\n"
        "time.sleep(60)\n"))
    assert rc == 1, (out, err)
    assert "[1] rank one gives up" in err, err
    assert took < 30, took


def test_the_rendezvous_folder_is_removed(tmp_path):
    rc, out, err, _ = launch(tmp_path, 2, (
        "import os\n"
        "print(os.path.dirname(os.environ['KILN_RENDEZVOUS_FILE']))\n"))
    assert rc == 0, err
    for line in out.splitlines():
        folder = line.split("] ", 1)[1]
        assert not os.path.exists(folder), folder


def test_nccl_init_says_why_it_cannot_form_a_group(tmp_path):
    # Without a GPU (or NCCL) strict init names the reason on every rank;
    # "any" falls back to the singleton group.
    rc, out, err, _ = launch(tmp_path, 2, (
        "import kiln.core as kc\n"
        "g = kc.distributed.init()\n"
        "print('any', g.size())\n"
        "try:\n"
        "    kc.distributed.init(strict=True, backend='nccl')\n"
        "    print('formed')\n"
        "except RuntimeError as e:\n"
        "    print('error', e)\n"))
    assert rc == 0, err
    for r in range(2):
        assert f"[{r}] any 1" in out, out
        assert f"[{r}] error [distributed] Couldn't initialize the 'nccl' backend:" in out, out


def test_nccl_forms_a_group_on_a_gpu(tmp_path):
    if not (kc.distributed.is_available("nccl") and kc.is_available(kc.gpu)):
        import pytest
        pytest.skip("needs a GPU and NCCL")
    rc, out, err, _ = launch(tmp_path, 1, (
        "import kiln.core as kc\n"
        "g = kc.distributed.init(strict=True, backend='nccl')\n"
        "x = kc.arange(6, dtype=kc.float32)\n"
        "print(g.rank(), g.size(), kc.distributed.all_sum(x, group=g).tolist())\n"))
    assert rc == 0, err
    assert "[0] 0 1 [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]" in out, (out, err)
