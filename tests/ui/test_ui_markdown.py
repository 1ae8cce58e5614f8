"""The message renderer: Markdown to Qt rich text with highlighted code blocks."""
from __future__ import annotations

from ember.ui import markdown
from ember.ui.theme import DARK, LIGHT


def test_fenced_code_is_highlighted_and_copyable():
    r = markdown.render("Here:\n\n```python\ndef f(x):\n    return 'hi'  # note\n```\nDone.",
                        LIGHT)
    assert r.code_blocks == ["def f(x):\n    return 'hi'  # note"]
    assert 'href="copy-code:0"' in r.html and ">python<" in r.html
    assert f'color:{LIGHT["syn_keyword"]}; font-weight:600">def</span>' in r.html
    assert f'color:{LIGHT["syn_string"]}">&#x27;hi&#x27;</span>' in r.html or \
        f"color:{LIGHT['syn_string']}\">'hi'</span>" in r.html
    assert "# note</span>" in r.html and "Done." in r.html


def test_unclosed_fence_while_streaming_is_still_a_code_block():
    r = markdown.render("```js\nconst a = 1;", DARK)
    assert r.code_blocks == ["const a = 1;"]
    assert f'color:{DARK["syn_keyword"]}; font-weight:600">const</span>' in r.html


def test_html_in_messages_is_escaped():
    r = markdown.render("<script>alert(1)</script> and `<b>`", LIGHT)
    assert "<script>" not in r.html and "&lt;script&gt;" in r.html
    assert "&lt;b&gt;" in r.html


def test_inline_markup_lists_headings_quotes():
    r = markdown.render("# Title\n\n**bold** and *it* and `code` and [site](https://x.org)\n\n"
                        "- one\n- two\n\n1. first\n2. second\n\n> quoted", LIGHT)
    h = r.html
    assert "Title" in h and "<b>bold</b>" in h and "<i>it</i>" in h
    assert "code&#8202;</code>" in h and 'href="https://x.org"' in h
    assert h.count("<li") == 4 and "<ul" in h and "<ol" in h and "quoted" in h


def test_several_blocks_have_their_own_copy_links():
    r = markdown.render("```\na\n```\ntext\n```sh\necho hi\n```", LIGHT)
    assert r.code_blocks == ["a", "echo hi"]
    assert 'copy-code:0' in r.html and 'copy-code:1' in r.html
