"""Where an endpoint's API key is kept: the platform keyring (macOS Keychain, Windows
Credential Locker, Secret Service) when this system has one, else nowhere but the settings file.

Keys are filed under one service name, one entry per endpoint address: the key belongs to
the server, whichever of its models the user picked."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

SERVICE = "Ember endpoints"


def _keyring():
    """The keyring module with a real backend, or None (no package, or only its fail or null
    backend, as on a headless Linux box)."""
    try:
        import keyring
        from keyring.backends import chainer, fail, null
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken third-party backend must not stop the app
        log.exception("keyring backend could not be loaded")
        return None
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    return keyring


def available() -> bool:
    return _keyring() is not None


def store(url: str, key: str) -> bool:
    """Files the key for the address; False when there is no keyring or it refused (the
    caller then keeps the key in the settings file instead)."""
    kr = _keyring()
    if kr is None:
        return False
    try:
        if kr.get_password(SERVICE, url) != key:
            kr.set_password(SERVICE, url, key)
    except Exception as e:  # locked, denied, D-Bus gone: KeyringError or worse
        log.warning("keyring refused the key for %s: %s", url, e)
        return False
    return True


def load(url: str) -> str | None:
    kr = _keyring()
    if kr is None:
        return None
    try:
        return kr.get_password(SERVICE, url)
    except Exception as e:
        log.warning("keyring could not read the key for %s: %s", url, e)
        return None


def delete(url: str) -> None:
    kr = _keyring()
    if kr is None:
        return
    try:
        if kr.get_password(SERVICE, url) is not None:
            kr.delete_password(SERVICE, url)
    except Exception as e:
        log.warning("keyring could not delete the key for %s: %s", url, e)
