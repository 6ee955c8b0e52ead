"""The coordinator: one thread per process that starts zps.torch's collective operations in the order the
script issued them, after the workers agreed on what each one is.

Why: the servers sum the n-th push of a key from every worker, and keys follow the order of declaration,
so every worker must declare the same tensors in the same order and call each one in step. A worker that
passes another shape, dtype, name or broadcast root must not sum garbage, and must not leave the others
waiting out the request timeout. So before an operation starts, every worker pushes a small descriptor of
it (kind, name, dtype, shape, root or reduction, generation) into its own row of one agreement tensor;
the summed tensor holds every worker's descriptor, and each worker decides the same thing from it: start
the operation, or raise one error that names every rank's view. This costs one round trip of
`size x 256` bytes per operation, as Horovod's negotiation does; DistributedOptimizer's per-step sums do
not pay it (their tensors are agreed once, when the optimizer is built).

Names and generations: an operation's tensor on the servers is declared as "<name><shape><dtype>#<gen>",
so a name may be used with another shape once its previous operation ended (a new tensor is declared, at
the same point on every worker). A wait that fails (a timeout) cancels the push, and the servers may
have summed part of it, so that tensor is never pushed again: the name's generation goes up, and the
next agreement moves every worker to the highest generation any of them has, a fresh tensor. A late
reply of the failed operation is therefore never read, and the name keeps working.

join(): a worker that called join() keeps taking part in agreements; for an allreduce it pushes zeros,
for a DistributedOptimizer's step (agreed as one "optimizer" operation per step) zeros for each of the
optimizer's sums; other operations are refused on the workers still running, naming the joined ranks. realign() is join()
that takes part in nothing: every operation the others start meanwhile is refused, so workers that left
a sequence of operations at different points (one raised half way) are in step again afterwards.
"""
import hashlib
import queue
import threading
import zlib

import torch

from zps.errors import ZpsError, ZpsInvalidArgument

# One descriptor: WORDS int64 per worker.
WORDS = 32
NAME_WORDS = 16  # the name's first 128 bytes, shown in errors
MAX_DIMS = 8

KINDS = {"allreduce": 1, "broadcast": 2, "declare": 3, "join": 4, "allgather": 5, "alltoall": 6,
         "reducescatter": 7, "realign": 8, "optimizer": 9}
# What goes on with joined workers: their allreduces, and DistributedOptimizer's steps (the joined workers
# push zeros for every gradient).
_WITH_JOINED = ("allreduce", "optimizer")
KIND_NAMES = {v: k for k, v in KINDS.items()}
REDUCTION_NAMES = {1: "Average", 2: "Sum", 3: "Min", 4: "Max", 5: "Product", 6: "Adasum"}

DTYPE_CODES = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3, torch.float64: 4, torch.int32: 5,
               torch.int64: 6, torch.uint8: 7, torch.int8: 8, torch.int16: 9, torch.bool: 10,
               torch.complex64: 11, torch.complex128: 12}
DTYPE_NAMES = {v: str(k).replace("torch.", "") for k, v in DTYPE_CODES.items()}

# Per kind, whether the first dimension must agree (allgather and alltoall take any first dimension).
_FIRST_DIM_FREE = {KINDS["allgather"], KINDS["alltoall"]}


def _name_hash(name):
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:7], "little")


def encode(kind, name, dtype, shape, extra=0, generation=0):
    """A descriptor as WORDS ints (what one worker pushes into its row)."""
    words = [0] * WORDS
    words[0] = 1
    words[1] = KINDS[kind]
    words[2] = DTYPE_CODES.get(dtype, 0)
    words[3] = len(shape)
    dims = list(shape[:MAX_DIMS])
    if len(shape) > MAX_DIMS:  # the rest as a checksum: compared, not shown
        dims[-1] = zlib.crc32(repr(tuple(shape[MAX_DIMS - 1:])).encode())
    words[4:4 + len(dims)] = dims
    words[12] = int(extra)
    words[13] = _name_hash(name)
    raw = name.encode("utf-8", "replace")[:8 * NAME_WORDS].ljust(8 * NAME_WORDS, b"\0")
    words[14:14 + NAME_WORDS] = [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]
    words[30] = generation
    return words


