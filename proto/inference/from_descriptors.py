"""Writes grpc_service.proto and model_config.proto (the KServe v2 / Triton
gRPC protocol, package `inference`) from the descriptors compiled into the
tritonclient wheel, so kerneld's copy is exactly the protocol tritonclient
speaks. Run it with a Python that has tritonclient[grpc] installed:

    python proto/inference/from_descriptors.py proto/inference

Only the interface travels (messages, enums, fields, the service); upstream's
comments are not in the descriptors: triton-inference-server/common's
protobuf/ folder documents each field. The BSD-3-Clause notice the wheel
ships (its LICENSE.txt) heads each file.
"""
import sys
from importlib import metadata
from pathlib import Path

from google.protobuf import descriptor_pb2 as d
from tritonclient.grpc import model_config_pb2, service_pb2

import tritonclient

F = d.FieldDescriptorProto
SCALARS = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64",
           F.TYPE_UINT64: "uint64", F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64",
           F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
           F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
           F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64"}


def license_text():
    dist = Path(tritonclient.__file__).resolve().parents[1]
    for lic in dist.glob("tritonclient-*.dist-info/licenses/LICENSE.txt"):
        return lic.read_text()
    sys.exit("no LICENSE.txt in the tritonclient wheel")


def type_name(f, package):
    if f.type in SCALARS:
        return SCALARS[f.type]
    name = f.type_name.lstrip(".")
    return name[len(package) + 1:] if name.startswith(package + ".") else name


def field_line(f, msg, package, ind):
    if f.label == F.LABEL_REPEATED and f.type == F.TYPE_MESSAGE:
        entry = next((n for n in msg.nested_type
                      if n.options.map_entry and f.type_name.endswith("." + n.name)), None)
        if entry is not None:
            k, v = entry.field
            return "%smap<%s, %s> %s = %d;" % (ind, type_name(k, package), type_name(v, package),
                                                f.name, f.number)
    label = "repeated " if f.label == F.LABEL_REPEATED else ""
    if f.proto3_optional:
        label = "optional "
    return "%s%s%s %s = %d;" % (ind, label, type_name(f, package), f.name, f.number)


def enum_lines(e, ind):
    out = ["%senum %s {" % (ind, e.name)]
    out += ["%s  %s = %d;" % (ind, v.name, v.number) for v in e.value]
    return out + [ind + "}"]


def message_lines(m, package, ind):
    if m.options.map_entry:
        return []
    out = ["%smessage %s {" % (ind, m.name)]
    for e in m.enum_type:
        out += enum_lines(e, ind + "  ")
    for n in m.nested_type:
        out += message_lines(n, package, ind + "  ")
    done = set()
    for f in m.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            i = f.oneof_index
            if i in done:
                continue
            done.add(i)
            out.append("%s  oneof %s {" % (ind, m.oneof_decl[i].name))
            for g in m.field:
                if g.HasField("oneof_index") and g.oneof_index == i:
                    out.append(field_line(g, m, package, ind + "    "))
            out.append(ind + "  }")
        else:
            out.append(field_line(f, m, package, ind + "  "))
    return out + [ind + "}"]


def write(module, out_dir, import_prefix):
    fd = d.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fd)
    # The notice's "# " comment marks become "// ".
    lines = [("//" + l[1:]).rstrip() for l in license_text().splitlines()]
    lines += ["//", "// The %s of the KServe v2 / Triton gRPC protocol, written from the" % fd.name,
              "// descriptors of tritonclient %s (proto/inference/from_descriptors.py)." %
              metadata.version("tritonclient"),
              "// Generated: edit from_descriptors.py, not this file.", "",
              'syntax = "%s";' % (fd.syntax or "proto2"), "", "package %s;" % fd.package, ""]
    for dep in fd.dependency:
        lines.append('import "%s%s";' % (import_prefix, dep))
    if fd.dependency:
        lines.append("")
    for e in fd.enum_type:
        lines += enum_lines(e, "") + [""]
    for m in fd.message_type:
        lines += message_lines(m, fd.package, "") + [""]
    for s in fd.service:
        lines.append("service %s {" % s.name)
        for meth in s.method:
            # "{}": the upstream rpcs have bodies (empty options).
            lines.append("  rpc %s(%s%s) returns (%s%s)%s" % (
                meth.name, "stream " if meth.client_streaming else "",
                meth.input_type.lstrip(".").split(".", 1)[1],
                "stream " if meth.server_streaming else "",
                meth.output_type.lstrip(".").split(".", 1)[1],
                " {}" if meth.HasField("options") else ";"))
        lines += ["}", ""]
    (Path(out_dir) / fd.name).write_text("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent)
    write(model_config_pb2, out, "inference/")
    write(service_pb2, out, "inference/")
