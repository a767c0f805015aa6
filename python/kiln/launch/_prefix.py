"""Runs one rank's program under mpirun with each line of its output
prefixed by its rank (mpirun's own tags split lines that arrive in
pieces). Exits with the program's code; signals go on to it."""

import contextlib
import os
import signal
import subprocess
import sys
import threading


def pump(src, dst, prefix, lock=None):
    """Copies src's lines to dst, each after prefix (under lock, when
    several pumps share dst)."""
    with_lock = lock if lock is not None else contextlib.nullcontext()
    for line in iter(src.readline, b""):
        with with_lock:
            dst.write(prefix + line)
            dst.flush()
    src.close()


def main():
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK", "?"))
    prefix = f"[{rank}] ".encode()
    proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: proc.send_signal(s))
    threads = [threading.Thread(target=pump, args=(proc.stdout, sys.stdout.buffer, prefix)),
               threading.Thread(target=pump, args=(proc.stderr, sys.stderr.buffer, prefix))]
    for t in threads:
        t.start()
    rc = proc.wait()
    for t in threads:
        t.join()
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
