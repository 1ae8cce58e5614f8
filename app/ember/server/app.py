"""The ASGI application: routes, body limit, streaming, and a client that leaves cancelling
its generation."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from . import anthropic, extras, openai_responses
from .anthropic import MessageAnswer
from .engine_state import LoadedModel
from .errors import ApiError, error_body
from .guard import Guard, HostPolicy
from .jobs import Finish, Job
from .protocol import parse_chat, parse_completion, parse_json
from .responses import Answer, sse

MAX_BODY_BYTES = 4 * 1024 * 1024


class ServerState:
    """What the routes share: the model once loaded (None while loading), or why not."""

    def __init__(self, model_path: str):
        self.model_path = model_path
        self.loaded: LoadedModel | None = None
        self.error: str | None = None


def _error(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), status_code=e.status)


def _loading() -> JSONResponse:
    # llama-server's answer while it loads; clients poll /health for 200
    return JSONResponse({"error": {"message": "Loading model", "type": "unavailable_error",
                                   "code": 503}}, status_code=503)


async def _read_body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise ApiError(413, f"The request body is {int(length)} bytes; the limit is "
                            f"{MAX_BODY_BYTES}.", code="request_too_large")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"The request body is over the limit of {MAX_BODY_BYTES} "
                                "bytes.", code="request_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


async def _wait_disconnect(request: Request) -> None:
    """Returns when the client has gone (the body is read: receive() waits for that)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _events(job: Job) -> AsyncIterator[tuple[str, object]]:
    while True:
        kind, value = await job.events.get()
        yield kind, value
        if kind in ("done", "error"):
            return


async def _whole(request: Request, job: Job, answer: Answer) -> Response:
    async def collect():
        text = []
        logprobs = None if job.top_logprobs is None else []
        async for kind, value in _events(job):
            if kind == "text":
                text.append(value)
            elif kind == "logprobs":
                logprobs.extend(value)
            elif kind == "error":
                return JSONResponse(answer.failure(str(value)), status_code=500)
            else:
                reply, reasoning, calls = "".join(text), None, []
                if job.reply is not None:
                    reasoning, reply, calls = job.reply.whole(reply)
                return JSONResponse(answer.whole(reply, value, logprobs, calls,
                                                 reasoning=reasoning))

    collecting = asyncio.ensure_future(collect())
    leaving = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({collecting, leaving}, return_when=asyncio.FIRST_COMPLETED)
        if collecting in done:
            return collecting.result()
        job.cancel()  # nobody is waiting for the answer any more
        return Response(status_code=499)
    finally:
        for t in (collecting, leaving):
            t.cancel()
        job.cancel()  # a no-op once the job is done


async def _stream(job: Job, answer: Answer) -> AsyncIterator[bytes]:
    # Starlette cancels this generator when the client disconnects: finally cancels the job
    try:
        first = answer.first_chunk()
        if first is not None:
            yield sse(first)
        logprobs = None
        reply = job.reply  # None: the text as it is, each piece with its tokens' logprobs
        calls = []
        async for kind, value in _events(job):
            if kind == "logprobs":
                # the next text's tokens (text a filter holds back: the next sent)
                logprobs = value if logprobs is None or reply is None else logprobs + value
            elif kind == "text":
                if reply is None:
                    yield sse(answer.text_chunk(value, logprobs))
                    logprobs = None
                    continue
                for part, text in reply.feed(value):
                    yield sse(answer.text_chunk(text, logprobs, reasoning=part == "thought"))
                    logprobs = None
            elif kind == "error":
                yield sse(error_body(str(value), "server_error"))
                return
            else:
                assert isinstance(value, Finish)
                if reply is not None:
                    for part, text in reply.finish():
                        yield sse(answer.text_chunk(text, logprobs,
                                                    reasoning=part == "thought"))
                        logprobs = None
                    calls = reply.calls
                    for chunk in answer.tool_call_chunks(calls):
                        yield sse(chunk)
                if logprobs and not calls:
                    # tokens whose text is empty (a character cut by max_tokens): as unfiltered
                    yield sse(answer.text_chunk("", logprobs))
                for chunk in answer.final_chunks(value, bool(calls)):
                    yield sse(chunk)
        yield sse("[DONE]")
    finally:
        job.cancel()


