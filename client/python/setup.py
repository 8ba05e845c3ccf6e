"""Generates the protobuf module from the repository's proto/ at build time.

The .proto files are the only contract with the daemon; this package keeps no
copy of them and no generated code in git. `pip install ./client/python`
builds in place, so ../../proto is found; an sdist carries a copy in proto/
(made by the sdist command below). KERNELD_PROTO_DIR overrides both.

The module is written here from the file's descriptor (protoc's
--descriptor_set_out), not by protoc's Python plugin: the plugin's output
checks at import that the protobuf runtime is at least as new as that protoc,
which would tie the wheel to whatever grpcio-tools the build happened to get.
The few lines below use only google.protobuf's builder API, which every
protobuf from 3.20 on provides, so one wheel runs on the whole range
pyproject.toml claims (tests/run.sh installs the lowest one and calls a
daemon with it).

Nothing is written into the source tree (it may be read-only): setuptools'
build/ and *.egg-info go to a scratch folder removed at exit.
"""
import atexit
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["kerneld/v1/kerneld.proto"]

MODULE = '''\
# Generated from %(proto)s at build time (client/python/setup.py). Do not edit.
from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf import symbol_database as _symbol_database
from google.protobuf.internal import builder as _builder

_sym_db = _symbol_database.Default()

DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(
    %(serialized)r)

_globals = globals()
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, %(module)r, _globals)
'''


def _proto_root():
    for cand in (os.environ.get("KERNELD_PROTO_DIR"),
                 os.path.join(HERE, "..", "..", "proto"),
                 os.path.join(HERE, "proto")):
        if cand and os.path.isfile(os.path.join(cand, PROTOS[0])):
            return os.path.abspath(cand)
    raise SystemExit("kerneld: cannot find proto/kerneld/v1/kerneld.proto; build from the "
                     "kerneld repository (pip install ./client/python) or set KERNELD_PROTO_DIR")


def _generate(out_dir):
    from grpc_tools import protoc  # build requirement (pyproject.toml)
    from google.protobuf import descriptor_pb2  # grpcio-tools' own dependency

    root = _proto_root()
    pkg = os.path.join(out_dir, "kerneld", "_proto")
    os.makedirs(pkg, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="kerneld-protoc-")
    try:
        for p in PROTOS:
            # The .proto imports nothing, so its own descriptor is all the module needs.
            ds = os.path.join(tmp, "set.pb")
            rc = protoc.main(["protoc", "-I" + root, "--descriptor_set_out=" + ds,
                              os.path.join(root, p)])
            if rc != 0:
                raise SystemExit("kerneld: protoc failed on %s (rc %d)" % (p, rc))
            with open(ds, "rb") as f:
                (fd,) = descriptor_pb2.FileDescriptorSet.FromString(f.read()).file
            if fd.dependency:
                raise SystemExit("kerneld: %s imports %s; setup.py writes self-contained "
                                 "modules only" % (p, list(fd.dependency)))
            name = os.path.basename(p).replace(".proto", "_pb2")
            with open(os.path.join(pkg, name + ".py"), "w") as f:
                f.write(MODULE % {"proto": p, "serialized": fd.SerializeToString(),
                                  "module": "kerneld._proto." + name})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("# Generated from proto/ at build time (client/python/setup.py).\n")


class BuildPy(build_py):
    def run(self):
        super().run()
        _generate(self.build_lib)
        if getattr(self, "editable_mode", False):
            _generate(HERE)


class SDist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = _proto_root()
        for p in PROTOS:
            dst = os.path.join(base_dir, "proto", p)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(root, p), dst)


def _scratch():
    d = tempfile.mkdtemp(prefix="kerneld-setup-")
    atexit.register(shutil.rmtree, d, True)
    return d


_SCRATCH = _scratch()
setup(cmdclass={"build_py": BuildPy, "sdist": SDist},
      options={"build": {"build_base": os.path.join(_SCRATCH, "build")},
               "egg_info": {"egg_base": _SCRATCH}})
