"""Keeps gRPC core's own logging off the user's stderr unless asked for.

grpcio (its absl logging, before anything initializes absl's log) and the
gRPC core inside libkerneld_native both write INFO lines to stderr by
default: "I1126 ... chttp2_transport.cc] ...: Got goaway ..." whenever a
daemon restarts or refuses a connection's pings. Each reads GRPC_VERBOSITY
once, when it starts: grpcio at `import grpc`, the library at its first
channel. So for those two moments only, GRPC_VERBOSITY is set to
$KERNELD_GRPC_VERBOSITY, else the user's own $GRPC_VERBOSITY, else ERROR;
it is left alone where $GRPC_TRACE asks for traces (they log at INFO), and
the process's environment is put back right after. A program that imported
grpc before kerneld keeps grpcio's logging as it was.
"""
import contextlib
import os
import sys


def wanted():
    """The GRPC_VERBOSITY gRPC should start with, or None to leave it be."""
    env = os.environ
    return env.get("KERNELD_GRPC_VERBOSITY") or env.get("GRPC_VERBOSITY") or \
        (None if env.get("GRPC_TRACE") else "ERROR")


@contextlib.contextmanager
def verbosity():
    """GRPC_VERBOSITY as wanted() says, within the block only."""
    want, old = wanted(), os.environ.get("GRPC_VERBOSITY")
    if want is None or want == old:
        yield
        return
    os.environ["GRPC_VERBOSITY"] = want
    try:
        yield
    finally:
        if old is None:
            del os.environ["GRPC_VERBOSITY"]
        else:
            os.environ["GRPC_VERBOSITY"] = old


if "grpc" not in sys.modules:
    with verbosity():
        import grpc  # noqa: F401 - grpcio reads GRPC_VERBOSITY here
