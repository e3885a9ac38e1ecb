"""loft: ctypes bindings over libloft (capi/include/loft/loft.h).

    import loft
    with loft.Planner("loft", global_batch=256, overlap=True) as p:
        p.add_worker(0, compute_fixed_ms=2, compute_per_sample_ms=0.05, ...)
        plan = p.plan()            # list of WorkerPlan, plan.makespan_ms
    summary = loft.sim_run(open("spec.yaml").read(), "loft,uniform")  # dict
    with loft.Consumer("ipc:///run/loft/agent.sock") as c:   # agent compute_mode external
        for batch in c.batches(timeout_ms=10000):            # stops after 10 s without a batch
            x = numpy.frombuffer(batch.payload(0), dtype=numpy.uint8)  # zero copy
            batch.report(compute_ms=3.2)                     # acknowledge; then the batch closes

Training with PyTorch (agent spec training.model: external): see loft.torch.

The library is loaded from $LOFT_LIBRARY (a path to libloft.so) when it
is set, else from this package's own prefix: the build tree's lib/ for
<build>/python, the install prefix's lib directory for an installed
package (loft/_libpath.py, written by CMake, holds the path relative to
the package). Nothing else is searched (no parent directories, no loader
path): a package without _libpath.py (the source tree, a pip install)
needs LOFT_LIBRARY, and a missing library is an OSError saying so. Errors
from the C API (its errptr messages) raise loft.LoftError. Not
thread-safe per object, like the C API.
"""
import ctypes
import json
import os
from dataclasses import dataclass
from typing import List

__all__ = ["LoftError", "Planner", "Plan", "WorkerPlan", "sim_run", "version", "library", "Consumer", "Batch"]


class LoftError(RuntimeError):
    """An error reported by libloft through errptr."""


