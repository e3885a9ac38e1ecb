"""PyTorch on loft: a data pipe over a local agent's batches and the
agent's robust all-reduce for gradients (agent compute_mode external, spec
training.model external).

    from loft.torch import LoftBatches, allreduce_gradients, sync_state
    batches = LoftBatches(endpoint, transform=lambda x, y: (x.view(-1, 1, 28, 28).float() / 255, y))
    sync_state(model, opt, batches)              # a restarted trainer takes the majority's state
    for x, y, batch in batches:                  # x, y torch tensors; x shares the batch's memory
        opt.zero_grad()
        if len(y):                               # an empty batch = a round without samples here
            F.cross_entropy(model(x), y).backward()
        if allreduce_gradients(model, batch, opt):   # the round's aggregate is in the .grad's
            opt.step()
        # the batch is reported (compute time = time in the loop body) and released after the body

Every trainer must start from the same parameters (same seed) and use the
same model and optimizer: the agents compare a hash of the published state
each round, and a trainer whose state is not the majority's is handed the
majority's (allreduce_gradients loads it).

Every training.exchange mode of the spec (period 1 | N | auto, compression,
overlap) with one loop: Exchange does what each batch asks.

    ex = Exchange(model, opt, lr_at=lambda step: lr)   # lr_at: the learning rate of a planned step
    for x, y, batch in batches:
        opt.zero_grad()
        if len(y):
            F.cross_entropy(model(x), y).backward()
        ex.step(batch)                  # period 1: all-reduce + opt.step(); else a local step or the
                                        # round's delta exchange
        batch.set_metrics(loss, float("nan"), ex.agreed_hash())
"""
import copy
import hashlib
import json
import struct
import time
from typing import Callable, Optional

import torch

from . import Batch, Consumer, LoftError

__all__ = ["LoftBatches", "allreduce_gradients", "sync_state", "state_bytes", "load_state_bytes",
           "parameter_hash", "Exchange"]

_MAGIC = b"LOFTSTATE1"
_last_batches = None  # the most recent LoftBatches (sync_state's default source)


class LoftBatches:
    """Iterable of (inputs, labels, batch) from the agent at `endpoint`.

    inputs: a uint8 tensor (count, payload_size) over the received message
    (torch.frombuffer, no copy; it keeps the message alive while it lives),
    labels: int64 tensor (count,). `transform(inputs, labels)` may return
    new ones (decode, normalise, reshape). After the loop body the batch is
    reported (unless the body did: batch.report(ms)) with the body's time.
    Iteration ends when no batch arrives for timeout_ms."""

    def __init__(self, endpoint: str, transform: Optional[Callable] = None, timeout_ms: int = 30000,
                 consumer: Optional[Consumer] = None):
        global _last_batches
        self.consumer = consumer or Consumer(endpoint)
        self.transform = transform
        self.timeout_ms = timeout_ms
        _last_batches = self

    @staticmethod
    def tensors(batch: Batch):
        """(inputs, labels) of a batch without copying its payloads."""
        size = batch.payload_size()
        if batch.count == 0:
            x = torch.empty((0, size), dtype=torch.uint8)
        else:
            x = torch.frombuffer(batch.payloads(), dtype=torch.uint8).view(batch.count, size)
        # The labels' int32 array (one copy per batch, not a list of ints), widened.
        y = torch.frombuffer(batch.labels_array(), dtype=torch.int32).to(torch.int64) if batch.count else \
            torch.empty(0, dtype=torch.int64)
        return x, y

    def __iter__(self):
        while True:
            try:
                b = self.consumer.next(self.timeout_ms)
            except LoftError as e:
                if "timeout" in str(e):
                    return
                raise
            x, y = self.tensors(b)
            if self.transform is not None:
                x, y = self.transform(x, y)
            t0 = time.perf_counter()
            try:
                yield x, y, b
                if not b.reported:
                    b.report((time.perf_counter() - t0) * 1000.0)
            finally:
                del x, y
                b.close()

    def close(self):
        self.consumer.close()


