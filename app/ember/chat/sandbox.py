"""The jinja2 side of chat templates: the immutable sandbox (refusing attribute probes at
the access), HF's {% generation %} tag and transformers' tojson. Imported with the first
template compiled (jinja2 takes a while to import; the app's window does not wait for it)."""
from __future__ import annotations

import json
from typing import Any, ClassVar

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError, safe_range

# A chat template comes with a downloaded file: it may ask for any amount of work. These
# caps stop the cheap ways to ask for gigabytes or hours ('a' * 10**9, 10 ** 10**8, nested
# range loops) far above what any real template needs (the largest of llama.cpp's 70
# templates repeats a string a few dozen times and loops over messages and tools).
MAX_REPEAT_ITEMS = 1_000_000   # characters or elements one `*` may produce
MAX_POWER_BITS = 100_000       # bits of an integer `**` result
MAX_RANGE_ITEMS = 1_000_000    # range() items in one render, all calls together


class _GenerationExtension(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: HF marks assistant spans with
    it for training masks; for inference it only renders its body."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                sized = isinstance(seq, (str, list, tuple)) and isinstance(n, int)
                if sized and len(seq) * n > MAX_REPEAT_ITEMS:
                    raise SecurityError(f"repetition too large: {len(seq)} items * {n}")
        elif (isinstance(left, int) and isinstance(right, int) and abs(left) > 1
              and right * left.bit_length() > MAX_POWER_BITS):
            raise SecurityError(f"power too large: {left} ** {right}")
        return super().call_binop(context, operator, left, right)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # The stock sandbox returns an Undefined that only fails when *used*,
        # so `{{ ''.__class__ }}` would print nothing.  Refuse at the access:
        # a template probing internals is broken or hostile either way.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # Same signature and defaults as transformers' filter: no HTML escaping and
    # no key sorting (jinja's builtin does both), non-ASCII kept verbatim.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


@jinja2.pass_context
def _budgeted_range(context: Any, *args: int) -> range:
    # the count lives on the render's eval context, so each render has its own budget
    r = safe_range(*args)
    used = getattr(context.eval_ctx, "ember_range_items", 0) + len(r)
    if used > MAX_RANGE_ITEMS:
        raise SecurityError(f"too many range() items in one render (over {MAX_RANGE_ITEMS})")
    context.eval_ctx.ember_range_items = used
    return r


def make_environment(now, raise_exception) -> _Sandbox:
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationExtension, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now().strftime(fmt)
    env.globals["range"] = _budgeted_range
    return env
