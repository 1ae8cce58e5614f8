"""An endpoint's API key is kept in the platform keyring where there is one, else in the
settings file readable by its owner only; never both; an old file's key moves to the keyring;
forgetting the endpoint deletes its key."""
from __future__ import annotations

import json
import os
import stat

import pytest
from keyring.errors import PasswordSetError

from ember.storage import keystore
from ember.storage.settings import Settings
from tests.support.keyring_backends import memory_keyring, no_keyring  # noqa: F401

URL = "http://10.0.0.5:8080"
KEY = "sk-test-7f3a91"


def file_mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def saved_with_key(tmp_path):
    s = Settings()
    s.remember_endpoint(URL, "qwen", KEY)
    path = tmp_path / "settings.json"
    s.save(path)
    return path


def test_the_key_goes_to_the_keyring_not_the_file(tmp_path, memory_keyring):
    path = saved_with_key(tmp_path)
    assert memory_keyring.passwords == {(keystore.SERVICE, URL): KEY}
    text = path.read_text()
    assert KEY not in text
    (entry,) = json.loads(text)["endpoints"]
    assert entry == {"url": URL, "model": "qwen", "api_key": None, "keyring": True}
    assert Settings.load(path).endpoints == [{"url": URL, "model": "qwen", "api_key": KEY}]


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_without_a_keyring_the_key_is_in_a_private_file(tmp_path, no_keyring):
    assert not keystore.available()
    path = saved_with_key(tmp_path)
    assert json.loads(path.read_text())["endpoints"][0]["api_key"] == KEY
    assert "keyring" not in json.loads(path.read_text())["endpoints"][0]
    assert file_mode(path) == 0o600
    assert Settings.load(path).endpoints[0]["api_key"] == KEY


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_a_file_without_keys_keeps_the_usual_mode(tmp_path, no_keyring):
    path = tmp_path / "settings.json"
    s = Settings()
    s.remember_endpoint(URL, "qwen", None)
    s.save(path)
    mask = os.umask(0)
    os.umask(mask)
    assert file_mode(path) == 0o666 & ~mask


def test_an_old_plain_text_key_moves_to_the_keyring(tmp_path, memory_keyring):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"endpoints": [{"url": URL, "model": "qwen", "api_key": KEY}],
                                "font_size": 13}))
    s = Settings.load(path)
    assert s.endpoints[0]["api_key"] == KEY and s.font_size == 13
    assert memory_keyring.passwords[(keystore.SERVICE, URL)] == KEY
    assert KEY not in path.read_text()  # moved at load, not at some later save
    assert json.loads(path.read_text())["font_size"] == 13


def test_a_refusing_keyring_leaves_the_key_in_the_file_only(tmp_path, memory_keyring):
    def refuse(*a):
        raise PasswordSetError("locked")
    memory_keyring.set_password = refuse
    path = saved_with_key(tmp_path)
    assert memory_keyring.passwords == {}
    assert json.loads(path.read_text())["endpoints"][0]["api_key"] == KEY
    if os.name != "nt":
        assert file_mode(path) == 0o600


def test_forgetting_an_endpoint_deletes_its_key(tmp_path, memory_keyring):
    path = saved_with_key(tmp_path)
    s = Settings.load(path)
    s.remember_endpoint(URL, "llama", None)  # another model of the same server
    s.remember_endpoint("http://other:9000", "x", "sk-other")
    s.save(path)
    s.forget_endpoint(URL, "qwen")
    assert (keystore.SERVICE, URL) in memory_keyring.passwords  # "llama" still uses it
    s.forget_endpoint(URL, "llama")
    s.save(path)
    assert memory_keyring.passwords == {(keystore.SERVICE, "http://other:9000"): "sk-other"}
    assert [e["url"] for e in Settings.load(path).endpoints] == ["http://other:9000"]


def test_forgetting_without_a_keyring_drops_the_key_from_the_file(tmp_path, no_keyring):
    path = saved_with_key(tmp_path)
    s = Settings.load(path)
    s.forget_endpoint(URL, "qwen")
    s.save(path)
    assert KEY not in path.read_text() and Settings.load(path).endpoints == []