class Descriptor:
    """One worker's descriptor, decoded from its row of the summed agreement tensor."""

    def __init__(self, rank, row):
        self.rank = rank
        self.present = row[0] == 1
        self.kind = row[1]
        self.dtype = row[2]
        self.shape = tuple(row[4:4 + min(row[3], MAX_DIMS)])
        self.extra = row[12]
        self.name_hash = row[13]
        raw = b"".join(int(w).to_bytes(8, "little", signed=True) for w in row[14:14 + NAME_WORDS])
        self.name = raw.rstrip(b"\0").decode("utf-8", "replace")
        self.generation = row[30]

    def key(self):
        """What must be equal on every worker taking part."""
        shape = self.shape[1:] if self.kind in _FIRST_DIM_FREE else self.shape
        return (self.kind, self.dtype, len(self.shape), shape, self.extra, self.name_hash)

    def describe(self, extra_name=None):
        what = "%s of '%s'" % (KIND_NAMES.get(self.kind, "?"), self.name)
        if self.kind == KINDS["join"]:
            return "join()"
        text = "%s with shape %s %s" % (what, list(self.shape), DTYPE_NAMES.get(self.dtype, "?"))
        if extra_name == "reduction":
            text += ", %s" % REDUCTION_NAMES.get(self.extra, "?")
        elif extra_name:
            text += ", %s %s" % (extra_name, self.extra)
        return text


class Op:
    """One operation in the coordinator's queue. start(agreed) runs on the coordinator thread after the
    agreement; it may return a zps handle to wait for, or None when it completed there."""

    def __init__(self, kind, name, dtype, shape, extra, start, extra_name=None):
        self.kind = kind
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.extra = extra
        self.extra_name = extra_name
        self.start = start
        self.started = threading.Event()
        self.error = None  # an exception, raised by wait()
        self.zps_handle = None
        self.result = None
        self.lock = threading.Lock()
        self.abandoned = False  # its caller gave up waiting before it started (see abandon())
        self.on_abandon = None


class Agreed:
    """What the workers agreed on for one operation: the generation to use and the joined ranks."""

    def __init__(self, generation, joined):
        self.generation = generation
        self.joined = joined


