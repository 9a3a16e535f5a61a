"""Extraction over many processes: `Extractor` for data frameworks (Ray Data's map_batches,
Spark's mapInPandas, Dask's map_partitions), and the Ray driver of `clover-struct extract --ray`.

`Extractor` maps a batch of texts (a dict of numpy arrays, or a pandas DataFrame) to the same
batch plus the record (as JSON, or its fields as columns) and an `error` column. It loads its
model in its constructor and pickles as its arguments: a copy loads the model where it lands,
once per process, and never ships weights.

`ray_workers` keeps on the driver all that the single-process run does there: the CLI reads the
inputs (so source names and the reasons of unreadable inputs are the same), forms the batches
in the same order and size, and writes every line. Ray actors, one model each, only decode.
Results come back in input order, so the output is the single-process output line for line.
Ray restarts an actor that dies and retries its calls (RESTARTS); since only the driver writes,
and writes a batch once its result has arrived, a retried batch is written once.

Imports neither ray nor pandas: ray only when the CLI is asked for it, and a DataFrame is used
through its own methods.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import socket
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path

from .errors import CheckpointError, CloverError, ExtractionError, SchemaError, UsageError
from .layout import ObjectNode

RESTARTS = 3        # a dead actor is restarted, and its calls retried, this many times before the run stops
WINDOW = 2          # batches in flight per actor: one decoding, one waiting, so no actor idles
REACH_SECONDS = 5   # how long a cluster's address may take to answer a connection

_MODELS: dict = {}
_MODELS_LOCK = threading.Lock()


def shared_model(source=None, device=None, dtype=None):
    """The model in directory `source` (None: the embedded clover-mini), loaded once per process."""
    from .api import load_model

    key = (None if source is None else str(source), device, dtype)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = load_model(source, device=device, dtype=dtype)
        return _MODELS[key]


def decode_batch(texts: list, schema, model, batch_size: int, truncate: bool = False) -> list[tuple]:
    """api.extract_many over one batch, (value or error, Trace) per text; should it fail as a
    whole (it isolates records itself), each text is decoded alone, so the failure stays with
    its record. Mistakes of the setup (UsageError, SchemaError, CheckpointError) are raised:
    every record would fail alike."""
    from .api import extract_many, internal_failure
    from .rows import Trace

    try:
        return extract_many(texts, schema, model=model, batch_size=batch_size, trace=True, truncate=truncate)
    except (UsageError, SchemaError, CheckpointError):
        raise
    except Exception as e:
        if len(texts) == 1:
            return [(internal_failure("extraction", e), Trace())]
        return [decode_batch([t], schema, model, 1, truncate)[0] for t in texts]


def outcome(result: tuple) -> tuple:
    """(record as JSON data, None, (field, confidence) of its least sure field), or (None, why it
    failed, None), for one (value, trace) of extract_many(trace=True). A record the model chose
    nothing in (a schema without fields) is certain: ("", 1.0)."""
    value, trace = result
    if isinstance(value, CloverError):
        return None, value.reason if isinstance(value, ExtractionError) and value.path == "" else str(value), None
    record = value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value
    return record, None, trace.lowest or ("", 1.0)


def _rebuild(cls, args):
    return cls(**args)


class Extractor:
    """Texts in a batch -> records, for data frameworks; the model is loaded once, in the constructor.

        ds.map_batches(Extractor, fn_constructor_kwargs={"schema": Notam}, concurrency=4, batch_size=16)

    `schema`: a pydantic model class (importable where the workers run) or a JSON Schema dict.
    `model`: a model directory, a loaded model (a copy loads it again from its directory, on
    its device and in its dtype), or None for the embedded clover-mini. `device`: where a model
    loaded from a directory goes ("cuda" beside Ray's num_gpus=1), `dtype` what it computes in
    ("bfloat16"; default float32 on the CPU, bfloat16 on CUDA). `batch_size`: texts decoded
    jointly. `truncate`: a text longer than the context leaves room for is read to there (else
    its row is an error). The output is the input batch, of the same kind, plus `record` (the
    record as a JSON string; None where it failed), `error` (None, or why the record failed) and
    `confidence` (the model's confidence in the record's least sure field; None where it failed);
    with `columns=True`, the record's top-level fields are columns of their own instead of `record`.
    """

    def __init__(self, schema, model=None, text_field: str = "text", batch_size: int = 16, *,
                 columns: bool = False, device: str | None = None, truncate: bool = False, dtype=None):
        from .api import check_options, model_lock, prepare

        check_options(batch_size=batch_size)
        if not isinstance(text_field, str):
            raise UsageError(f"text_field names the column of the texts, a str, not {text_field!r}")
        loaded = hasattr(model, "config")
        if model is not None and not loaded and not isinstance(model, (str, Path)):
            raise UsageError(f"model= takes a model directory, a loaded model or None (the embedded "
                             f"clover-mini), not a {type(model).__name__}")
        source = getattr(model, "source", None) if loaded else model
        if loaded and source:   # a copy loads it from its directory as it is here
            device, dtype = str(model.device), str(next(model.parameters()).dtype).removeprefix("torch.")
        self._args = dict(schema=schema, model=source if loaded and source else model, text_field=text_field,
                          batch_size=batch_size, columns=columns, device=device, truncate=truncate, dtype=dtype)
        self.schema, self.text_field, self.batch_size, self.columns = schema, text_field, batch_size, columns
        self.truncate = truncate
        self.model = model if loaded else shared_model(model, device, dtype)
        with model_lock(self.model):
            _, canvas, _ = prepare(schema, self.model)   # the schema checked, its automata built, once
        if columns and not (isinstance(canvas.tree, ObjectNode) and canvas.tree.extra is None):
            raise UsageError("columns=True makes a column of each of the record's keys, but this schema's record is "
                             "no object of named keys (a list, a value, a union or a map); leave columns out")
        self.fields = [key for key, _ in canvas.tree.fields] if columns else []
        if columns and hasattr(schema, "model_json_schema"):   # as the records name them: by alias
            self.fields = list(schema.model_json_schema(mode="serialization")["properties"])
        if text_field in ("error", "confidence") or text_field == "record" and not columns:
            raise UsageError(f"text_field `{text_field}` is a column the output writes, which would replace the "
                             "texts; rename the texts' column")
        if clash := [f for f in self.fields if f in (text_field, "error", "confidence")]:
            raise UsageError(f"columns=True: the record's key `{clash[0]}` would be a column the output has already "
                             "(the texts, error or confidence); leave columns out (or, for the texts' column, name "
                             "it otherwise and pass text_field=)")

    def __reduce__(self):   # pickled as its arguments: the copy loads (or reuses) its model where it lands
        return _rebuild, (type(self), self._args)

    def __call__(self, batch):
        frame = hasattr(batch, "iloc")   # a pandas DataFrame (Spark, Dask, Ray's batch_format="pandas")
        if not frame and not isinstance(batch, Mapping):
            raise UsageError(f"Extractor takes a batch as a dict of arrays or a pandas DataFrame (Ray Data: "
                             f"batch_format='numpy' or 'pandas'), not a {type(batch).__name__}")
        labels = list(batch.columns if frame else batch)
        names = [str(c) for c in labels]
        if names.count(self.text_field) != 1:
            raise UsageError(f"the batch has {'no' if self.text_field not in names else 'more than one'} column "
                             f"`{self.text_field}` (it has {', '.join(names) or 'none'}); name the one column of the "
                             "texts with text_field=")
        column = batch[labels[names.index(self.text_field)]]   # (a label 0 is named "0")
        if isinstance(column, (str, bytes)) or not hasattr(column, "__len__"):
            raise UsageError(f"column `{self.text_field}` is one {type(column).__name__}, not a column of texts; give "
                             "a list or array of them (one text: {'text': [text]})")
        new = (self.fields if self.columns else ["record"]) + ["error", "confidence"]
        if clash := [c for c in new if c in names and c != self.text_field]:
            raise UsageError(f"the batch already has column(s) {', '.join(clash)}, which the output adds; rename "
                             "or drop them first")
        texts = [str(t) if isinstance(t, str) else t for t in column]   # numpy's str_ -> str
        pairs = [outcome(v) for v in decode_batch(texts, self.schema, self.model, self.batch_size, self.truncate)] \
            if texts else []
        records = [r for r, _, _ in pairs]
        columns = {f: [None if r is None else r.get(f) for r in records] for f in self.fields} if self.columns \
            else {"record": [None if r is None else json.dumps(r, ensure_ascii=False) for r in records]}
        columns["error"] = [why for _, why, _ in pairs]
        columns["confidence"] = [low and low[1] for _, _, low in pairs]
        if frame:   # object columns: None stays None (pandas' string dtype would make it NaN)
            import pandas as pd

            return batch.assign(**{name: pd.Series(_objects(values), index=batch.index, dtype=object)
                                   for name, values in columns.items()})
        return {**batch, **{name: _objects(values) for name, values in columns.items()}}


def _objects(values: list):
    """A numpy array of Python objects (dicts and lists stay whole, never a 2-D array)."""
    import numpy as np

    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


class Worker:
    """A Ray actor of `clover-struct extract --ray`: one model, decoding the driver's batches. A
    mistake of the setup (model, schema) is kept and told by ready(), so the driver raises it."""

    def __init__(self, schema, model, device, batch_size: int, truncate: bool = False):
        from .api import model_lock, prepare

        self.schema, self.batch_size, self.truncate, self.error = schema, batch_size, truncate, None
        try:
            self.model = shared_model(model, device)
            with model_lock(self.model):
                prepare(schema, self.model)
        except CloverError as e:
            self.error = e

    def ready(self):
        return self.error

    def decode(self, texts: list[str]) -> list[tuple]:
        return [outcome(v) for v in decode_batch(texts, self.schema, self.model, self.batch_size, self.truncate)]


def import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'clover-struct[ray]' (or pip install 'ray[data]')") from None
    return ray


@contextlib.contextmanager
def ray_workers(schema, *, address: str | None, workers: int | None, model, device, batch_size: int,
                truncate: bool = False):
    """Ray actors ready to decode, on the cluster at `address` or a local one (an already
    started one is used as it is): every setup mistake is said before anything is written.
    Yields `decode(batches)`: (batch, outcomes) for each batch of (source, text, why) records,
    in order."""
    ray = import_ray()
    _reachable(address)
    started = not ray.is_initialized()
    if started:
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING)
        except Exception as e:   # Ray's own start-up (seen: a local raylet timing out on a loaded machine)
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise CloverError(f"--ray: could not start or reach {where} ({type(e).__name__}: {e}); check the "
                              "address, or on a busy machine run again (--resume goes on from what is written)") from e
        if threading.current_thread() is threading.main_thread():   # ray.init sets its own SIGTERM exit:
            for s, handler in handlers.items():                     # the CLI's stop-after-the-batch stays
                signal.signal(s, handler)
    actors = []
    try:
        gpu = bool(device) and str(device).startswith("cuda")
        kind = "GPU" if gpu else "CPU"
        have = int(ray.cluster_resources().get(kind, 0))
        n = workers or have
        if n < 1 or n > have:
            raise UsageError(f"--workers {n}: the Ray cluster has {have} {kind}(s) and each worker takes one; "
                             f"ask for 1 to {have}" if have else f"the Ray cluster has no {kind}; "
                             + ("add GPU nodes or leave out --device" if gpu else "add CPU nodes"))
        actor = ray.remote(Worker).options(num_cpus=0 if gpu else 1, num_gpus=1 if gpu else 0,
                                           max_restarts=RESTARTS, max_task_retries=RESTARTS)
        actors = [actor.remote(schema, model, device, batch_size, truncate) for _ in range(n)]
        try:
            ready = ray.get([a.ready.remote() for a in actors])
        except ray.exceptions.RayActorError as e:   # the schema's module or the model, not on the workers
            cause = re.findall(r"\b\w+(?:Error|Exception): [^\n]+", str(e))
            raise CloverError(f"--ray: the workers could not start ({cause[-1] if cause else type(e).__name__}); "
                              "each imports the schema's module and reads --model on its own machine: install "
                              "them there") from None
        for error in ready:
            if error is not None:
                raise error

        def decode(batches):
            pending: deque = deque()
            for k, batch in enumerate(batches):
                texts = [text for _, text, why in batch if why is None]
                pending.append((batch, actors[k % n].decode.remote(texts) if texts else None))
                if len(pending) >= WINDOW * n:
                    yield _arrived(ray, *pending.popleft())
            while pending:
                yield _arrived(ray, *pending.popleft())
        yield decode
    finally:
        for a in actors:
            ray.kill(a)
        if started:
            ray.shutdown()


def _reachable(address: str | None) -> None:
    """CloverError where nothing answers at a cluster's host:port (Ray would retry for minutes)."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return   # a local cluster, "auto", or a client address Ray reads itself
    try:
        socket.create_connection((host, int(port)), timeout=REACH_SECONDS).close()
    except OSError as e:
        raise CloverError(f"--ray: nothing answers at {address} ({e.strerror or e}); check the address (`ray "
                          "status` on the head node prints it)") from None


def _arrived(ray, batch, ref):
    if ref is None:
        return batch, []
    try:
        return batch, ray.get(ref)
    except ray.exceptions.RayTaskError as e:   # a mistake of the setup the workers met (a CloverError)
        if isinstance(e.cause, CloverError):
            raise e.cause from None
        raise
    except ray.exceptions.RayActorError as e:
        raise CloverError(f"a Ray worker died {RESTARTS + 1} times decoding one batch ({e.__class__.__name__}); "
                              "what is written is complete: look at the workers' logs (out of memory?), then "
                              "run again with --resume") from None
