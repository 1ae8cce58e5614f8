"""The loaded model as the server sees it: its ids, its chat template (the app's code path:
ChatTemplate.from_metadata, then Prompt), the slots, and the request -> job step (prompt
tokens, stop strings, the context-length check)."""
from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from ..chat import ChatTemplate, ChatTemplateError, prompt_opens_thinking
from ..chat.harmony import HarmonyFormat, HarmonyStream
from ..chat.json_schema import SchemaError
from ..chat.reasoning_split import ReplySplitter
from ..chat.tool_grammar import tool_call_gbnf
from ..chat.tools import TOOL_FORMATS, ToolCallStream, tool_support
from ..engine import Model, SpeculativeParams
from ..engine.speculative import check_vocab_compatible
from .constraints import Constraint, compile_grammar
from .errors import ApiError, bad_request
from .jobs import Job
from .protocol import GenerationRequest
from .reply_filter import ReplyFilter
from .slots import SlotPool
from .unhonoured import unsupported


def model_ids(path: Path, alias: str | None) -> tuple[str, ...]:
    """The id /v1/models reports first, then the other names a request may use."""
    name = path.name
    stem = name[:-5] if name.lower().endswith(".gguf") else name
    ids = ([alias] if alias else []) + [stem, name]
    return tuple(dict.fromkeys(ids))


