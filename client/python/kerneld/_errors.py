"""Errors: a server status becomes a KerneldError subclass with .code and .message."""
import grpc

__all__ = ["KerneldError", "InvalidArgument", "NotFound", "FailedPrecondition",
           "ResourceExhausted", "Unavailable", "DeadlineExceeded", "PermissionDenied",
           "Unauthenticated", "Cancelled", "Internal"]


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


class InvalidArgument(KerneldError):
    """A schema, dtype, shape, attr or buffer-reference mistake (INVALID_ARGUMENT)."""


class NotFound(KerneldError):
    """An unknown op, device or buffer (NOT_FOUND)."""


class FailedPrecondition(KerneldError):
    """No eligible backend, or a buffer that can no longer be used (FAILED_PRECONDITION)."""


class ResourceExhausted(KerneldError):
    """Queue full, message too large, memory (RESOURCE_EXHAUSTED): retry with backoff or send less."""


class Unavailable(KerneldError):
    """No daemon there, or it is draining (UNAVAILABLE)."""


class DeadlineExceeded(KerneldError):
    """The call's timeout passed (DEADLINE_EXCEEDED)."""


class PermissionDenied(KerneldError):
    """Not allowed for this principal or listener (PERMISSION_DENIED)."""


class Unauthenticated(KerneldError):
    """No or wrong credentials (UNAUTHENTICATED): pass token= or tls_cert=/tls_key=."""


class Cancelled(KerneldError):
    """The call was cancelled (CANCELLED)."""


class Internal(KerneldError):
    """A kernel or CUDA call failed in the daemon (INTERNAL)."""


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
}
_BY_NUMBER = {c.value[0]: c for c in grpc.StatusCode}


def error_for(code, message, details=None):
    """The KerneldError for a grpc.StatusCode (or a code number) and message."""
    if isinstance(code, int):
        code = _BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(code, KerneldError)(code, message, details)


def from_rpc_error(e):
    """grpc.RpcError (sync or aio) -> KerneldError."""
    code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    details = e.details() if callable(getattr(e, "details", None)) else str(e)
    debug = e.debug_error_string() if callable(getattr(e, "debug_error_string", None)) else None
    return error_for(code, details or "", debug)
