"""Token ids are the currency from the chat template onward: the prompt is tokenized
once, and the count the app shows is the length of what the engine is fed."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.native


def _model_and_template(path):
    from ember.chat import ChatTemplate
    from ember.engine import Model
    m = Model(path, n_ctx=256)
    return m, ChatTemplate.from_metadata(m.metadata, token_text=m.token_text)


def _fed_ids(model, built):
    """The ids the engine evaluated for the reply's prompt (a session with no cache yet)."""
    from ember.chat import stream_reply
    from ember.engine import GenerationStats, SamplingParams, Session
    seen = []
    session = Session(model)
    real = session._prefill

    def spy(ids):
        seen.append(list(ids))
        return real(ids)
    session._prefill = spy
    stats = GenerationStats()
    for _ in stream_reply(session, built, SamplingParams(temperature=0.0), stats):
        pass
    return seen[0], stats


def test_a_template_that_writes_bos_is_counted_as_fed(gemma_model_path):
    # Gemma's template starts with <bos>: counting the text with BOS added on top said one
    # token more than the engine was fed
    from ember.chat import GenRequest, build_prompt
    m, t = _model_and_template(gemma_model_path)
    try:
        built = build_prompt(m, m.n_ctx, t, GenRequest(1, 1, [{"role": "user", "content": "Hi"}],
                                                         max_new_tokens=2))
        assert built.text.startswith(m.token_text(m.bos_id))
        fed, stats = _fed_ids(m, built)
        assert built.n_tokens == len(fed) == stats.prompt_tokens
        assert fed == built.ids
        assert fed.count(m.bos_id) == 1 and fed[0] == m.bos_id
    finally:
        m.close()


def test_raw_text_is_fed_without_parsing_special_tokens(starter_model_path):
    # raw completion counts the user's text as plain characters; the engine must be fed
    # the same ids, not "<|im_start|>" turned into the special token
    from ember.chat import GenRequest, build_prompt
    m, t = _model_and_template(starter_model_path)
    try:
        special = m.tokenize("<|im_start|>", add_special=False, parse_special=True)
        assert len(special) == 1
        msgs = [{"role": "user", "content": "Say <|im_start|> please"}]
        built = build_prompt(m, m.n_ctx, t, GenRequest(1, 1, msgs, raw=True, max_new_tokens=2))
        fed, stats = _fed_ids(m, built)
        assert special[0] not in fed
        assert len(fed) == built.n_tokens == stats.prompt_tokens and fed == built.ids
        assert m.detokenize(fed).endswith("Say <|im_start|> please")
    finally:
        m.close()
