"""API errors as OpenAI returns them: an HTTP status and a body {"error": {...}}."""
from __future__ import annotations


class ApiError(Exception):
    """A request the server refuses; rendered as an OpenAI-style error body."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | int | None = None,
                 extra: dict | None = None):
        """extra: more fields of the error object (the context overflow's token counts)."""
        super().__init__(message)
        self.extra = extra or {}
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict:
        body = error_body(self.message, self.type, self.param, self.code)
        body["error"].update(self.extra)
        return body


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | int | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)