class LoadedModel:
    def __init__(self, path: Path, *, n_slots: int, n_ctx: int | None, n_threads: int | None,
                 alias: str | None = None, model: Model | None = None,
                 strict_model_names: bool = False, reasoning_format: str = "deepseek",
                 speculative: SpeculativeParams | None = None):
        """model: serve a model already loaded (the app's: the slots are new contexts on
        its weights, and close() leaves it open), else path is loaded. strict_model_names:
        a request must name this model (else any name is answered by it). reasoning_format:
        "deepseek" returns a chat reply's reasoning block as reasoning_content, "none" leaves
        it in content (a request's reasoning_format says otherwise). speculative: drafts
        for every slot's replies (each slot its own draft context; close() closes the draft
        model)."""
        self.path = path
        self.ids = model_ids(path, alias)
        self.strict_model_names = strict_model_names
        self.reasoning_format = reasoning_format  # for chat requests that do not say
        self._owns_model = model is None
        self.model = model if model is not None else Model(path, n_ctx=n_ctx,
                                                           n_threads=n_threads)
        self.template = ChatTemplate.from_metadata(self.model.metadata,
                                                   token_text=self.model.token_text)
        self.tool_support = tool_support(self.template)
        # gpt-oss: replies on channels (analysis, final, commentary), parsed as harmony
        self.harmony = not self.template.is_fallback and HarmonyFormat.detect(
            self.template.source)
        self.speculative = speculative
        if speculative is not None and speculative.draft_model is not None:
            check_vocab_compatible(self.model, speculative.draft_model)
        self.pool = SlotPool(self.model, n_slots, n_ctx, n_threads, speculative)
        self.n_ctx = self.pool.n_ctx

    @property
    def id(self) -> str:
        return self.ids[0]

    def prepare(self, req: GenerationRequest, loop: asyncio.AbstractEventLoop) -> Job:
        """Tokens and stop strings of a checked request (in a worker thread: a template and
        a long prompt take a while)."""
        stops = req.stop
        reply = None
        if req.messages is not None:
            req = self._tool_constrained(req)
            text, template_stops, reply = self.chat_prompt(req)
            ids = self.model.prompt_ids(text)
            stops = tuple(dict.fromkeys((*template_stops, *req.stop)))
        elif isinstance(req.prompt, str):
            ids = self.model.prompt_ids(req.prompt)
        else:
            ids = list(req.prompt or [])
        if not ids:
            raise bad_request("The prompt is empty.", "prompt")
        return self._job(req, ids, stops, reply, loop)

    def prepare_choices(self, req: GenerationRequest, loop: asyncio.AbstractEventLoop
                        ) -> list[Job]:
        """req.n jobs, one per choice: the same prompt, choice i drawn with seed + i (with
        a seed; else each its own random one), each with its own reply filter."""
        jobs = [self.prepare(req, loop)]
        for i in range(1, req.n):
            seed = None if req.params.seed is None else (req.params.seed + i) % 2**64
            jobs.append(self.prepare(dataclasses.replace(
                req, params=dataclasses.replace(req.params, seed=seed)), loop))
        return jobs

    def chat_prompt(self, req: GenerationRequest
                    ) -> tuple[str, tuple[str, ...], ReplyFilter | None]:
        """A chat request's prompt text, the template's stop strings, and the filter its
        reply goes through (reasoning apart, tool calls parsed; None: the text as it is)."""
        last = req.messages[-1]
        # an assistant message at the end is a prefill: the reply continues it
        prefill = last["role"] == "assistant" and not last.get("tool_calls")
        tools = req.tools if req.tools is not None and req.tools.choice != "none" else None
        kwargs = dict(req.template_kwargs)
        if req.reasoning_effort is not None:
            if "reasoning_effort" in self.template.source:
                kwargs["reasoning_effort"] = req.reasoning_effort
            elif not req.reasoning_optional:
                raise unsupported("reasoning_effort", "the model's chat template takes no "
                                                      "reasoning effort")
        # a forced call's grammar (prepare: _tool_constrained) takes the place of the
        # request's own: the reply is a call, with no text for response_format to shape
        forcing = tools is not None and tools.choice != "auto" and not prefill
        if req.constraint is not None and req.constraint.param != "tools" and not forcing \
                and (tools is not None or self.harmony):
            # the grammar would hold the whole reply, leaving no room for a call or a channel
            raise unsupported(req.constraint.param,
                              "constrained decoding together with tool_choice 'auto' (the "
                              "reply may be text or a call, and the grammar would hold all of "
                              "it; ask for tool_choice 'required' or a named function, whose "
                              "call is constrained instead)" if tools is not None else
                              "constrained decoding with gpt-oss's harmony channels")
        if tools is not None:
            self._check_tools()
            kwargs["tools"] = tools.tools
        try:
            prompt = self.template.prompt(req.messages, continue_final=prefill, **kwargs)
        except ChatTemplateError as e:
            raise bad_request(f"The model's chat template cannot render these messages: "
                              f"{e}", "messages") from None
        forced = ""
        if tools is not None:
            if prompt.is_fallback:  # the built-in format it fell back to has no tools
                raise unsupported("tools", f"the model's chat template fails to render "
                                           f"these tools ({prompt.notice})")
            # "required" or a named function: the reply is made to open a call
            if tools.choice != "auto" and not prefill:
                forced = self.tool_support.format.forced_prefix(tools.name)
        # a constrained reply is all answer: the grammar leaves no room for a reasoning block
        split = req.reasoning_format != "none" and req.constraint is None
        parallel = req.tools is None or req.tools.parallel
        if self.harmony:
            # gpt-oss: channels, not tags (analysis, final; commentary for calls)
            reply = ReplyFilter(harmony=HarmonyStream(tools is not None, forced, split),
                                parallel=parallel)
        elif tools is not None or split:
            # a reply made to open a tool call starts in the call, not in thoughts
            splitter = ReplySplitter(not forced and prompt_opens_thinking(prompt.text)) \
                if split else None
            tool_stream = None if tools is None else \
                ToolCallStream(self.tool_support.format, tools.tools, forced)
            reply = ReplyFilter(splitter=splitter, tools=tool_stream, parallel=parallel)
        else:
            reply = None
        return prompt.text + forced, prompt.stop_strings, reply

    def _job(self, req: GenerationRequest, ids: list[int], stops: tuple[str, ...],
             reply: ReplyFilter | None, loop: asyncio.AbstractEventLoop) -> Job:
        room = self.n_ctx - len(ids)
        if room < 1:
            raise ApiError(400, f"This model's maximum context length is {self.n_ctx} tokens. "
                                f"However, your {'messages' if req.messages is not None else 'prompt'}"
                                f" resulted in {len(ids)} tokens, leaving no room for a reply.",
                           param="messages" if req.messages is not None else "prompt",
                           code="context_length_exceeded",
                           # llama-server's counts, which its clients read to trim a chat
                           extra={"n_prompt_tokens": len(ids), "n_ctx": self.n_ctx})
        # a reply longer than the context has room for ends there, with finish_reason "length"
        max_tokens = room if req.max_tokens is None else min(req.max_tokens, room)
        # OpenAI's penalties count every token generated so far: a window as long as the context
        params = dataclasses.replace(req.params, penalty_last_n=self.n_ctx)
        # the parsers of calls and channels look for special tokens: spelled out for them
        special = reply is not None and (reply.tools is not None or reply.harmony is not None)
        # each choice its own grammar: the state follows that choice's reply
        grammar = None if req.constraint is None else compile_grammar(req.constraint,
                                                                      self.model)
        job = Job(ids, max_tokens, params, stops, loop, req.top_logprobs, req.logit_bias,
                  special_text=special, grammar=grammar)
        job.reply = reply
        return job

    def _tool_constrained(self, req: GenerationRequest) -> GenerationRequest:
        """req with tool_choice "required" or a named function: its constraint the grammar
        of that call in the model's family (the text after the forced prefix), the tools'
        schemas enforced on the arguments; any other request as it is."""
        tools = req.tools
        if tools is None or tools.choice in ("auto", "none") or not self.tool_support.usable:
            return req
        last = req.messages[-1]
        if last["role"] == "assistant" and not last.get("tool_calls"):
            return req  # a prefill: the reply continues the client's text, no forced call
        if tools.choice == "required" and len(tools.tools) == 1:
            # the one tool named: its header goes in the prompt, where markers that are
            # control tokens (harmony's <|message|>) are the real tokens, not spelled out
            tools = dataclasses.replace(tools, choice="function",
                                        name=tools.tools[0]["function"]["name"])
            req = dataclasses.replace(req, tools=tools)
        try:
            gbnf = tool_call_gbnf(self.tool_support.format, tools.tools, tools.name,
                                  tools.parallel)
        except SchemaError as e:
            raise bad_request(f"'tools' cannot be enforced for tool_choice "
                              f"{tools.choice!r}: {e}", "tools", "invalid_value") from None
        if gbnf is None:
            return req
        return dataclasses.replace(req, constraint=Constraint(gbnf, "tools"))

    def _check_tools(self) -> None:
        support = self.tool_support
        if not support.takes_tools:
            raise unsupported("tools", "the model's chat template has no tool support: it "
                                       "does not render the tools it is given")
        if support.format is None:
            raise unsupported("tools", "the model's chat template takes tools, but Ember "
                                       "does not parse its tool-call format yet (it parses "
                                       + ", ".join(f.label for f in (*TOOL_FORMATS,
                                                                     HarmonyFormat)) + ")")

    def close(self) -> None:
        self.pool.close()
        for ctx in self.pool.contexts:
            ctx.close()
        for slot in self.pool._slots:
            if slot.session._drafter is not None:
                slot.session._drafter.close()
        if self._owns_model:
            self.model.close()
        if self.speculative is not None and self.speculative.draft_model is not None:
            self.speculative.draft_model.close()
