"""Start a program as a group of processes (``python -m kiln.launch``).

    python -m kiln.launch -n 2 train.py --lr 1e-3
    python -m kiln.launch -n 4 --hosts h1,h2 train.py
    python -m kiln.launch -n 2 --backend nccl -m my.module args

With the MPI backend (the default) the processes are started by OpenMPI's
``mpirun``, on this host or on the hosts named; with ``--backend nccl``
this launcher starts them on this host, one GPU each (the local rank picks
it), and gives them the rendezvous NCCL needs. Every line a process prints
is prefixed with its rank; a process that fails ends the job, and the
launcher exits with its code.
"""

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading

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


def _pump(stream, out, prefix, lock):
    for line in iter(stream.readline, b""):
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


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


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_local(args, env):
    """The processes of an NCCL group on this host: ranks in the
    environment, one GPU each, a rendezvous address for the NCCL id."""
    if args.hosts or args.hostfile:
        raise SystemExit("kiln.launch: --backend nccl starts processes on this host only; "
                         "use mpirun to start them on several hosts (the NCCL id then travels over MPI)")
    n = args.n_proc
    env = dict(env)
    env["KILN_WORLD_SIZE"] = str(n)
    env["KILN_DISTRIBUTED_BACKEND"] = "nccl"
    env.setdefault("KILN_NCCL_RENDEZVOUS", f"127.0.0.1:{_free_port()}")
    procs, pumps = [], []
    lock = threading.Lock()
    for r in range(n):
        e = dict(env, KILN_RANK=str(r), KILN_LOCAL_RANK=str(r))
        p = subprocess.Popen([args.python] + _program(args), env=e, cwd=args.cwd,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        pre = b"" if args.no_prefix else f"[{r}] ".encode()
        for s, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
            t = threading.Thread(target=_pump, args=(s, out, pre, lock), daemon=True)
            t.start()
            pumps.append(t)
    rc = 0
    try:
        alive = set(range(n))
        while alive:
            for r in list(alive):
                code = procs[r].poll()
                if code is None:
                    continue
                alive.discard(r)
                if code != 0 and rc == 0:
                    rc = code if code > 0 else 128 - code
                    with lock:
                        sys.stderr.write(f"kiln.launch: rank {r} exited with code {code}; ending the job\n")
                    for q in procs:
                        if q.poll() is None:
                            q.terminate()
            if alive:
                try:
                    procs[next(iter(alive))].wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
    except KeyboardInterrupt:
        for q in procs:
            if q.poll() is None:
                q.send_signal(signal.SIGINT)
        rc = 130
    for t in pumps:
        t.join(timeout=5)
    return rc


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
    run = _run_mpi if args.backend == "mpi" else _run_local
    return run(args, env)
