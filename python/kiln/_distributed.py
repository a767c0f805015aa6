"""kiln.core.distributed with MLX's API for one process. kiln has no
multi-process backend yet (no MPI, ring or NCCL launcher), so init() gives
the singleton group, as MLX's init() does when a program is started without
a launcher: collectives over one process return their input, and
point-to-point calls raise. Programs written for several processes run
unchanged on one."""

_BACKENDS = ("any", "mpi", "nccl", "jaccl", "ring")


def install(core):
    import types

    dist = types.ModuleType("kiln.core.distributed", "Communication between processes (one process in kiln).")

    class Group:
        """A group of processes; in kiln always the singleton group."""

        def __init__(self, *args, **kwargs):
            if args or kwargs:
                raise TypeError("[distributed] Group takes no arguments; init() makes the group.")

        def rank(self):
            return 0

        def size(self):
            return 1

        def split(self, color, key=-1):
            raise ValueError("[distributed] Cannot split the distributed group further (a singleton group).")

        def __repr__(self):
            return "Group(rank=0, size=1)"

    def _check_backend(backend):
        if backend not in _BACKENDS:
            raise ValueError(f"[distributed] The only valid values for backend are {', '.join(map(repr, _BACKENDS))} "
                             f"but {backend!r} was provided.")

    def is_available(backend="any"):
        """Whether a multi-process backend is there: never in kiln."""
        _check_backend(backend)
        return False

    def init(strict=False, backend="any", *, all_gather_factory=None):
        """The singleton group; with ``strict``, an error, since no backend
        can form a group of several processes."""
        _check_backend(backend)
        if strict:
            raise RuntimeError("[distributed] Couldn't initialize any backend: kiln runs in one process "
                               "(no MPI, ring or NCCL backend).")
        return Group()

    def _one(name, x, group):
        if group is not None and not isinstance(group, Group):
            raise TypeError(f"[{name}] group must be a kiln.core.distributed.Group, got {type(group).__name__}.")
        return core.asarray(x)

    def all_sum(x, *, group=None, stream=None):
        """The sum over the group's processes: x itself in one process."""
        return _one("all_sum", x, group)

    def all_max(x, *, group=None, stream=None):
        """The elementwise max over the group's processes."""
        return _one("all_max", x, group)

    def all_min(x, *, group=None, stream=None):
        """The elementwise min over the group's processes."""
        return _one("all_min", x, group)

    def all_gather(x, *, group=None, stream=None):
        """The processes' arrays concatenated along the first axis."""
        return _one("all_gather", x, group)

    def sum_scatter(x, *, group=None, stream=None):
        """The sum over the processes, each keeping its slice of the first
        axis."""
        return _one("sum_scatter", x, group)

    def _no_peer(name):
        raise ValueError(f"[{name}] Cannot {name.split('_')[0]} with a singleton group (kiln runs in one process).")

    def send(x, dst, *, group=None, stream=None):
        _no_peer("send")

    def recv(shape, dtype, src, *, group=None, stream=None):
        _no_peer("recv")

    def recv_like(x, src, *, group=None, stream=None):
        _no_peer("recv_like")

    for f in (is_available, init, all_sum, all_max, all_min, all_gather, sum_scatter, send, recv, recv_like):
        f.__module__ = "kiln.core.distributed"
        setattr(dist, f.__name__, f)
    Group.__module__ = "kiln.core.distributed"
    dist.Group = Group
    core.distributed = dist
    return dist
