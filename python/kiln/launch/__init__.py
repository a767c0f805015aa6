"""Start a program as a group of processes (``python -m kiln.launch``).

    python -m kiln.launch -n 2 train.py --lr 1e-3
    python -m kiln.launch -n 4 --hosts h1,h2 -m my.module args

    python -m kiln.launch -n 2 --backend nccl train.py     # one GPU each

With ``--backend mpi`` (the default) OpenMPI's ``mpirun`` starts the
processes, on this host or on the hosts named. With ``--backend nccl`` the
launcher starts them itself on this host, one GPU per process (its local
rank), and they exchange NCCL's id through a file in a private temporary
folder; with ``--hosts`` mpirun starts them and MPI carries the id. Every
line a process prints is prefixed with its rank; a process that fails ends
the job, and the launcher exits with its code.
"""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

__all__ = ["main"]


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m kiln.launch",
        description="Run a program as a group of processes for kiln.core.distributed.")
    p.add_argument("-n", "--n-proc", type=int, default=1, help="number of processes (in all)")
    p.add_argument("--hosts", default=None, help="comma-separated hosts (MPI); default: this host")
    p.add_argument("--hostfile", default=None, help="an MPI hostfile (instead of --hosts)")
    p.add_argument("--backend", choices=("mpi", "nccl"), default="mpi")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="set in every process's environment (repeatable)")
    p.add_argument("--cwd", default=None, help="working directory of the processes")
    p.add_argument("--python", default=sys.executable, help="the Python the processes run")
    p.add_argument("--mpi-arg", action="append", default=[], help="extra argument for mpirun (repeatable)")
    p.add_argument("--no-prefix", action="store_true", help="print the processes' output as it is")
    p.add_argument("--verbose", action="store_true", help="print the command that starts the processes")
    p.add_argument("-m", dest="module", default=None, help="run a module (as python -m)")
    p.add_argument("program", nargs=argparse.REMAINDER, help="script.py and its arguments")
    return p


def _env_pairs(items):
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"kiln.launch: --env takes KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def _program(args):
    if args.module:
        return ["-m", args.module] + args.program
    if not args.program:
        raise SystemExit("kiln.launch: name a script (or -m module) to run")
    return args.program


def _run_mpi(args, env):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("kiln.launch: mpirun not found; install OpenMPI (Debian: openmpi-bin libopenmpi-dev)")
    cmd = [mpirun, "-np", str(args.n_proc)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if args.hosts:
        # Slots per host: the processes spread evenly.
        hosts = args.hosts.split(",")
        per = -(-args.n_proc // len(hosts))
        cmd += ["--host", ",".join(f"{h}:{per}" for h in hosts)]
    elif args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    else:
        cmd.append("--oversubscribe")  # more processes than cores is fine here
    if args.cwd:
        cmd += ["--wdir", args.cwd]
    # Forward what a remote process needs to find kiln and the settings.
    forward = set(_env_pairs(args.env))
    forward |= {k for k in env if k.startswith("KILN_") or k in ("PYTHONPATH", "LD_LIBRARY_PATH", "PATH")}
    for k in sorted(forward):
        cmd += ["-x", k]
    cmd += args.mpi_arg
    if not args.no_prefix:
        cmd += [args.python, "-m", "kiln.launch._prefix"]
    cmd += [args.python] + _program(args)
    if args.verbose:
        print("kiln.launch:", shlex.join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        return proc.wait()


def _run_local(args, env):
    """N processes on this host with the launcher's rank variables; the
    first to fail ends the others."""
    from ._prefix import pump

    n = args.n_proc
    folder = tempfile.mkdtemp(prefix="kiln-launch-")
    procs, threads = [], []
    lock = threading.Lock()
    try:
        for rank in range(n):
            e = dict(env)
            e.update(KILN_RANK=str(rank), KILN_WORLD_SIZE=str(n), KILN_LOCAL_RANK=str(rank),
                     KILN_LOCAL_WORLD_SIZE=str(n), KILN_BACKEND=args.backend,
                     KILN_RENDEZVOUS_FILE=os.path.join(folder, "rendezvous"))
            cmd = [args.python] + _program(args)
            if args.verbose and rank == 0:
                print("kiln.launch:", shlex.join(cmd), f"(x{n})", file=sys.stderr)
            pipe = None if args.no_prefix else subprocess.PIPE
            p = subprocess.Popen(cmd, env=e, cwd=args.cwd, stdout=pipe, stderr=pipe)
            procs.append(p)
            if pipe is not None:
                prefix = f"[{rank}] ".encode()
                for src, dst in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                    t = threading.Thread(target=pump, args=(src, dst, prefix, lock), daemon=True)
                    t.start()
                    threads.append(t)
        rc = 0
        try:
            while True:
                codes = [p.poll() for p in procs]
                failed = [c for c in codes if c not in (None, 0)]
                if failed:
                    rc = failed[0]
                    break
                if all(c == 0 for c in codes):
                    break
                time.sleep(0.05)
        except KeyboardInterrupt:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
            rc = 130
        _stop(procs)
        for t in threads:
            t.join(timeout=5)
        return rc if rc >= 0 else 128 - rc
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stop(procs):
    """Ends the processes still running: SIGTERM, then SIGKILL after 5 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.n_proc < 1:
        raise SystemExit("kiln.launch: -n must be at least 1")
    # A launcher started from inside an MPI process (an MPI singleton, for
    # one) must not hand that process's MPI identity to the new job.
    # Outside MPI, OMPI_MCA_* and PMIX_MCA_* are the user's settings and stay.
    inside = "OMPI_COMM_WORLD_SIZE" in os.environ or "PMIX_RANK" in os.environ
    env = {k: v for k, v in os.environ.items()
           if not (inside and k.startswith(("OMPI_", "PMIX_", "OPAL_")))}
    env.update(_env_pairs(args.env))
    env["KILN_BACKEND"] = args.backend
    if args.backend == "nccl" and not (args.hosts or args.hostfile):
        return _run_local(args, env)
    return _run_mpi(args, env)
