"""Generates the protobuf modules from the repository's proto/ at build time.

The .proto files are the only contract with the daemon; this package keeps no
copy of them and no generated code in git. `pip install ./client/python`
builds in place, so ../../proto is found; an sdist carries a copy in proto/
(made by the sdist command below). KERNELD_PROTO_DIR overrides both.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["kerneld/v1/kerneld.proto"]


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
    import grpc_tools

    root = _proto_root()
    pkg = os.path.join(out_dir, "kerneld", "_proto")
    os.makedirs(pkg, exist_ok=True)
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    for p in PROTOS:
        # -I<root>: the module lands at kerneld/_proto/kerneld/v1/kerneld_pb2.py;
        # it imports nothing else, so we flatten it to kerneld/_proto/kerneld_pb2.py.
        tmp = os.path.join(out_dir, "_kerneld_protoc")
        os.makedirs(tmp, exist_ok=True)
        rc = protoc.main(["protoc", "-I" + root, "-I" + include, "--python_out=" + tmp,
                          os.path.join(root, p)])
        if rc != 0:
            raise SystemExit("kerneld: protoc failed on %s (rc %d)" % (p, rc))
        gen = os.path.join(tmp, p.replace(".proto", "_pb2.py"))
        shutil.copyfile(gen, os.path.join(pkg, os.path.basename(gen)))
        shutil.rmtree(tmp)
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


def _requires():
    # The generated modules check at import that the protobuf runtime is at
    # least the version of the protoc that wrote them: require that much.
    try:
        from google.protobuf import __version__ as v
        major_minor = ".".join(v.split(".")[:2])
        proto = "protobuf>=%s" % major_minor
    except Exception:
        proto = "protobuf>=4.25"
    return ["grpcio>=1.59", proto, "numpy>=1.22"]


setup(cmdclass={"build_py": BuildPy, "sdist": SDist}, install_requires=_requires())