def _flatten(obj, tensors):
    if torch.is_tensor(obj):
        t = obj.detach().cpu().contiguous()
        tensors.append(t)
        return {"t": len(tensors) - 1, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
    if isinstance(obj, dict):
        return {"d": [[k, _flatten(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"l": [_flatten(v, tensors) for v in obj], "tuple": isinstance(obj, tuple)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    raise TypeError(f"cannot serialise {type(obj).__name__} in a training state")


def _unflatten(node, data, offsets):
    if "t" in node:
        i = node["t"]
        dtype = getattr(torch, node["dtype"])
        buf = data[offsets[i]:offsets[i + 1]]
        t = torch.frombuffer(bytearray(buf), dtype=dtype) if len(buf) else torch.empty(0, dtype=dtype)
        return t.view(node["shape"]).clone()
    if "d" in node:
        return {k: _unflatten(v, data, offsets) for k, v in node["d"]}
    if "l" in node:
        items = [_unflatten(v, data, offsets) for v in node["l"]]
        return tuple(items) if node.get("tuple") else items
    return node["v"]


def state_bytes(model: torch.nn.Module, optimizer=None) -> bytes:
    """The model's state_dict and the optimizer's, as deterministic bytes
    (equal states give equal bytes in any process)."""
    tensors = []
    tree = _flatten({"model": model.state_dict(), "optimizer": optimizer.state_dict() if optimizer else None},
                    tensors)
    meta = json.dumps({"tree": tree, "sizes": [t.numel() * t.element_size() for t in tensors]},
                      sort_keys=True, separators=(",", ":")).encode()
    parts = [_MAGIC, struct.pack("<Q", len(meta)), meta]
    parts += [t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"" for t in tensors]
    return b"".join(parts)


def load_state_bytes(model: torch.nn.Module, optimizer, blob: bytes):
    """Loads what state_bytes wrote (ValueError naming what is wrong)."""
    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + 8:
        raise ValueError("not a loft training state (bad magic)")
    (n,) = struct.unpack_from("<Q", blob, len(_MAGIC))
    start = len(_MAGIC) + 8
    meta = json.loads(blob[start:start + n])
    data = memoryview(blob)[start + n:]
    offsets = [0]
    for s in meta["sizes"]:
        offsets.append(offsets[-1] + s)
    if offsets[-1] != len(data):
        raise ValueError(f"training state: {len(data)} tensor bytes, the header says {offsets[-1]}")
    st = _unflatten(meta["tree"], data, offsets)
    model.load_state_dict(st["model"])
    if optimizer is not None and st["optimizer"] is not None:
        optimizer.load_state_dict(st["optimizer"])


def parameter_hash(model: torch.nn.Module) -> int:
    """64-bit hash of the parameters' bytes (equal parameters, equal hash)."""
    h = hashlib.blake2b(digest_size=8)
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return int.from_bytes(h.digest(), "little") or 1


def _params(model):
    return [p for p in model.parameters() if p.requires_grad]


def allreduce_gradients(model: torch.nn.Module, batch: Batch, optimizer=None) -> bool:
    """Replaces every parameter's .grad by the round's aggregate of all
    members' gradients (the agent's ring, the spec's aggregation rule, b_i/B
    weights). Returns True when the caller should optimizer.step(), False
    when there is nothing to apply (the round was already done; the
    gradient is carried into the next one). With `optimizer` the current
    state is published first (restarted members can fetch it), and a
    majority state handed back is loaded into model and optimizer.
    Raises loft.LoftError when the round gives nothing to apply for
    everyone (e.g. a non-finite aggregate) or fails, and when the job
    exchanges model deltas (training.exchange.period > 1 or auto: use
    Exchange, which takes the local steps)."""
    if batch.delta_exchange:
        raise LoftError(f"batch {batch.partition_id} (round {batch.round}): the spec's training.exchange.period "
                        "is not 1 (local steps and a model-delta exchange): allreduce_gradients cannot take "
                        "them; use loft.torch.Exchange")
    params = _params(model)
    if optimizer is not None:
        batch.consumer.put_state(state_bytes(model, optimizer))
    n = sum(p.numel() for p in params)
    flat = torch.zeros(n, dtype=torch.float32)
    if batch.count > 0:
        at = 0
        for p in params:
            k = p.numel()
            if p.grad is not None:
                flat[at:at + k].copy_(p.grad.detach().reshape(-1))
            at += k
    outcome = batch.allreduce((flat.data_ptr(), n))
    if outcome == 0:
        return False
    if outcome == 2:
        load_state_bytes(model, optimizer, batch.state())
    at = 0
    for p in params:
        k = p.numel()
        g = flat[at:at + k].view_as(p).to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.copy_(g)
        at += k
    return True


def sync_state(model: torch.nn.Module, optimizer=None, source=None) -> int:
    """Loads the ring majority's state (for a restarted trainer, before its
    first batch). source: a LoftBatches or Consumer (default: the last
    LoftBatches made). Returns the round the state holds, -1 when no member
    has progress yet (the model is left as it is)."""
    if source is None:
        source = _last_batches
    if source is None:
        raise LoftError("sync_state: no LoftBatches yet; pass source=")
    consumer = source.consumer if isinstance(source, LoftBatches) else source
    round_, blob = consumer.sync_state()
    if round_ >= 0 and blob:
        load_state_bytes(model, optimizer, blob)
    return round_


def _flat_params(params) -> torch.Tensor:
    """The parameters as one float32 vector (a copy)."""
    if not params:
        return torch.zeros(0, dtype=torch.float32)
    return torch.cat([p.detach().reshape(-1).to(torch.float32) for p in params])


class Exchange:
    """Applies each batch the way the spec's training.exchange says (the
    rules of the agents' built-in trainer, edge_agent/model_trainer.h
    "Exchange modes"). Call step(batch) after the batch's backward pass:

    - period 1 (batch.delta_exchange False): allreduce_gradients, then
      optimizer.step() when there is an aggregate to apply;
    - a local step (batch.local_step): the gradient times batch.local_scale
      (this member's share of the global batch), optimizer.step(); no
      all-reduce;
    - the round's last step: the same step, then the round's starting state
      is published and the model delta (parameters - the round's starting
      parameters) all-reduced; every member sets parameters = start +
      aggregate. Momentum: torch.optim.SGD's momentum buffers are set to
      -aggregate / (sum of the learning rates of the round's planned steps,
      lr_at(step), default the optimizer's current one), identical on every
      member; any other optimizer goes back to the state the round started
      with (its local state is not exchanged). A majority state handed back
      (a stale member) is loaded first; an aggregate for a round already
      exchanged here (a late partition) leaves the step in the next round;
      an error puts the round's starting state back and raises LoftError.

    agreed_hash(): the parameters' hash every member holds (after a local
    step: the round's start), for batch.set_metrics. Returns True when the
    parameters moved (a step or an aggregate was applied). corrupt_delta
    (tests of Byzantine members): called in place on the flat delta before
    it is all-reduced, as the built-in trainer corrupts a delta."""

    def __init__(self, model: torch.nn.Module, optimizer, lr_at: Optional[Callable[[int], float]] = None,
                 corrupt_delta: Optional[Callable[[torch.Tensor], None]] = None):
        self.model = model
        self.optimizer = optimizer
        self.lr_at = lr_at
        self.corrupt_delta = corrupt_delta
        self.exchanges = 0  # all-reduces run (gradients or deltas)
        self.local_steps = 0
        self._anchor = None  # the round's starting parameters (float32, flat)
        self._anchor_state = None  # its state_bytes (parameters + optimizer), what is published
        self._anchor_opt = None  # its optimizer state_dict
        self._anchor_hash = None

    def start_round(self):
        """The current parameters and optimizer state start a round."""
        self._anchor = _flat_params(_params(self.model))
        self._anchor_state = state_bytes(self.model, self.optimizer)
        self._anchor_opt = copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None
        self._anchor_hash = parameter_hash(self.model)

    def agreed_hash(self) -> int:
        return self._anchor_hash if self._anchor_hash is not None else parameter_hash(self.model)

    def state_hash(self) -> int:
        """64-bit hash of the agreed state's bytes (parameters and optimizer)."""
        blob = self._anchor_state if self._anchor_state is not None else state_bytes(self.model, self.optimizer)
        return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little")

    def step(self, batch: Batch) -> bool:
        if not batch.delta_exchange:
            self.exchanges += 1
            if allreduce_gradients(self.model, batch, self.optimizer):
                self.optimizer.step()
                return True
            return False
        if self._anchor is None:
            self.start_round()
        if batch.count > 0:
            if batch.local_scale != 1.0:
                for p in _params(self.model):
                    if p.grad is not None:
                        p.grad.mul_(batch.local_scale)
            self.optimizer.step()
        if batch.local_step:
            self.local_steps += 1
            return batch.count > 0
        return self._exchange(batch)

    def _set_params(self, flat: torch.Tensor):
        at = 0
        with torch.no_grad():
            for p in _params(self.model):
                k = p.numel()
                p.copy_(flat[at:at + k].view_as(p).to(p.dtype))
                at += k

    def _restore(self):
        load_state_bytes(self.model, self.optimizer, self._anchor_state)

    def _exchange(self, batch: Batch) -> bool:
        self.exchanges += 1
        batch.consumer.put_state(self._anchor_state)
        delta = _flat_params(_params(self.model)) - self._anchor
        if self.corrupt_delta is not None:
            self.corrupt_delta(delta)
        try:
            outcome = batch.allreduce((delta.data_ptr(), delta.numel()))
        except LoftError:
            self._restore()  # every member refuses the round alike (or this one is behind now)
            self.start_round()
            raise
        if outcome == 0:
            return batch.count > 0  # exchanged already: this step is one of the next round
        if outcome == 2:
            load_state_bytes(self.model, self.optimizer, batch.state())
            self._anchor = _flat_params(_params(self.model))
            self._anchor_opt = copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None
        self._set_params(self._anchor + delta)
        self._momentum(delta, batch.round_steps(), batch.round)
        self.start_round()
        return True

    def _lr(self, step: int) -> float:
        if self.lr_at is not None:
            return float(self.lr_at(step))
        return float(self.optimizer.param_groups[0]["lr"])

    def _momentum(self, aggregate: torch.Tensor, steps: int, round_: int):
        opt = self.optimizer
        if opt is None:
            return
        sgd = isinstance(opt, torch.optim.SGD) and any(g.get("momentum", 0) for g in opt.param_groups)
        if not sgd:
            opt.load_state_dict(copy.deepcopy(self._anchor_opt))
            return
        steps = max(1, steps)
        lr_sum = sum(self._lr(s) for s in range(round_ - steps + 1, round_ + 1))
        if not lr_sum > 0:
            opt.load_state_dict(copy.deepcopy(self._anchor_opt))
            return
        at = 0
        for p in _params(self.model):
            k = p.numel()
            opt.state[p]["momentum_buffer"] = (-aggregate[at:at + k] / lr_sum).view_as(p).to(p.dtype).clone()
            at += k
