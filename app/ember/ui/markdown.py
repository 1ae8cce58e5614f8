"""A small Markdown to Qt-rich-text converter for chat messages.

Covers what models write: paragraphs, headings, lists, block quotes, rules, fenced
code blocks (with syntax highlighting and a Copy link per block), inline code,
bold, italic and links. It is streaming-friendly: an unclosed fence renders as a
code block so far. Pure Python, no Qt import, so it is cheap to test."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

# ---- syntax highlighting -------------------------------------------------------------

_KW = {
    "python": """False None True and as assert async await break class continue def del elif
        else except finally for from global if import in is lambda nonlocal not or pass raise
        return try while with yield match case self""",
    "c": """auto break case char const continue default do double else enum extern float for
        goto if inline int long register return short signed sizeof static struct switch
        typedef union unsigned void volatile while bool true false NULL nullptr class public
        private protected virtual template typename namespace using new delete this const_expr
        constexpr auto override final std include define""",
    "js": """break case catch class const continue debugger default delete do else export
        extends finally for function if import in instanceof let new return super switch this
        throw try typeof var void while with yield async await of null undefined true false
        interface type implements enum""",
    "rust": """as break const continue crate else enum extern false fn for if impl in let loop
        match mod move mut pub ref return self Self static struct super trait true type unsafe
        use where while async await dyn Some None Ok Err""",
    "go": """break case chan const continue default defer else fallthrough for func go goto if
        import interface map package range return select struct switch type var nil true
        false""",
    "java": """abstract assert boolean break byte case catch char class const continue default do
        double else enum extends final finally float for if implements import instanceof int
        interface long native new package private protected public return short static super
        switch synchronized this throw throws try void volatile while true false null var""",
    "shell": """if then else elif fi for in do done while until case esac function return local
        export echo cd exit set unset source sudo""",
    "sql": """select from where and or not insert into values update set delete create table
        drop alter index primary key foreign references join left right inner outer on group
        by order having limit as distinct null is in like between union all""",
}
_ALIASES = {
    "py": "python", "python3": "python", "cpp": "c", "c++": "c", "cc": "c", "h": "c",
    "hpp": "c", "cs": "java", "csharp": "java", "kotlin": "java", "javascript": "js",
    "typescript": "js", "ts": "js", "jsx": "js", "tsx": "js", "json": "js", "rs": "rust",
    "golang": "go", "bash": "shell", "sh": "shell", "zsh": "shell", "console": "shell",
    "sqlite": "sql", "postgres": "sql", "mysql": "sql",
}
_HASH_COMMENT = {"python", "shell"}
_SLASH_COMMENT = {"c", "js", "rust", "go", "java"}

_TOKEN_CACHE: dict[str, re.Pattern] = {}


def _token_re(lang: str) -> re.Pattern:
    if lang in _TOKEN_CACHE:
        return _TOKEN_CACHE[lang]
    parts = []
    if lang in _HASH_COMMENT:
        parts.append(r"(?P<comment>#[^\n]*)")
    if lang in _SLASH_COMMENT:
        parts.append(r"(?P<comment>//[^\n]*|/\*[\s\S]*?(?:\*/|$))")
    if lang == "sql":
        parts.append(r"(?P<comment>--[^\n]*)")
    strings = [r'"""[\s\S]*?(?:"""|$)', r"'''[\s\S]*?(?:'''|$)"] if lang == "python" else []
    strings += [r'"(?:\\.|[^"\\\n])*"?', r"'(?:\\.|[^'\\\n])*'?"]
    if lang == "js" or lang == "go" or lang == "shell":
        strings.append(r"`(?:\\.|[^`\\])*`?")
    if lang == "rust":  # lifetimes look like unterminated chars: only quote short ones
        strings[-1] = r"'(?:\\.|[^'\\\n])'"
    parts.append("(?P<string>" + "|".join(strings) + ")")
    parts.append(r"(?P<number>\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b)")
    if lang in _KW:
        words = sorted(set(_KW[lang].split()), key=len, reverse=True)
        flags = "(?i)" if lang == "sql" else ""
        kw = "|".join(map(re.escape, words))
        parts.append(rf"(?P<keyword>\b(?:{kw})\b)" if not flags else rf"(?P<keyword>\b(?i:{kw})\b)")
        parts.append(r"(?P<func>\b[A-Za-z_][A-Za-z0-9_]*(?=\s*\())")
        if lang == "python":
            parts.append(r"(?P<decorator>@[A-Za-z_][\w.]*)")
    rx = re.compile("|".join(parts))
    _TOKEN_CACHE[lang] = rx
    return rx


def normalize_lang(lang: str) -> str:
    lang = (lang or "").strip().lower()
    return _ALIASES.get(lang, lang)


def highlight(code: str, lang: str, colors: dict) -> str:
    """HTML for code with <span style="color:..."> runs (code is escaped)."""
    lang = normalize_lang(lang)
    if lang not in _KW:
        return html.escape(code, quote=False)
    rx = _token_re(lang)
    out, pos = [], 0
    for m in rx.finditer(code):
        if m.start() > pos:
            out.append(html.escape(code[pos:m.start()], quote=False))
        kind = m.lastgroup or ""
        style = {"comment": f"color:{colors['syn_comment']}; font-style:italic",
                 "string": f"color:{colors['syn_string']}",
                 "number": f"color:{colors['syn_number']}",
                 "keyword": f"color:{colors['syn_keyword']}; font-weight:600",
                 "func": f"color:{colors['syn_func']}",
                 "decorator": f"color:{colors['syn_func']}"}.get(kind)
        text = html.escape(m.group(0), quote=False)
        out.append(f'<span style="{style}">{text}</span>' if style else text)
        pos = m.end()
    out.append(html.escape(code[pos:], quote=False))
    return "".join(out)


# ---- inline markup --------------------------------------------------------------------

_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])|"
                     r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:https?|mailto):[^)\s]+)\)")
_AUTOLINK = re.compile(r"(?<![\"'>=])\b(https?://[^\s<]+[^\s<.,;:!?)\]'\"])")


def inline(text: str, colors: dict) -> str:
    """Escapes text and applies inline markup; code spans are left untouched."""
    pieces = []
    pos = 0
    for m in _INLINE_CODE.finditer(text):
        pieces.append(_inline_plain(text[pos:m.start()], colors))
        code = html.escape(m.group(2).strip() if m.group(2).strip() else m.group(2), quote=False)
        pieces.append(f'<code style="background-color:{colors["inline_code_bg"]}; '
                      f'color:{colors["inline_code_fg"]}; font-family:{MONO}">'
                      f"&#8202;{code}&#8202;</code>")
        pos = m.end()
    pieces.append(_inline_plain(text[pos:], colors))
    return "".join(pieces)


def _inline_plain(text: str, colors: dict) -> str:
    links: list[str] = []

    def keep_link(m):
        links.append(f'<a href="{html.escape(m.group(2))}" style="color:{colors["link"]}">'
                     f"{html.escape(m.group(1), quote=False)}</a>")
        return f"\x00{len(links) - 1}\x00"

    text = _LINK.sub(keep_link, text)
    text = html.escape(text, quote=False)
    text = _AUTOLINK.sub(lambda m: f'<a href="{m.group(1)}" style="color:{colors["link"]}">'
                         f"{m.group(1)}</a>", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: links[int(m.group(1))], text)


# ---- blocks ----------------------------------------------------------------------------

MONO = "'DejaVu Sans Mono', 'Cascadia Mono', 'Menlo', 'Consolas', monospace"
_FENCE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^\s`]*)[^`]*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)([-*+])\s+(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,9})[.)]\s+(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
# a GitHub table: a row of cells, then a delimiter row ("|---|:---:|") under it
_TABLE_DELIM = re.compile(r"^\s{0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


@dataclass
class Rendered:
    html: str
    code_blocks: list[str] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    """The cells of a table row; "\\|" is a pipe inside a cell."""
    row = line.strip().removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def _is_table_start(lines: list[str], i: int) -> bool:
    return ("|" in lines[i] and i + 1 < len(lines) and "-" in lines[i + 1]
            and bool(_TABLE_DELIM.match(lines[i + 1]))
            and len(_cells(lines[i + 1])) == len(_cells(lines[i])))


def _table(lines: list[str], i: int, out: list[str], colors: dict) -> int:
    head = _cells(lines[i])
    aligns = []
    for d in _cells(lines[i + 1]):
        aligns.append("center" if d.startswith(":") and d.endswith(":") else
                      "right" if d.endswith(":") else "left")
    i += 2
    rows = []
    while i < len(lines) and lines[i].strip() and "|" in lines[i]:
        cells = _cells(lines[i])
        rows.append((cells + [""] * len(head))[:len(head)])  # as many cells as the header
        i += 1
    border = colors["border"]

    def cell(tag: str, text: str, align: str, bg: str = "") -> str:
        style = f"border:1px solid {border}; padding:4px 8px"
        if bg:
            style += f"; background-color:{bg}"
        return f'<{tag} align="{align}" style="{style}">{inline(text, colors) or "&nbsp;"}</{tag}>'

    parts = [(f'<table cellspacing="0" cellpadding="4" border="1" '
              f'style="border-collapse:collapse; border-color:{border}; margin-bottom:10px">')]
    parts.append("<tr>" + "".join(cell("th", h, a, colors["code_header_bg"])
                                  for h, a in zip(head, aligns)) + "</tr>")
    for r in rows:
        parts.append("<tr>" + "".join(cell("td", c, a) for c, a in zip(r, aligns)) + "</tr>")
    parts.append("</table>")
    out.append("".join(parts))
    return i


def render(text: str, colors: dict, copy_label: str = "Copy",
           copied: int | None = None) -> Rendered:
    """copied: the code block whose link reads "Copied" (just copied, as Copy does)."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    codes: list[str] = []
    para: list[str] = []
    i = 0

    def flush_para():
        if para:
            out.append('<p style="margin-top:0; margin-bottom:8px">'
                       + "<br>".join(inline(p, colors) for p in para) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush_para()
            marker, lang = fence.group(2), fence.group(3)
            body = []
            i += 1
            while i < len(lines) and not (lines[i].strip().startswith(marker[0] * len(marker))
                                          and lines[i].strip().strip(marker[0]) == ""):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or past the end while streaming)
            code = "\n".join(body)
            out.append(_code_block(code, lang, len(codes), colors,
                                   "Copied" if copied == len(codes) else copy_label))
            codes.append(code)
            continue
        if not line.strip():
            flush_para()
            i += 1
            continue
        h = _HEADING.match(line)
        if h:
            flush_para()
            level = len(h.group(1))
            size = {1: "x-large", 2: "large", 3: "medium"}.get(level, "medium")
            out.append(f'<p style="margin-top:6px; margin-bottom:6px; font-size:{size}; '
                       f'font-weight:600">{inline(h.group(2), colors)}</p>')
            i += 1
            continue
        if _is_table_start(lines, i):
            flush_para()
            i = _table(lines, i, out, colors)
            continue
        if _RULE.match(line):
            flush_para()
            out.append(f'<table width="100%" cellspacing="0" cellpadding="0" style="margin:6px 0">'
                       f'<tr><td style="background-color:{colors["border"]}; font-size:1px">'
                       f"&nbsp;</td></tr></table>")
            i += 1
            continue
        if _BULLET.match(line) or _ORDERED.match(line):
            flush_para()
            i = _list(lines, i, out, colors)
            continue
        q = _QUOTE.match(line)
        if q:
            flush_para()
            quoted = []
            while i < len(lines) and _QUOTE.match(lines[i]):
                quoted.append(_QUOTE.match(lines[i]).group(1))
                i += 1
            inner = render("\n".join(quoted), colors, copy_label)
            out.append(f'<table width="100%" cellspacing="0" cellpadding="0" '
                       f'style="margin-bottom:8px"><tr>'
                       f'<td width="3" style="background-color:{colors["accent"]}"></td>'
                       f'<td style="padding-left:10px; color:{colors["muted"]}">{inner.html}'
                       f"</td></tr></table>")
            continue
        para.append(line.strip())
        i += 1
    flush_para()
    return Rendered("".join(out), codes)


def _list(lines: list[str], i: int, out: list[str], colors: dict) -> int:
    first = _BULLET.match(lines[i]) or _ORDERED.match(lines[i])
    ordered = bool(_ORDERED.match(lines[i]))
    base_indent = len(first.group(1))
    items: list[list[str]] = []
    start = int(first.group(2)) if ordered else 1
    while i < len(lines):
        line = lines[i]
        m = _BULLET.match(line) or _ORDERED.match(line)
        if m and len(m.group(1)) <= base_indent + 1 and bool(_ORDERED.match(line)) == ordered:
            items.append([m.group(3)])
        elif m and len(m.group(1)) > base_indent and items:
            items[-1].append(line[base_indent:])  # nested list: rendered inside the item
        elif line.strip() and items and line.startswith(" " * (base_indent + 2)):
            if len(items[-1]) == 1:  # a wrapped line of the item's own text
                items[-1][0] += " " + line.strip()
            else:
                items[-1].append(line.strip())
        else:
            break
        i += 1
    tag = "ol" if ordered else "ul"
    attrs = f' start="{start}"' if ordered and start != 1 else ""
    parts = [f'<{tag}{attrs} style="margin-top:0; margin-bottom:8px; margin-left:-14px">']
    for item in items:
        head, rest = item[0], item[1:]
        body = inline(head, colors)
        if rest:
            nested = render("\n".join(rest), colors)
            body += nested.html
        parts.append(f'<li style="margin-bottom:2px">{body}</li>')
    parts.append(f"</{tag}>")
    out.append("".join(parts))
    return i


def _code_block(code: str, lang: str, index: int, colors: dict, copy_label: str) -> str:
    label = html.escape(lang or "code")
    body = highlight(code, lang, colors) or "&nbsp;"
    return (
        f'<table width="100%" cellspacing="0" cellpadding="0" '
        f'style="margin-top:6px; margin-bottom:10px; '
        f'background-color:{colors["code_bg"]}">'
        f'<tr><td style="background-color:{colors["code_header_bg"]}; padding:4px 10px; '
        f'color:{colors["muted"]}; font-size:small">{label}</td>'
        f'<td align="right" style="background-color:{colors["code_header_bg"]}; '
        f'padding:4px 10px; font-size:small">'
        f'<a href="copy-code:{index}" style="color:{colors["accent"]}; text-decoration:none">'
        f"{html.escape(copy_label)}</a></td></tr>"
        f'<tr><td colspan="2" style="padding:8px 10px">'
        f'<pre style="margin:0; white-space:pre-wrap; font-family:{MONO}; '
        f'color:{colors["code_fg"]}">{body}</pre></td></tr></table>'
    )
