"""An OpenAI-compatible HTTP server for structured output: `clover-struct serve`.

POST /v1/chat/completions with a `response_format` that holds a JSON Schema (chat_request.py
reads the request: the text is the user messages' content) answers with the record as
`message.content`, or with an OpenAI error object.

Requests are gathered, up to `max_batch`, waiting at most `max_wait_ms` after the first, and
decoded on one worker thread: one joint decode per schema, temperature, seed and width of the
texts' letters of a batch (decoder.decode lays all canvases of a decode on one layout). The event
loop only parses, queues and answers. Canvases and automata are kept per schema. With `stream:
true` every SSE chunk's content is a whole JSON object, the fields settled so far (a diffusion
model settles fields in any order, so chunks are snapshots, not pieces to concatenate); the last
one is the validated record.

Knows nothing of decoding beyond api.py's functions. starlette and uvicorn (the `serve` extra)
are imported here only, and this module only by `clover-struct serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from . import api
from .chat_request import ApiError, Request, parse_request
from .errors import CheckpointError, ExtractionError, InternalError, SchemaError, UsageError
from .layout import KeyNode, ListNode, ObjectNode, OptionalNode

LAYOUTS = 64   # schemas whose canvas and automata are kept
MAX_DIGITS = 4300   # digits of a whole number in a body (Python reads no more by default)


@dataclass
class Job:
    """A request in the server: what the worker decodes, and the queue it answers on (from its thread)."""
    request: Request
    loop: asyncio.AbstractEventLoop
    release: Callable[[], None]     # called on the loop when the job is answered (its place is free)
    events: asyncio.Queue = field(default_factory=asyncio.Queue)   # ("partial", dict)..., ("done", result)
    answered: bool = False

    @property
    def key(self) -> tuple:   # the jobs of a batch with one key share a joint decode
        r = self.request
        return json.dumps(r.schema), r.temperature, r.seed

    def send(self, kind: str, payload) -> None:
        self.loop.call_soon_threadsafe(self._put, kind, payload)

    def _put(self, kind: str, payload) -> None:   # on the loop: nothing after the first answer
        if not self.answered:
            self.answered = kind == "done"
            self.events.put_nowait((kind, payload))
            if self.answered:
                self.release()


_UNSET = object()   # a part of the record not settled yet


def settled(row):
    """The part of a decoding row's record settled so far, nested as in the record: every
    finished slot whose groups are decided present, the rest left out (a list holds null for an
    item not settled before one that is); None while nothing is."""
    canvas = row.canvas

    def walk(node):
        if isinstance(node, int):
            if not row.done[node]:
                return _UNSET
            try:
                return canvas.slots[node].value(canvas.slot_text(row.ids, node))
            except ExtractionError:
                return _UNSET
        if isinstance(node, ObjectNode):
            fields = [(k, n.node if isinstance(n, KeyNode) else n) for k, n in node.fields
                      if not isinstance(n, KeyNode) or row.present[n.group]]
            entries = [(walk(key), n) for g, key, n in (node.extra.entries if node.extra else ()) if row.present[g]]
            values = [(k, walk(n)) for k, n in fields + entries if k is not _UNSET]
            return {k: v for k, v in values if v is not _UNSET}
        if isinstance(node, ListNode):
            items = [walk(n) for g, n in node.items if row.present[g]]
            while items and items[-1] is _UNSET:
                items.pop()
            return [None if v is _UNSET else v for v in items]
        if isinstance(node, OptionalNode):
            return _UNSET if row.present[node.group] is None else walk(node.node) if row.present[node.group] else None
        tag = walk(node.selector)   # a union: its tag, then the fields of the member it names
        if tag is _UNSET:
            return _UNSET
        written = canvas.slot_text(row.ids, node.selector)
        member = next((obj for g, obj in node.variants if written in canvas.groups[g].tags), None)
        if member is None:
            return tag   # null
        fields = walk(member)
        return {node.key: tag, **fields} if node.key else fields

    out = walk(canvas.tree)
    return None if out is _UNSET else out


class Engine:
    """The model on its one worker thread, fed by a batcher on the event loop."""

    def __init__(self, model, max_batch: int, max_wait_ms: float):
        self.model, self.max_batch, self.max_wait = model, max_batch, max_wait_ms / 1000
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="clover-model")
        self.queue: asyncio.Queue | None = None
        self.layouts: dict = {}   # schema (JSON text) -> (canvas, automata), or its SchemaError
        self.stats = {"requests": 0, "batches": 0, "decodes": 0, "forward_passes": 0}

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            deadline = loop.time() + self.max_wait
            while len(batch) < self.max_batch:
                if not self.queue.empty():
                    batch.append(self.queue.get_nowait())
                    continue
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), max(deadline - loop.time(), 0)))
                except asyncio.TimeoutError:
                    break
            await loop.run_in_executor(self.executor, self.decode_batch, batch)

    def layout(self, schema: dict, width: int):
        key = json.dumps(schema), width
        if key not in self.layouts:
            if len(self.layouts) >= LAYOUTS:
                self.layouts.pop(next(iter(self.layouts)))
            try:
                self.layouts[key] = api.prepare(schema, self.model, letter_tokens=width)[1:]
            except (SchemaError, CheckpointError) as e:   # (the model's: a chat template failing on it)
                self.layouts[key] = e
        return self.layouts[key]

    def decode_batch(self, batch: list[Job]) -> None:
        """On the worker thread: each schema's jobs as one joint decode; every job answered."""
        self.stats["batches"] += 1
        self.stats["requests"] += len(batch)
        groups: dict[tuple, list[Job]] = {}
        for job in batch:   # (a width of each text: its free strings' budgets)
            width = api.laid_width(job.request.schema, self.model, None, api.text_width(self.model, job.request.text))
            groups.setdefault((*job.key, width), []).append(job)
        with api.model_lock(self.model):
            for (*_, width), jobs in groups.items():
                try:
                    self.decode_group(jobs, width)
                except Exception as e:   # a bug: these requests fail, the server goes on
                    for job in jobs:
                        job.send("done", ApiError(500, f"decoding failed ({type(e).__name__}: {e}); this is a bug "
                                                       "in clover-struct: please report it", type="server_error"))

    def decode_group(self, jobs: list[Job], width: int) -> None:
        layout = self.layout(jobs[0].request.schema, width)
        if isinstance(layout, SchemaError):
            for job in jobs:
                job.send("done", ApiError(400, str(layout), param="response_format", code="schema_not_supported"))
            return
        if isinstance(layout, CheckpointError):
            for job in jobs:
                job.send("done", ApiError(500, f"the served model cannot answer this schema: {layout}",
                                          type="server_error", code="model_error"))
            return
        canvas, automata = layout
        context = self.model.config.max_position_embeddings
        ready, prompts = [], {}
        for n, job in enumerate(jobs):
            text, limit = job.request.text, job.request.max_tokens
            if limit is not None and len(canvas) > limit:
                job.send("done", ApiError(400, f"the schema's canvas takes {len(canvas)} tokens, more than "
                                               f"max_tokens {limit}; raise max_tokens or leave it out",
                                          param="max_tokens"))
                continue
            try:
                ids, held = api.fit_prompt(self.model, text, canvas)
            except ExtractionError as e:   # the messages' text: empty, not Unicode, or past the context
                over = getattr(e, "over", 0)
                job.send("done", ApiError(400, f"the prompt and the schema's canvas take {over} tokens more than "
                                               f"the model's context of {context}; shorten the messages",
                                          param="messages", code="context_length_exceeded") if over else
                         ApiError(400, f"messages: {e.reason}", param="messages"))
                continue
            except SchemaError as e:   # a title the context cannot hold beside the canvas
                job.send("done", ApiError(400, str(e), param="response_format", code="schema_not_supported"))
                continue
            ready.append((n, ids, {}, held))
            prompts[n] = len(ids)
        streaming, shown = {n for n, job in enumerate(jobs) if job.request.stream}, {}

        def on_step(passes, rows):
            self.stats["forward_passes"] += passes
            for n in streaming & rows.keys():
                if (partial := settled(rows[n])) is not None and partial != shown.get(n):
                    shown[n] = partial
                    jobs[n].send("partial", partial)

        first = jobs[0].request
        options = dict(threshold=0.9, temperature=first.temperature, schedule="joint", use_cache=True, seed=first.seed)
        if ready:
            self.stats["decodes"] += 1
        for n, value, trace in api.decode_jobs(self.model, canvas, automata, ready, options, on_step):
            jobs[n].send("done", extraction_error(value) if isinstance(value, ExtractionError)
                         else (value, trace, prompts[n], len(canvas)))