def _library_path() -> str:
    """$LOFT_LIBRARY, else the libloft of this package's own prefix (loft/_libpath.py, written
    when CMake builds or installs the package); nothing else is searched."""
    env = os.environ.get("LOFT_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise OSError(f"LOFT_LIBRARY={env!r} is not a file: set it to the path of libloft.so")
        return env
    pkg = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _libpath
    except ImportError:
        raise OSError(f"libloft not found: the loft package in {pkg} does not come with libloft (no "
                      "loft/_libpath.py: a source tree or a pip install); set LOFT_LIBRARY to the path "
                      "of libloft.so") from None
    path = os.path.normpath(os.path.join(pkg, _libpath.LIBRARY))
    if not os.path.isfile(path):
        raise OSError(f"libloft not found: {path} (next to this loft package, in {pkg}) does not exist; "
                      "set LOFT_LIBRARY to the path of libloft.so")
    return path


def _load() -> ctypes.CDLL:
    return ctypes.CDLL(_library_path())


_lib = _load()
_c = ctypes


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_errp = _c.POINTER(_c.c_void_p)
_version = _fn("loft_version", _c.c_char_p)
_free = _fn("loft_free", None, _c.c_void_p)
_planner_create = _fn("loft_planner_create", _c.c_void_p, _c.c_char_p, _c.c_int64, _c.c_int, _errp)
_planner_destroy = _fn("loft_planner_destroy", None, _c.c_void_p)
# A worker's cost profile: these fields (ms), in this order, as in the C API's
# LOFT_COST_* and the scheduler status document's workers[].profile.
COST_FIELDS = ("compute_fixed_ms", "compute_per_sample_ms", "local_fixed_ms", "local_per_sample_ms",
               "remote_fixed_ms", "remote_per_sample_ms", "uplink_per_sample_ms")
_add_worker_profile = _fn("loft_planner_add_worker_profile", _c.c_int, _c.c_void_p, _c.c_int32,
                          _c.POINTER(_c.c_double), _c.c_int64, _c.c_int64, _c.c_int64, _errp)
_set_local = _fn("loft_planner_set_local_available", _c.c_int, _c.c_void_p, _c.c_int32, _c.c_int64, _errp)
_observe = _fn("loft_planner_observe", _c.c_int, _c.c_void_p, _c.c_int32, _c.c_int64, _c.c_int64, _c.c_int64,
               _c.c_double, _c.c_double, _c.c_double, _c.c_double, _errp)
_cost = _fn("loft_planner_cost", _c.c_int, _c.c_void_p, _c.c_int32, _c.POINTER(_c.c_double), _errp)
_plan = _fn("loft_planner_plan", _c.c_void_p, _c.c_void_p, _errp)
_bound = _fn("loft_planner_bound_ms", _c.c_double, _c.c_void_p, _errp)
_plan_destroy = _fn("loft_plan_destroy", None, _c.c_void_p)
_plan_policy = _fn("loft_plan_policy", _c.c_char_p, _c.c_void_p)
_plan_n = _fn("loft_plan_num_workers", _c.c_int, _c.c_void_p)
_plan_node = _fn("loft_plan_node", _c.c_int32, _c.c_void_p, _c.c_int)
_plan_batch = _fn("loft_plan_batch", _c.c_int64, _c.c_void_p, _c.c_int)
_plan_local = _fn("loft_plan_local", _c.c_int64, _c.c_void_p, _c.c_int)
_plan_remote = _fn("loft_plan_remote", _c.c_int64, _c.c_void_p, _c.c_int)
_plan_pred = _fn("loft_plan_predicted_ms", _c.c_double, _c.c_void_p, _c.c_int)
_plan_makespan = _fn("loft_plan_makespan_ms", _c.c_double, _c.c_void_p)
_sim_run_with = _fn("loft_sim_run_with", _c.c_void_p, _c.c_char_p, _c.c_char_p, _c.c_int64, _c.c_uint64,
                    _c.c_int, _errp)
_consumer_open = _fn("loft_consumer_open", _c.c_void_p, _c.c_char_p, _errp)
_consumer_next = _fn("loft_consumer_next", _c.c_void_p, _c.c_void_p, _c.c_int, _errp)
_consumer_close = _fn("loft_consumer_close", None, _c.c_void_p)
_batch_pid = _fn("loft_batch_partition_id", _c.c_uint64, _c.c_void_p)
_batch_count = _fn("loft_batch_count", _c.c_int64, _c.c_void_p)
_batch_sid = _fn("loft_batch_sample_id", _c.c_uint64, _c.c_void_p, _c.c_int64)
_batch_payload = _fn("loft_batch_payload", _c.POINTER(_c.c_ubyte), _c.c_void_p, _c.c_int64,
                     _c.POINTER(_c.c_size_t))
_batch_label = _fn("loft_batch_label", _c.c_int, _c.c_void_p, _c.c_int64)
_batch_sids = _fn("loft_batch_sample_ids", _c.c_void_p, _c.c_void_p)
_batch_labels = _fn("loft_batch_labels", _c.c_void_p, _c.c_void_p)
_batch_report = _fn("loft_batch_report", None, _c.c_void_p, _c.c_double, _errp)
_batch_destroy = _fn("loft_batch_destroy", None, _c.c_void_p)
_batch_payloads = _fn("loft_batch_payloads", _c.c_void_p, _c.c_void_p, _c.POINTER(_c.c_size_t))
_batch_round = _fn("loft_batch_round", _c.c_int64, _c.c_void_p)
_batch_local_step = _fn("loft_batch_local_step", _c.c_int, _c.c_void_p)
_batch_delta_exchange = _fn("loft_batch_delta_exchange", _c.c_int, _c.c_void_p)
_batch_local_scale = _fn("loft_batch_local_scale", _c.c_double, _c.c_void_p)
_batch_round_steps = _fn("loft_batch_round_steps", _c.c_int64, _c.c_void_p)
_batch_allreduce = _fn("loft_batch_allreduce", _c.c_int, _c.c_void_p, _c.c_void_p, _c.c_size_t, _errp)
_batch_state = _fn("loft_batch_state", _c.c_void_p, _c.c_void_p, _c.POINTER(_c.c_size_t))
_batch_set_metrics = _fn("loft_batch_set_metrics", None, _c.c_void_p, _c.c_double, _c.c_double, _c.c_uint64)
_consumer_put_state = _fn("loft_consumer_put_state", None, _c.c_void_p, _c.c_void_p, _c.c_size_t, _errp)
_consumer_sync_state = _fn("loft_consumer_sync_state", _c.c_void_p, _c.c_void_p, _c.c_int,
                           _c.POINTER(_c.c_int64), _c.POINTER(_c.c_size_t), _errp)


class _Err:
    """An errptr: call(..., e.ptr) then e.check()."""

    def __init__(self):
        self.value = _c.c_void_p(None)
        self.ptr = _c.byref(self.value)

    def check(self):
        if self.value.value is not None:
            msg = _c.string_at(self.value.value).decode("utf-8", "replace")
            _free(self.value)
            self.value = _c.c_void_p(None)
            raise LoftError(msg)


def _call(f, *args):
    e = _Err()
    r = f(*args, _c.byref(e.value))
    e.check()
    return r


def version() -> str:
    return _version().decode()


def library() -> str:
    return _lib._name


@dataclass
class WorkerPlan:
    node: int
    batch: int
    local: int
    remote: int
    predicted_ms: float


class Plan(list):
    """The workers' plans (in add_worker order) plus policy and makespan_ms."""

    policy: str = ""
    makespan_ms: float = 0.0


class _Handle:
    """Owns one C handle: close() frees it once; usable as a context manager.
    Subclasses set _release to the C destroy/close function."""

    _h = None
    _release = None

    def close(self):
        if self._h is not None:
            type(self)._release(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Planner(_Handle):
    """loft_planner_t: a policy plus workers with cost parameters (ms)."""

    def __init__(self, policy: str, global_batch: int, overlap: bool = False):
        self._h = _call(_planner_create, policy.encode(), global_batch, 1 if overlap else 0)

    _release = staticmethod(_planner_destroy)

    def __del__(self):
        self.close()

    def add_worker(self, node: int, compute_fixed_ms: float, compute_per_sample_ms: float,
                   local_per_sample_ms: float = 0.0, remote_fixed_ms: float = 0.0,
                   remote_per_sample_ms: float = 0.0, uplink_per_sample_ms: float = 0.0,
                   min_batch: int = 0, max_batch: int = 0, local_available: int = 0,
                   local_fixed_ms: float = 0.0):
        profile = (_c.c_double * len(COST_FIELDS))(compute_fixed_ms, compute_per_sample_ms, local_fixed_ms,
                                                   local_per_sample_ms, remote_fixed_ms, remote_per_sample_ms,
                                                   uplink_per_sample_ms)
        _call(_add_worker_profile, self._h, node, profile, min_batch, max_batch, local_available)

    def set_local_available(self, node: int, local_available: int):
        _call(_set_local, self._h, node, local_available)

    def observe(self, node: int, batch: int, local: int, remote: int, local_read_ms: float,
                remote_read_ms: float, compute_ms: float, iteration_ms: float):
        _call(_observe, self._h, node, batch, local, remote, local_read_ms, remote_read_ms, compute_ms,
              iteration_ms)

    def cost(self, node: int) -> List[float]:
        """The cost profile in use for `node`, in COST_FIELDS order."""
        out = (_c.c_double * len(COST_FIELDS))()
        _call(_cost, self._h, node, out)
        return list(out)

    def plan(self) -> Plan:
        h = _call(_plan, self._h)
        try:
            p = Plan(WorkerPlan(_plan_node(h, i), _plan_batch(h, i), _plan_local(h, i), _plan_remote(h, i),
                                _plan_pred(h, i)) for i in range(_plan_n(h)))
            p.policy = _plan_policy(h).decode()
            p.makespan_ms = _plan_makespan(h)
            return p
        finally:
            _plan_destroy(h)

    def bound_ms(self) -> float:
        return _call(_bound, self._h)


def sim_run(spec_yaml: str, policies: str = "loft,lbbsp,uniform,pid", iterations: int = 0, seed: int = 0,
            compute_bound: bool = True, raw: bool = False):
    """Runs the simulator; returns summary.json parsed (or its text if raw)."""
    p = _call(_sim_run_with, spec_yaml.encode(), policies.encode(), iterations, seed, 1 if compute_bound else 0)
    try:
        text = _c.string_at(p).decode()
    finally:
        _free(p)
    return text if raw else json.loads(text)


class Batch(_Handle):
    """One partition from the agent. payload(i) is a memoryview into the
    received message (zero copy, numpy.frombuffer-compatible), valid until
    close(); bytes_payload(i) copies; payloads() is every payload back to
    back (one zero-copy region; it keeps the batch open while referenced).
    Call report() once, then close().

    Training (the agent's spec has training.model external): `round` is
    the all-reduce round (-1 without a ring); a training batch may be empty
    (a round this agent has no samples for: all-reduce anyway, weight 0).
    training.exchange (period > 1 or auto): `local_step` True = apply this
    batch's gradient times `local_scale` with the optimizer, no
    all-reduce; `delta_exchange` True = the round's last batch all-reduces
    the model delta (loft.torch.Exchange does both)."""

    def __init__(self, handle, consumer=None):
        self._h = handle
        self._consumer = consumer  # keeps the consumer open while the batch lives
        self._views = 0
        self._close_pending = False
        self.partition_id = _batch_pid(handle)
        self.count = _batch_count(handle)
        self.round = _batch_round(handle)
        self.local_step = bool(_batch_local_step(handle))
        self.delta_exchange = bool(_batch_delta_exchange(handle))
        self.local_scale = _batch_local_scale(handle)
        self._ids_arr = (_c.c_uint64 * self.count)()
        self._labels_arr = (_c.c_int32 * self.count)()
        if self.count > 0:  # one call and one copy each instead of one call per sample
            _c.memmove(self._ids_arr, _batch_sids(handle), 8 * self.count)
            _c.memmove(self._labels_arr, _batch_labels(handle), 4 * self.count)
        self._sample_ids = None
        self._labels = None
        self.reported = False

    def __len__(self):
        return self.count

    def sample_ids_array(self):
        """Every sample id as a ctypes uint64 array (copied from the batch
        with one C call and one memmove when the batch is made; stays
        valid after close())."""
        return self._ids_arr

    def labels_array(self):
        """Every label as a ctypes int32 array (copied like sample_ids_array)."""
        return self._labels_arr

    @property
    def sample_ids(self) -> List[int]:
        """The sample ids (a list, made on first use)."""
        if self._sample_ids is None:
            self._sample_ids = list(self._ids_arr)
        return self._sample_ids

    @property
    def labels(self) -> List[int]:
        """The labels (a list, made on first use)."""
        if self._labels is None:
            self._labels = list(self._labels_arr)
        return self._labels

    def _check(self):
        if self._h is None:
            raise LoftError("batch is closed")

    def payload(self, i: int) -> memoryview:
        self._check()
        if not 0 <= i < self.count:
            raise IndexError(i)
        n = _c.c_size_t(0)
        p = _batch_payload(self._h, i, _c.byref(n))
        return memoryview((_c.c_ubyte * n.value).from_address(_c.addressof(p.contents))).cast("B")

    def payloads(self):
        """Every payload back to back as a writable ctypes byte array over
        the received message (zero copy). The array holds a reference to
        this batch: the memory stays valid while the array (or a tensor /
        numpy array made from it) lives, even after close()."""
        self._check()
        n = _c.c_size_t(0)
        p = _batch_payloads(self._h, _c.byref(n))
        arr = (_c.c_ubyte * n.value).from_address(p) if n.value else (_c.c_ubyte * 0)()
        arr._loft_batch = _ViewRef(self)
        return arr

    def payload_size(self) -> int:
        """Bytes per sample when every sample has the same size (else ValueError)."""
        if self.count == 0:
            return 0
        n = _c.c_size_t(0)
        _batch_payloads(self._h, _c.byref(n))
        size = len(self.payload(0))
        if size * self.count != n.value:
            raise ValueError(f"batch {self.partition_id}: samples of different sizes")
        return size

    def bytes_payload(self, i: int) -> bytes:
        return bytes(self.payload(i))

    def set_metrics(self, loss: float = float("nan"), test_accuracy: float = float("nan"), param_hash: int = 0):
        """Figures sent with report(): batch loss, a test accuracy, a parameter hash."""
        self._check()
        _batch_set_metrics(self._h, float(loss), float(test_accuracy), int(param_hash) & (2**64 - 1))

    def report(self, compute_ms: float):
        self._check()
        _call(_batch_report, self._h, float(compute_ms))
        self.reported = True

    def allreduce(self, data) -> int:
        """In place on a C-contiguous float32 buffer (a ctypes array, or the
        address of n floats as (address, n)): 1 = apply the aggregate, 0 =
        nothing to apply (carried), 2 = load state() first then apply.
        Raises LoftError on an error (nothing to apply)."""
        self._check()
        if isinstance(data, tuple):
            addr, n = data
        else:
            addr, n = _c.addressof(data), len(data)
        return _call(_batch_allreduce, self._h, _c.c_void_p(addr), n)

    def round_steps(self) -> int:
        """After allreduce() returned 1 or 2: the planned steps the aggregate
        spans (1 for a gradient exchange; the momentum rule of a delta exchange)."""
        self._check()
        return _batch_round_steps(self._h)

    def state(self) -> bytes:
        """After allreduce() returned 2: the ring majority's state blob."""
        self._check()
        n = _c.c_size_t(0)
        p = _batch_state(self._h, _c.byref(n))
        return _c.string_at(p, n.value) if p else b""

    @property
    def consumer(self):
        return self._consumer

    def close(self):
        # A payloads() view still alive keeps the memory: release with the last one.
        if self._views > 0:
            self._close_pending = True
            return
        super().close()

    _release = staticmethod(_batch_destroy)

    def __del__(self):
        self._views = 0
        self.close()


class _ViewRef:
    """Held by a payloads() array: the batch closes once it and every view are gone."""

    def __init__(self, batch: Batch):
        self.batch = batch
        batch._views += 1

    def __del__(self):
        b = self.batch
        b._views -= 1
        if b._views == 0 and b._close_pending:
            b._close_pending = False
            b.close()


class Consumer(_Handle):
    """Takes batches from a local agent running compute_mode external."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self._h = _call(_consumer_open, endpoint.encode())

    def next(self, timeout_ms: int = 10000) -> Batch:
        """The next batch; LoftError("... timeout ...") if none arrives in time."""
        if self._h is None:
            raise LoftError("consumer is closed")
        return Batch(_call(_consumer_next, self._h, int(timeout_ms)), self)

    def batches(self, timeout_ms: int = 10000):
        """Yields batches until none arrives for timeout_ms; each is closed
        when the loop moves on (report it inside the loop body)."""
        while True:
            try:
                b = self.next(timeout_ms)
            except LoftError as e:
                if "timeout" in str(e):
                    return
                raise
            with b:
                yield b

    def put_state(self, blob: bytes):
        """Publishes this trainer's state (opaque bytes) for restarted members."""
        if self._h is None:
            raise LoftError("consumer is closed")
        _call(_consumer_put_state, self._h, blob, len(blob))

    def sync_state(self, timeout_ms: int = 60000):
        """(round, blob) of the ring majority; (-1, b"") when no member has progress."""
        if self._h is None:
            raise LoftError("consumer is closed")
        r = _c.c_int64(-1)
        n = _c.c_size_t(0)
        p = _call(_consumer_sync_state, self._h, int(timeout_ms), _c.byref(r), _c.byref(n))
        if not p:
            return r.value, b""
        try:
            return r.value, _c.string_at(p, n.value)
        finally:
            _free(p)

    _release = staticmethod(_consumer_close)

    def __del__(self):
        self.close()