def _generation_route(chat: bool):
    async def endpoint(request: Request) -> Response:
        state: ServerState = request.app.state.ember
        loaded = state.loaded
        if loaded is None:
            return _loading()
        try:
            body = parse_json(await _read_body(request))
            if chat:
                req = parse_chat(body, loaded.ids, loaded.strict_model_names,
                                 loaded.model.n_vocab, loaded.reasoning_format)
            else:
                req = parse_completion(body, loaded.ids, loaded.model.n_vocab,
                                       loaded.strict_model_names)
            job = await run_in_threadpool(loaded.prepare, req, asyncio.get_running_loop())
        except ApiError as e:
            return _error(e)
        answer = Answer(chat, req.model, req.include_usage)
        loaded.pool.submit(job)
        if req.stream:
            # the background task also runs when the client left before the stream began
            # (then the generator's own finally never does)
            return StreamingResponse(_stream(job, answer), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache",
                                              "X-Accel-Buffering": "no"},
                                     background=BackgroundTask(job.cancel))
        return await _whole(request, job, answer)

    return endpoint


def _sse_event(name: str, data: dict) -> bytes:
    return f"event: {name}\n".encode() + sse(data)


async def _event_stream(job: Job, answer) -> AsyncIterator[bytes]:
    """Named events (Anthropic's messages, OpenAI's responses): answer.start(), answer.text()
    per piece of text, answer.finish() with the tool calls, each a list of (event, data)."""
    try:
        for event in answer.start(len(job.ids)):
            yield _sse_event(*event)
        reply = job.reply

        def events(parts):
            for part, text in parts:
                yield from (answer.thinking(text) if part == "thought" else answer.text(text))

        async for kind, value in _events(job):
            if kind == "text":
                parts = reply.feed(value) if reply is not None else [("answer", value)]
                for event in events(parts):
                    yield _sse_event(*event)
            elif kind == "error":
                yield _sse_event("error", answer.failure(str(value)))
                return
            elif kind == "done":
                calls = []
                if reply is not None:
                    for event in events(reply.finish()):
                        yield _sse_event(*event)
                    calls = reply.calls
                for event in answer.finish(value, calls):
                    yield _sse_event(*event)
    finally:
        job.cancel()


def _anthropic_error(e: ApiError) -> JSONResponse:
    return JSONResponse(anthropic.as_anthropic(e), status_code=e.status)


