"""The Python side of kiln.core.distributed: a process of a group that
dies of an uncaught exception ends the whole job (after printing its
traceback), so its peers never wait for it."""

import sys


def install(core):
    dist = core.distributed
    native_init = dist.init
    hooked = []

    def init(strict=False, backend="any", *, all_gather_factory=None):
        if all_gather_factory is not None:
            if backend != "jaccl":
                raise ValueError("[distributed] all_gather_factory applies to the 'jaccl' backend only.")
            if not callable(all_gather_factory):
                raise TypeError("[distributed] all_gather_factory must be callable.")
        group = native_init(strict, backend)
        if group.size() > 1 and group.backend == "mpi" and not hooked:
            hooked.append(sys.excepthook)
            previous = sys.excepthook

            def end_the_job(kind, value, tb):
                previous(kind, value, tb)
                sys.stdout.flush()
                sys.stderr.flush()
                dist._abort(1)

            sys.excepthook = end_the_job
        return group

    init.__doc__ = native_init.__doc__
    init.__module__ = "kiln.core.distributed"
    dist.init = init
