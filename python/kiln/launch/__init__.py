"""Start a program as a group of processes (``python -m kiln.launch``).

    python -m kiln.launch -n 2 train.py --lr 1e-3
    python -m kiln.launch -n 4 --hosts h1,h2 -m my.module args

The processes are started by OpenMPI's ``mpirun``, on this host or on the
hosts named (MPI is kiln's only multi-process backend so far). Every line
a process prints is prefixed with its rank; a process that fails ends the
job, and the launcher exits with its code.
"""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys

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
    if args.backend != "mpi":
        raise SystemExit("kiln.launch: kiln has no NCCL backend yet; --backend mpi is the one there is")
    return _run_mpi(args, env)
