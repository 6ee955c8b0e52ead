"""Process sets (Horovod's): collective operations over some of the workers only.

    even = hvd.add_process_set([0, 2])            # every worker calls it, in the same order
    if hvd.rank() in (0, 2):
        hvd.allreduce(t, op=hvd.Sum, process_set=even)   # the sum over ranks 0 and 2

How they run on the servers: a set's operations use tensors of their own, declared by the set's members
only with the set's number of contributors (zps_declare_in_set), so the servers complete each round of
them with the members' pushes and sum those alone, in rank order. Their keys come from a key space of the
set's own, so that the tensors a set declares move neither the keys nor the placement of anybody else's.
With several processes per node (ZPS_LOCAL_SIZE > 1) a set's members on a node are not all of its local
ranks, so a set's tensors skip the node's local reduction: each member process pushes its whole tensor
to the servers itself, and the servers count the set's contributors per process (worker x local size +
local rank), not per node.
Each set has its own coordinator (coordinator.py) over its members: they agree on every operation of the
set, in the order they issue them, while other sets and the global set run theirs meanwhile. Costs are
those of the same operation on a job of the set's size, with one process per node.

Adding and removing a set are operations of every worker (as in Horovod): they agree on the ranks, so
that each set gets the same number (its key space, from 1 to the library's _capi.max_process_sets(),
never reused in a job) everywhere. Adding the ranks of a set that exists gives that set. A removed set's tensors stay declared on the servers until
the job ends.
"""
import threading

from zps import _capi
from zps.errors import ZpsInvalidArgument
from zps.torch import coordinator
from zps.torch._runtime import Group, runtime



class ProcessSet:
    """A set of ranks. Create it with add_process_set() (or pass it to init(process_sets=...)) before using
    it as an operation's process_set. `global_process_set` is the set of every rank."""

    def __init__(self, ranks):
        if isinstance(ranks, ProcessSet):
            ranks = ranks.ranks
        try:
            self.ranks = sorted(set(int(r) for r in ranks))
        except TypeError:
            raise TypeError("zps.torch.ProcessSet: expected a list of ranks, got %r (MPI communicators are not "
                            "supported)" % (ranks,)) from None
        self.process_set_id = None  # set by add_process_set

    def _all_ranks(self):
        return self.ranks if self is not global_process_set else list(range(runtime("ProcessSet").size))

    def included(self):
        """True when this process is one of the set's ranks."""
        return runtime("ProcessSet.included").rank in self._all_ranks()

    def size(self):
        return len(self._all_ranks())

    def rank(self):
        """This process's rank within the set (-1 when it is not a member)."""
        ranks = self._all_ranks()
        me = runtime("ProcessSet.rank").rank
        return ranks.index(me) if me in ranks else -1

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


class SetGroup(Group):
    """The members of one process set, as the operations of ops.py and collectives.py run over them."""

    def __init__(self, rt, key_space, members):
        self.worker = rt.worker
        self.key_space = key_space
        self.members = members
        self._init_group(members.index(rt.rank), len(members))
        self.coordinator = coordinator.Coordinator(self)

    def _declare_on_servers(self, declared_name, nbytes, dtype, compressor, priority):
        # Compression and priorities apply to the global set's tensors only.
        return self.worker.declare_in_set(declared_name, nbytes, dtype, self.key_space, self.size)


class Registry:
    """The process sets this process knows, by id; one per Runtime."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sets = {}  # id -> (ranks, SetGroup or None where this process is not a member)
        self.next_id = 1

    def stop(self):
        with self.lock:
            for _, group in self.sets.values():
                if group is not None:
                    group.coordinator.stop()
            self.sets.clear()


def _registry(rt):
    with rt.lock:
        if rt.process_sets is None:
            rt.process_sets = Registry()
        return rt.process_sets


def _agree_all(rt, what, ranks):
    """Every worker calls `what` with these ranks at this point, or every one raises naming each one's view."""
    name = "zps.%s%s" % (what, ranks)
    op = coordinator.Op("declare", name, None, (len(ranks),), 0, lambda agreed: None)
    rt.coordinator.run(op)


def add_process_set(process_set):
    """Adds a process set (a ProcessSet or a list of ranks) and returns it. Every worker must call it with
    the same ranks, in the same order as its other operations."""
    rt = runtime("add_process_set")
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps is global_process_set:
        raise ValueError("zps.torch.add_process_set: the global process set exists already")
    if not ps.ranks or ps.ranks[0] < 0 or ps.ranks[-1] >= rt.size:
        raise ValueError("zps.torch.add_process_set: ranks %s must be a non-empty list of ranks in 0..%d" %
                         (ps.ranks, rt.size - 1))
    registry = _registry(rt)
    _agree_all(rt, "add_process_set", ps.ranks)
    with registry.lock:
        # The ranks of a set that exists already: that set (as Horovod did before 0.28), so that a script
        # that adds a set again, or never removed it, goes on working.
        existing = [i for i, (ranks, _) in registry.sets.items() if ranks == ps.ranks]
        if existing:
            ps.process_set_id = existing[0]
            return ps
        if registry.next_id > _capi.max_process_sets():
            raise ZpsInvalidArgument("zps.torch.add_process_set: a job can add at most %d process sets"
                                     % _capi.max_process_sets())
        ps.process_set_id = registry.next_id
        registry.next_id += 1
        members = ps.ranks
        group = SetGroup(rt, ps.process_set_id, members) if rt.rank in members and len(members) < rt.size else None
        registry.sets[ps.process_set_id] = (members, group)
    return ps


def remove_process_set(process_set):
    """Removes a process set added before (every worker calls it); True when it was there."""
    rt = runtime("remove_process_set")
    if not isinstance(process_set, ProcessSet) or process_set is global_process_set:
        raise ValueError("zps.torch.remove_process_set: expected a ProcessSet other than the global one, got %r" %
                         (process_set,))
    registry = _registry(rt)
    with registry.lock:
        if process_set.process_set_id not in registry.sets:
            return False
    _agree_all(rt, "remove_process_set", process_set.ranks)
    with registry.lock:
        _, group = registry.sets.pop(process_set.process_set_id)
    if group is not None:
        group.coordinator.stop()
    process_set.process_set_id = None
    return True


def group_of(process_set, what):
    """The group an operation with this process_set runs over: the runtime for None, the global set or a
    set of every rank; else the set's members, of which this process must be one."""
    rt = runtime(what)
    if process_set is None or process_set is global_process_set:
        return rt
    if not isinstance(process_set, ProcessSet):
        raise TypeError("zps.torch.%s: process_set must be a ProcessSet, got %s" % (what, type(process_set).__name__))
    if process_set.ranks == list(range(rt.size)):
        return rt
    registry = _registry(rt)
    with registry.lock:
        entry = registry.sets.get(process_set.process_set_id)
    if entry is None or entry[0] != process_set.ranks:
        raise ValueError("zps.torch.%s: %r is not added (or was removed); call add_process_set first" %
                         (what, process_set))
    if entry[1] is None:
        raise ValueError("zps.torch.%s: rank %d is not in %r; only its members call its operations" %
                         (what, rt.rank, process_set))
    return entry[1]
