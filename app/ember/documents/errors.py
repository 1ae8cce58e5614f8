"""Why a file could not be added to the library, in words a user can act on."""
from __future__ import annotations


class DocumentError(Exception):
    """A file the library refused or could not read; str() is the message to show."""


class UnsupportedFile(DocumentError):
    pass


class CorruptFile(DocumentError):
    pass


class EncryptedFile(DocumentError):
    pass


class FileTooLarge(DocumentError):
    pass


class FileVanished(DocumentError):
    pass
