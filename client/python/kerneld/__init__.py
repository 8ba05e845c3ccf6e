"""kerneld: call kerneld's kernels on numpy arrays, torch tensors and cupy arrays.

    import kerneld
    c = kerneld.Client("127.0.0.1:50051")
    y = c.scale(x, factor=2.0)          # every op is a method; c.ops() lists them

docs/python.md has the rules (streams, ownership, errors).
"""
from . import _grpc_log  # first: before anything imports grpc (it says why)
from ._errors import (KerneldError, InvalidArgument, NotFound, FailedPrecondition,
                      ResourceExhausted, Unavailable, DeadlineExceeded, PermissionDenied,
                      Unauthenticated, Cancelled, Internal, AlreadyExists)
from ._client import Client, Stream, Handle
from . import aio

__version__ = "0.1.0"
__all__ = ["Client", "Stream", "Handle", "KerneldError", "InvalidArgument", "NotFound",
           "FailedPrecondition", "ResourceExhausted", "Unavailable", "DeadlineExceeded",
           "PermissionDenied", "Unauthenticated", "Cancelled", "Internal", "AlreadyExists", "aio"]

