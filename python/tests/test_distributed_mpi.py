"""kiln.core.distributed over MPI: groups of 2 and 3 processes on this host
started by python -m kiln.launch, every op and dtype against NumPy over all
ranks' inputs (distributed/checks.py), gradients through the collectives,
bad input, and processes that die or never arrive."""

import os
import subprocess
import sys
import time

import pytest

import kiln.core as kc
from conftest import needs_open_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = os.path.join(HERE, "distributed", "checks.py")

pytestmark = needs_open_mpi


def launch(n, *checks, env=None, timeout=240):
    e = dict(os.environ)
    e.update(env or {})
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kiln.launch", "-n", str(n), CHECKS, *checks],
                       capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - start


ALL = ["reductions", "exchanges", "gather_scatter", "large", "grads", "send_recv", "bad_input", "average_gradients"]


@pytest.mark.parametrize("n", [2, 3])
def test_every_op_against_numpy(n):
    rc, out, _ = launch(n, *ALL)
    assert rc == 0, out
    for r in range(n):
        for c in ALL:
            assert f"[{r}] ok {c}" in out, out


def test_a_late_peer_is_an_error_naming_the_op():
    rc, out, took = launch(2, "timeout", env={"KILN_DISTRIBUTED_TIMEOUT": "2"})
    assert rc != 0
    assert "[0] [all_sum] rank 0 of 2 waited 2 s for the group (KILN_DISTRIBUTED_TIMEOUT)" in out, out
    # The failing process ends the job: nobody waits for the sleeper.
    assert took < 25, (took, out)


def test_a_late_sender_is_an_error_naming_the_peer():
    rc, out, took = launch(2, "recv_timeout", env={"KILN_DISTRIBUTED_TIMEOUT": "2"})
    assert rc != 0
    assert "[0] [recv] rank 0 of 2 waited 2 s for rank 1 (KILN_DISTRIBUTED_TIMEOUT)" in out, out
    assert took < 25, (took, out)


def test_a_peer_that_dies_ends_the_job_with_its_code():
    rc, out, took = launch(2, "peer_dies")
    assert rc == 7, out
    assert took < 25, (took, out)


def test_launcher_prefixes_ranks_and_passes_arguments(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import sys, kiln.core as kc\n"
                      "g = kc.distributed.init()\n"
                      "print('hello', g.rank(), g.size(), sys.argv[1:])\n")
    p = subprocess.run([sys.executable, "-m", "kiln.launch", "-n", "2", str(script), "a", "--b"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.splitlines())
    assert lines == ["[0] hello 0 2 ['a', '--b']", "[1] hello 1 2 ['a', '--b']"], p.stdout