async def messages(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    loaded = state.loaded
    if loaded is None:
        return JSONResponse(anthropic.error_body(503, "Loading model"), status_code=503)
    try:
        body = parse_json(await _read_body(request))
        req = anthropic.parse_messages(body, loaded.ids, loaded.strict_model_names,
                                       loaded.model.n_vocab)
        job = await run_in_threadpool(loaded.prepare, req, asyncio.get_running_loop())
    except ApiError as e:
        return _anthropic_error(e)
    answer = MessageAnswer(req.model, req.stop)
    loaded.pool.submit(job)
    if req.stream:
        return StreamingResponse(_event_stream(job, answer), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                 background=BackgroundTask(job.cancel))
    return await _whole(request, job, answer)


async def responses(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    loaded = state.loaded
    if loaded is None:
        return _loading()
    try:
        body = parse_json(await _read_body(request))
        req = openai_responses.parse_responses(body, loaded.ids, loaded.strict_model_names,
                                               loaded.model.n_vocab)
        job = await run_in_threadpool(loaded.prepare, req, asyncio.get_running_loop())
    except ApiError as e:
        return _error(e)
    answer = openai_responses.ResponseAnswer(req.model, openai_responses.request_echo(body))
    loaded.pool.submit(job)
    if req.stream:
        return StreamingResponse(_event_stream(job, answer), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                                 background=BackgroundTask(job.cancel))
    return await _whole(request, job, answer)


async def count_tokens(request: Request) -> Response:
    loaded = request.app.state.ember.loaded
    if loaded is None:
        return JSONResponse(anthropic.error_body(503, "Loading model"), status_code=503)
    try:
        body = parse_json(await _read_body(request))
        req = anthropic.parse_messages(body, loaded.ids, loaded.strict_model_names,
                                       loaded.model.n_vocab, count_only=True)

        def count() -> int:
            return len(loaded.model.prompt_ids(loaded.chat_prompt(req)[0]))

        return JSONResponse({"input_tokens": await run_in_threadpool(count)})
    except ApiError as e:
        return _anthropic_error(e)


async def health(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    if state.loaded is None:
        return _loading()
    return JSONResponse({"status": "ok", **state.loaded.pool.status()})


async def models(request: Request) -> Response:
    state: ServerState = request.app.state.ember
    loaded = state.loaded
    if loaded is None:
        return _loading()
    m = loaded.model
    return JSONResponse({"object": "list", "data": [{
        "id": loaded.id, "object": "model", "created": int(loaded.path.stat().st_mtime),
        "owned_by": "ember",
        "meta": {"arch": m.arch, "ftype": m.ftype, "n_params": m.n_params,
                 "n_ctx_train": m.n_ctx_train, "n_ctx": loaded.n_ctx,
                 "slots": len(loaded.pool.contexts)}}]})


def _extra_post(handler):
    """A POST route of extras.py: JSON body in, handler(loaded, body) in a worker thread."""
    async def endpoint(request: Request) -> Response:
        loaded = request.app.state.ember.loaded
        if loaded is None:
            return _loading()
        try:
            body = parse_json(await _read_body(request))
            return JSONResponse(await run_in_threadpool(handler, loaded, body))
        except ApiError as e:
            return _error(e)
    return endpoint


async def props(request: Request) -> Response:
    loaded = request.app.state.ember.loaded
    return _loading() if loaded is None else JSONResponse(extras.props(loaded))


async def slots(request: Request) -> Response:
    loaded = request.app.state.ember.loaded
    return _loading() if loaded is None else JSONResponse(loaded.pool.slots())


async def metrics(request: Request) -> Response:
    loaded = request.app.state.ember.loaded
    if loaded is None:
        return _loading()
    return PlainTextResponse(extras.metrics_text(loaded),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


async def _http_error(request: Request, exc: HTTPException) -> Response:
    messages = {404: f"There is no {request.url.path} here (see GET /v1/models).",
                405: f"{request.method} is not allowed on {request.url.path}."}
    return JSONResponse(error_body(messages.get(exc.status_code, str(exc.detail))),
                        status_code=exc.status_code, headers=getattr(exc, "headers", None))


async def _internal_error(request: Request, exc: Exception) -> Response:
    return JSONResponse(error_body(f"internal error: {type(exc).__name__}", "server_error"),
                        status_code=500)


def build_app(state: ServerState, *, host: str, api_key: str | None = None,
              cors: str | None = None, allow_hosts: tuple[str, ...] = ()) -> Guard:
    chat, completions = _generation_route(True), _generation_route(False)
    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/completions", completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/responses", responses, methods=["POST"]),
        # Anthropic's Messages API
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        # llama-server's extras
        Route("/tokenize", _extra_post(extras.tokenize), methods=["POST"]),
        Route("/detokenize", _extra_post(extras.detokenize), methods=["POST"]),
        Route("/apply-template", _extra_post(extras.apply_template), methods=["POST"]),
        Route("/props", props, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/slots", slots, methods=["GET"]),
    ]
    middleware = []
    if cors:
        middleware.append(Middleware(CORSMiddleware, allow_origins=[cors],
                                     allow_methods=["GET", "POST", "OPTIONS"],
                                     allow_headers=["Authorization", "Content-Type", "X-Api-Key"]))
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={HTTPException: _http_error, Exception: _internal_error})
    app.state.ember = state
    return Guard(app, HostPolicy(host, allow_hosts), api_key, cors)
