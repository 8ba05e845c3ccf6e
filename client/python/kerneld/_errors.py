"""Errors: a server status becomes a KerneldError subclass with .code and .message.

A mistake the client catches before sending (a dtype, shape, attr, argument)
is an InvalidArgument too, as the daemon's own refusal would be; it is also a
ValueError (or, for a call's arity, a TypeError), so `except ValueError` keeps
working. DeadlineExceeded is a TimeoutError and Unavailable a ConnectionError,
so code that handles Python's own timeouts and connection failures handles
these as well.
"""
import grpc

__all__ = ["KerneldError", "InvalidArgument", "NotFound", "FailedPrecondition",
           "ResourceExhausted", "Unavailable", "DeadlineExceeded", "PermissionDenied",
           "Unauthenticated", "Cancelled", "Internal", "AlreadyExists"]


class KerneldError(Exception):
    """A status from kerneld (or from gRPC on the way to it).

    .code is a grpc.StatusCode, .message the server's text (for a failed
    connection, gRPC's). str() is "CODE_NAME: message".
    """

    def __init__(self, code, message, details=None):
        self.code = code
        self.message = message
        self.details = details  # gRPC's debug string, when there is one
        super().__init__("%s: %s" % (code.name if code is not None else "UNKNOWN", message))

    def __reduce__(self):  # pickles (multiprocessing, concurrent.futures) with its fields
        return (type(self), (self.code, self.message, self.details))


class InvalidArgument(KerneldError, ValueError):
    """A schema, dtype, shape, attr, argument or buffer-reference mistake (INVALID_ARGUMENT),
    whether the daemon or the client caught it. Also a ValueError."""


class _InvalidArgumentCount(InvalidArgument, TypeError):
    """A call given too many or doubled inputs: a TypeError, as Python's own would be."""


class NotFound(KerneldError):
    """An unknown op, device or buffer (NOT_FOUND)."""


class FailedPrecondition(KerneldError):
    """No eligible backend, or a buffer that can no longer be used (FAILED_PRECONDITION)."""


class ResourceExhausted(KerneldError):
    """Queue full, message too large, memory (RESOURCE_EXHAUSTED): retry with backoff or send less."""


class Unavailable(KerneldError, ConnectionError):
    """No daemon there, or it is draining (UNAVAILABLE). Also a ConnectionError."""


class DeadlineExceeded(KerneldError, TimeoutError):
    """The call's timeout passed (DEADLINE_EXCEEDED). Also a TimeoutError."""


class PermissionDenied(KerneldError):
    """Not allowed for this principal or listener (PERMISSION_DENIED)."""


class Unauthenticated(KerneldError):
    """No or wrong credentials (UNAUTHENTICATED): pass token= or tls_cert=/tls_key=."""


class Cancelled(KerneldError):
    """The call was cancelled (CANCELLED)."""


class Internal(KerneldError):
    """A kernel or CUDA call failed in the daemon (INTERNAL)."""


class AlreadyExists(KerneldError):
    """A name that is taken (ALREADY_EXISTS): a user kernel named like a built-in op or one of
    yours (register_kernel(..., replace=True) replaces your own)."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
}
_BY_NUMBER = {c.value[0]: c for c in grpc.StatusCode}


def error_for(code, message, details=None):
    """The KerneldError for a grpc.StatusCode (or a code number) and message."""
    if isinstance(code, int):
        code = _BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(code, KerneldError)(code, message, details)


def invalid_argument(message):
    """The InvalidArgument for a mistake caught in the client, before anything is sent."""
    return InvalidArgument(grpc.StatusCode.INVALID_ARGUMENT, message)


def invalid_argument_count(message):
    """An InvalidArgument that is also a TypeError (a call's inputs miscounted)."""
    return _InvalidArgumentCount(grpc.StatusCode.INVALID_ARGUMENT, message)


def from_rpc_error(e):
    """grpc.RpcError (sync or aio) -> KerneldError."""
    code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    details = e.details() if callable(getattr(e, "details", None)) else str(e)
    debug = e.debug_error_string() if callable(getattr(e, "debug_error_string", None)) else None
    return error_for(code, details or "", debug)
