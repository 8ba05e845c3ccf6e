"""Channels: plaintext or TLS, tokens, load balancing, message sizes."""
import grpc

from ._errors import invalid_argument


def _read(v):
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    with open(v, "rb") as f:
        return f.read()


def channel_options(lb=None, options=None, tls_server_name=None):
    opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    if lb:
        opts.append(("grpc.lb_policy_name", lb))
    if tls_server_name:
        opts.append(("grpc.ssl_target_name_override", tls_server_name))
    opts.extend(options or [])
    return opts


def credentials(tls, tls_ca, tls_cert, tls_key):
    """grpc.ssl_channel_credentials for the TLS arguments, or None for plaintext."""
    if not (tls or tls_ca or tls_cert or tls_key):
        return None
    if (tls_cert is None) != (tls_key is None):
        raise invalid_argument("kerneld.Client: tls_cert= and tls_key= go together (a client certificate "
                         "and its private key, PEM files or bytes)")
    return grpc.ssl_channel_credentials(root_certificates=_read(tls_ca),
                                        private_key=_read(tls_key),
                                        certificate_chain=_read(tls_cert))


def make_channel(target, creds, opts, aio=False):
    mod = grpc.aio if aio else grpc
    if creds is not None:
        return mod.secure_channel(target, creds, options=opts)
    return mod.insecure_channel(target, options=opts)


def metadata(token):
    """Call metadata: `authorization: Bearer TOKEN` when a token is set."""
    if not token:
        return None
    return (("authorization", "Bearer " + token),)


def health_request(service):
    """grpc.health.v1.HealthCheckRequest{service} (field 1, a string), encoded by hand."""
    b = service.encode()
    n, out = len(b), bytearray(b"\x0a")
    while True:
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out) + b


def health_status(raw):
    """grpc.health.v1.HealthCheckResponse -> its status number (1: SERVING)."""
    i = 0
    while i < len(raw):
        key = raw[i]
        i += 1
        if key == 0x08:  # field 1, varint
            v, shift = 0, 0
            while True:
                c = raw[i]
                i += 1
                v |= (c & 0x7F) << shift
                shift += 7
                if c < 0x80:
                    return v
        return 0
    return 0  # UNKNOWN (field absent)
