"""Protobuf messages as plain Python: what the clients' dict-returning
methods (info, describe, buffers, the user-kernel ones) answer with."""
from ._schema import attr_python
from ._tensors import NAMES


def _repeated(f):
    r = getattr(f, "is_repeated", None)  # protobuf >= 5.28; .label went away in 7
    return r if isinstance(r, bool) else f.label == 3


def msg_dict(m):
    """A protobuf message as plain Python (ints stay ints, enums of dtypes become names)."""
    out = {}
    for f in m.DESCRIPTOR.fields:
        v = getattr(m, f.name)
        if f.type == f.TYPE_MESSAGE:
            if f.message_type.GetOptions().map_entry:
                out[f.name] = {k: msg_dict(x) if hasattr(x, "DESCRIPTOR") else x for k, x in v.items()}
            elif _repeated(f):
                out[f.name] = [msg_dict(x) for x in v]
            elif f.message_type.name == "AttrValue":
                out[f.name] = attr_python(v)
            else:
                out[f.name] = msg_dict(v)
        elif f.type == f.TYPE_ENUM and f.enum_type.name == "DType":
            out[f.name] = [NAMES.get(x, x) for x in v] if _repeated(f) else NAMES.get(v, v)
        elif _repeated(f):
            out[f.name] = list(v)
        else:
            out[f.name] = v
    return out