class Coordinator:
    def __init__(self, rt):
        self.rt = rt
        self.queue = queue.Queue()
        self.generations = {}  # name -> generation its next operation uses (bumped by a failed wait)
        self.agreement_generation = 0
        self.broken = None  # why agreements cannot go on (an agreement's own wait failed)
        self.round = 0
        self.thread = threading.Thread(target=self._loop, name="zps.torch coordinator", daemon=True)
        self.thread.start()

    # ---- called on the callers' threads ----

    def submit(self, op):
        if self.broken is not None:
            raise ZpsError("zps.torch: cannot start %s of '%s': %s" % (op.kind, op.name, self.broken))
        self.queue.put(op)
        return op

    def run(self, op):
        """Submits op and waits until it started (its start() ran); raises its error."""
        self.submit(op)
        self.wait_started(op, None)
        return op

    def wait_started(self, op, timeout):
        if not op.started.wait(timeout):
            return False
        if op.error is not None:
            raise op.error
        return True

    def failed(self, name):
        """The wait of an operation of `name` failed: its tensor may be half summed; use a fresh one."""
        with self.rt.lock:
            self.generations[name] = self.generations.get(name, 0) + 1

    def stop(self):
        self.queue.put(None)

    # ---- the coordinator thread ----

    def _loop(self):
        while True:
            op = self.queue.get()
            if op is None:
                return
            try:
                if op.kind in ("join", "realign"):
                    op.result = self._join(op)
                else:
                    agreed = self._agree(op)
                    op.zps_handle = op.start(agreed)
            except BaseException as e:  # handed to the caller, who raises it
                op.error = e
            op.started.set()

    def _exchange(self, words):
        """Every worker's descriptor: pushes ours into our row and returns the summed rows."""
        rt = self.rt
        if self.broken is not None:
            raise ZpsError("zps.torch: %s" % self.broken)
        table = torch.zeros(rt.size, WORDS, dtype=torch.int64)
        table[rt.rank] = torch.tensor(words, dtype=torch.int64)
        tid = rt.tensor_id("zps.agree#%d" % self.agreement_generation, table, None, None)
        handle = rt.worker.push_pull(tid, table.data_ptr(), table.data_ptr())
        try:
            rt.worker.wait(handle, -1, "zps.torch: agreeing on the next operation with the other workers")
        except ZpsError as e:
            # The workers' agreements are out of step from here on; nothing can be started safely.
            self.broken = "an agreement between the workers failed (%s); this job cannot run further collective " \
                          "operations" % e
            self.agreement_generation += 1
            raise
        self.round += 1
        return [Descriptor(r, table[r].tolist()) for r in range(rt.size)]

    def _agree(self, op):
        generation = self.generations.get(op.name, 0)
        if self.rt.size == 1:
            return Agreed(generation, [])
        words = encode(op.kind, op.name, op.dtype, op.shape, op.extra or 0, generation)
        descriptors = self._exchange(words)
        realigning = [d.rank for d in descriptors if d.kind == KINDS["realign"]]
        joined = [d.rank for d in descriptors if d.kind == KINDS["join"]]
        active = [d for d in descriptors if d.kind not in (KINDS["join"], KINDS["realign"])]
        mine = descriptors[self.rt.rank]
        if realigning:
            raise ZpsInvalidArgument("zps.torch: %s refused: rank%s %s already left this sequence of operations "
                                     "(an earlier one raised there) and waits for the others to realign" %
                                     (mine.describe(), "s" if len(realigning) > 1 else "",
                                      ", ".join(map(str, realigning))))
        if joined and op.kind not in _WITH_JOINED:
            raise ZpsInvalidArgument("zps.torch: %s refused: rank%s %s called join() (only allreduce and "
                                     "DistributedOptimizer go on with joined workers)" % (mine.describe(), "s" if len(joined) > 1 else "",
                                                               ", ".join(map(str, joined))))
        keys = {d.key() for d in active}
        if len(keys) > 1:
            views = "; ".join("rank %d: %s" % (d.rank, d.describe(op.extra_name)) for d in active)
            raise ZpsInvalidArgument("zps.torch: the workers disagree on this operation (%s); every worker must call "
                                     "the same operations in the same order with the same names, dtypes, shapes%s" %
                                     (views, " and %ss" % op.extra_name if op.extra_name else ""))
        generation = max(d.generation for d in active)
        self.generations[op.name] = generation
        return Agreed(generation, joined)

    def _join(self, op):
        """join(): takes part in the others' allreduces with zeros until every worker joined (realign():
        in nothing); returns the rank that joined last (the highest rank among those that joined in the
        final round)."""
        rt = self.rt
        if rt.size == 1:
            return rt.rank
        rounds = 0
        kind = KINDS[op.kind]
        while True:
            descriptors = self._exchange(encode(op.kind, op.kind, None, (), extra=rounds))
            rounds += 1
            active = [d for d in descriptors if d.kind != kind]
            if not active:
                last = [d.rank for d in descriptors if d.extra == 0]
                return max(last) if last else max(d.rank for d in descriptors)
            if (op.kind == "realign" or any(d.kind not in map(KINDS.get, _WITH_JOINED) for d in active) or
                    len({d.key() for d in active}) > 1):
                continue  # the workers still running raise; nothing to take part in
            d = active[0]
            if d.kind == KINDS["optimizer"]:
                self._optimizer_zeros(d.name)
                continue
            dtype = next(t for t, c in DTYPE_CODES.items() if c == d.dtype)
            generation = max(x.generation for x in active)
            self.generations[d.name] = generation
            zeros = torch.zeros(d.shape, dtype=dtype)
            tid = rt.tensor_id(declared_name(d.name, zeros, generation), zeros, None, None)
            handle = rt.worker.push_pull(tid, zeros.data_ptr(), zeros.data_ptr())
            rt.worker.wait(handle, -1, "zps.torch.join: allreduce of '%s' with zeros" % d.name)


    def _optimizer_zeros(self, name):
        """A joined worker's part in a step of DistributedOptimizer `name`: zeros for each of its sums."""
        rt = self.rt
        zeros = [(tid, torch.zeros(numel, dtype=dtype)) for tid, numel, dtype in rt.optimizers[name]]
        handles = [rt.worker.push_pull(tid, z.data_ptr(), z.data_ptr()) for tid, z in zeros]
        for h in handles:
            rt.worker.wait(h, -1, "zps.torch.join: a step of %s with zeros" % name)


def declared_name(name, tensor, generation):
    """The name of an operation's tensor on the servers: the shape and dtype make a reuse of the name with
    another shape a tensor of its own; the generation replaces a tensor whose wait failed."""
    return "%s%s%s#%d" % (name, list(tensor.shape), str(tensor.dtype).replace("torch.", ":"), generation)
