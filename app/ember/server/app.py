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

from . import anthropic, embeddings, extras, openai_responses
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


async def _collect(job: Job) -> tuple:
    """One job's whole answer: ("ok", (text, Finish, logprobs, calls, reasoning)) or
    ("error", message)."""
    text = []
    logprobs = None if job.top_logprobs is None else []
    async for kind, value in _events(job):
        if kind == "text":
            text.append(value)
        elif kind == "logprobs":
            logprobs.extend(value)
        elif kind == "error":
            return "error", str(value)
        else:
            reply, reasoning, calls = "".join(text), None, []
            if job.reply is not None:
                reasoning, reply, calls = job.reply.whole(reply)
            return "ok", (reply, value, logprobs, calls, reasoning)
    return "error", "the generation ended without an answer"


async def _whole(request: Request, jobs: list[Job], answer, render) -> Response:
    """Waits for every job's answer (render(results) makes the body), or for the client to
    leave (then the jobs are cancelled)."""
    async def collect():
        results = await asyncio.gather(*(_collect(job) for job in jobs))
        failed = next((value for status, value in results if status == "error"), None)
        if failed is not None:
            return JSONResponse(answer.failure(failed), status_code=500)
        return JSONResponse(render([value for _, value in results]))

    collecting = asyncio.ensure_future(collect())
    leaving = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({collecting, leaving}, return_when=asyncio.FIRST_COMPLETED)
        if collecting in done:
            return collecting.result()
        for job in jobs:
            job.cancel()  # nobody is waiting for the answer any more
        return Response(status_code=499)
    finally:
        for t in (collecting, leaving):
            t.cancel()
        for job in jobs:
            job.cancel()  # a no-op once the job is done


def _one(answer):
    """render for a one-job answer (Anthropic's, the Responses API's)."""
    def render(results):
        text, finish, logprobs, calls, reasoning = results[0]
        return answer.whole(text, finish, logprobs, calls, reasoning=reasoning)
    return render


class _ChoiceStream:
    """One choice of a streamed chat/completion: its events in, its chunks out."""

    def __init__(self, index: int, job: Job, answer: Answer):
        self.index, self.job, self.answer = index, job, answer
        self.reply = job.reply  # None: the text as it is, each piece with its tokens' logprobs
        self.logprobs = None

    def _text(self, text: str, reasoning: bool = False) -> dict:
        chunk = self.answer.text_chunk(text, self.logprobs, reasoning=reasoning,
                                       index=self.index)
        self.logprobs = None
        return chunk

    def on(self, kind: str, value) -> list[dict]:
        answer, reply = self.answer, self.reply
        if kind == "logprobs":
            # the next text's tokens (text a filter holds back: the next sent)
            held = self.logprobs is not None and reply is not None
            self.logprobs = self.logprobs + value if held else value
            return []
        if kind == "text":
            if reply is None:
                return [self._text(value)]
            return [self._text(text, part == "thought") for part, text in reply.feed(value)]
        assert isinstance(value, Finish)
        out, calls = [], []
        if reply is not None:
            out += [self._text(text, part == "thought") for part, text in reply.finish()]
            calls = reply.calls
            out += answer.tool_call_chunks(calls, index=self.index)
        if self.logprobs and not calls:
            # tokens whose text is empty (a character cut by max_tokens): as unfiltered
            out.append(self._text(""))
        out.append(answer.final_chunk(value, bool(calls), index=self.index))
        return out


async def _stream(jobs: list[Job], answer: Answer) -> AsyncIterator[bytes]:
    # Starlette cancels this generator when the client disconnects: finally cancels the jobs
    merged: asyncio.Queue = asyncio.Queue()

    async def pump(i: int, job: Job) -> None:
        async for kind, value in _events(job):
            await merged.put((i, kind, value))

    pumps = [asyncio.ensure_future(pump(i, job)) for i, job in enumerate(jobs)]
    try:
        for i in range(len(jobs)):
            first = answer.first_chunk(index=i)
            if first is not None:
                yield sse(first)
        choices = [_ChoiceStream(i, job, answer) for i, job in enumerate(jobs)]
        finishes: list[Finish] = []
        while len(finishes) < len(jobs):
            i, kind, value = await merged.get()
            if kind == "error":
                yield sse(error_body(str(value), "server_error"))
                return
            for chunk in choices[i].on(kind, value):
                yield sse(chunk)
            if kind == "done":
                finishes.append(value)
        if answer.include_usage:
            yield sse(answer.usage_chunk(finishes))
        yield sse("[DONE]")
    finally:
        for p in pumps:
            p.cancel()
        for job in jobs:
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
            jobs = await run_in_threadpool(loaded.prepare_choices, req,
                                           asyncio.get_running_loop())
        except ApiError as e:
            return _error(e)
        answer = Answer(chat, req.model, req.include_usage)
        for job in jobs:
            loaded.pool.submit(job)
        if req.stream:
            # the background task also runs when the client left before the stream began
            # (then the generator's own finally never does)
            def cancel_all():
                for job in jobs:
                    job.cancel()
            return StreamingResponse(_stream(jobs, answer), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache",
                                              "X-Accel-Buffering": "no"},
                                     background=BackgroundTask(cancel_all))
        return await _whole(request, jobs, answer, answer.whole_choices)

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
    return await _whole(request, [job], answer, _one(answer))


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
    return await _whole(request, [job], answer, _one(answer))


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
        Route("/v1/embeddings", _extra_post(embeddings.answer), methods=["POST"]),
        Route("/embeddings", _extra_post(embeddings.answer), methods=["POST"]),
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