class _NotANumber(ValueError):
    """A number in the body JSON has no value for (NaN, Infinity, past a double's range, or
    with more digits than Python reads)."""


def _not_json(word: str):
    raise _NotANumber(f"{word}, which is not finite")


def _finite(text: str) -> float:
    if not math.isfinite(value := float(text)):
        raise _NotANumber(f"{text}, which is not finite")
    return value


def _whole(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise _NotANumber(f"{text[:12]}... of {len(text.lstrip('-'))} digits")
    return int(text)


def extraction_error(e: ExtractionError) -> ApiError:
    """422 for a record no valid value was found for; 500 for a failure of clover-struct's own."""
    if isinstance(e, InternalError):
        return ApiError(500, str(e), type="server_error")
    return ApiError(422, str(e), type="extraction_error", param=e.path or None, code="extraction_failed",
                    path=e.path, reason=e.reason)


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse({"error": e.body}, status_code=e.status)


def usage(trace, prompt_tokens: int, canvas_tokens: int) -> dict:
    """OpenAI's usage (completion tokens: the canvas), and the forward passes the record took part in."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": canvas_tokens,
            "total_tokens": prompt_tokens + canvas_tokens, "forward_passes": trace.forward_passes}


def create_app(model=None, *, max_batch: int = 16, max_wait_ms: float = 10, api_key: str | None = None,
               max_body: int = 1 << 20, max_pending: int = 256) -> Starlette:
    """The server's ASGI app over `model` (default: the embedded clover-mini)."""
    model = model or api.load_model()
    api.prepare({"type": "string"}, model)   # a checkpoint no request could run on stops here, not in each request
    served = Path(model.source).resolve().name if getattr(model, "source", None) else "clover"   # (`.` too)
    engine, pending = Engine(model, max_batch, max_wait_ms), [0]

    def release() -> None:
        pending[0] -= 1

    def authorize(request) -> None:
        given = request.headers.get("authorization", "").encode()
        if api_key is not None and not hmac.compare_digest(given, f"Bearer {api_key}".encode()):
            raise ApiError(401, "missing or wrong API key: send the header `Authorization: Bearer KEY` with the key "
                                "the server was started with (--api-key)", code="invalid_api_key")

    async def health(request):
        return JSONResponse({"status": "ok", "model": served, "in_flight": pending[0], **engine.stats})

    async def models(request):
        authorize(request)
        return JSONResponse({"object": "list", "data": [{"id": served, "object": "model", "created": 0,
                                                          "owned_by": "clover-struct"}]})

    async def chat(request):
        authorize(request)
        size, body = request.headers.get("content-length", ""), bytearray()
        too_big = ApiError(413, f"the request body is over the {max_body}-byte limit (--max-body); send a "
                                "shorter text or schema", code="body_too_large")
        if size.isdigit() and int(size) > max_body:
            raise too_big
        async for piece in request.stream():
            body += piece
            if len(body) > max_body:
                raise too_big
        try:
            asked = parse_request(json.loads(body, parse_constant=_not_json, parse_float=_finite, parse_int=_whole),
                                  served)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the body is not valid JSON ({e}); send a chat completion request") from None
        except _NotANumber as e:
            raise ApiError(400, f"the body holds the number {e}; send finite numbers of at most {MAX_DIGITS} "
                                "digits") from None
        except RecursionError:
            raise ApiError(400, "the body nests lists and objects deeper than a JSON reader goes; flatten the "
                                "schema") from None
        try:
            api.check_options(seed=asked.seed)   # a whole number torch's generator takes
        except UsageError as e:
            raise ApiError(400, str(e), param="seed") from None
        if pending[0] >= max_pending:
            raise ApiError(503, f"the server is busy: {pending[0]} requests in flight (--max-pending); retry "
                                "later", type="server_busy", code="overloaded")
        pending[0] += 1   # until the worker answers, whether or not the client still listens
        job = Job(asked, asyncio.get_running_loop(), release)
        engine.queue.put_nowait(job)
        reply = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": served}
        event = await job.events.get()
        if asked.stream and not isinstance(event[1], ApiError):   # an error before any record keeps its status
            return StreamingResponse(stream(job, reply, event), media_type="text/event-stream")
        while event[0] != "done":
            event = await job.events.get()
        if isinstance(event[1], ApiError):
            return error_response(event[1])
        value, trace, prompt_tokens, canvas_tokens = event[1]
        return JSONResponse({**reply, "object": "chat.completion", "choices": [{
            "index": 0, "message": {"role": "assistant", "content": json.dumps(value, ensure_ascii=False)},
            "finish_reason": "stop"}], "usage": usage(trace, prompt_tokens, canvas_tokens)})

    async def stream(job, reply, event):
        def chunk(content, finish=None, **extra):
            choice = {"index": 0, "delta": {"role": "assistant", "content": json.dumps(content, ensure_ascii=False)},
                      "finish_reason": finish}
            return f"data: {json.dumps({**reply, 'object': 'chat.completion.chunk', 'choices': [choice], **extra})}\n\n"
        while event[0] == "partial":
            yield chunk(event[1])
            event = await job.events.get()
        if isinstance(event[1], ApiError):
            yield f"data: {json.dumps({'error': event[1].body})}\n\n"
        else:
            value, trace, prompt_tokens, canvas_tokens = event[1]
            yield chunk(value, "stop", usage=usage(trace, prompt_tokens, canvas_tokens))
        yield "data: [DONE]\n\n"

    async def api_error(request, e: ApiError):
        return error_response(e)

    async def http_error(request, e: HTTPException):
        response = error_response(ApiError(e.status_code, f"{request.method} {request.url.path}: {e.detail}; this "
                                           "server answers GET /health, GET /v1/models and POST /v1/chat/completions"))
        response.headers.update(e.headers or {})   # a 405's Allow
        return response

    @contextlib.asynccontextmanager
    async def lifespan(app):
        engine.queue = asyncio.Queue()
        batcher = asyncio.create_task(engine.run())
        yield
        batcher.cancel()   # uvicorn has let the requests in flight finish first
        engine.executor.shutdown(wait=True)

    return Starlette(routes=[Route("/health", health), Route("/v1/models", models),
                             Route("/v1/chat/completions", chat, methods=["POST"])],
                     exception_handlers={ApiError: api_error, HTTPException: http_error}, lifespan=lifespan)


def run(model, host: str = "127.0.0.1", port: int = 8000, **options) -> None:
    """Serve until SIGINT or SIGTERM; requests in flight are answered before it stops. UsageError
    where `host` and `port` cannot be listened on (in use, no such address)."""
    import uvicorn

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.create_server((host, port), family=family)
    except (OSError, OverflowError) as e:
        raise UsageError(f"cannot listen on {host}:{port} ({getattr(e, 'strerror', None) or e}); give another "
                         "--port, or a --host of this machine") from None
    with sock:
        uvicorn.Server(uvicorn.Config(create_app(model, **options), host=host, port=port,
                                      log_level="info")).run(sockets=[sock])


@contextlib.contextmanager
def in_thread(app, host: str = "127.0.0.1"):
    """The app served on a free port of `host` in a thread (tests, benchmarks): yields its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()
