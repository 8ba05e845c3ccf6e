"""The CUDA IPC registration cache's rules, with the driver calls faked (no GPU needed).

The real thing runs in test_gpu.py::test_freed_and_reallocated_at_the_same_address.
"""
import pytest

from kerneld import _cuda, _ipc


class FakeDriver:
    """Allocations: base -> (size, CUDA buffer id); ids are never reused, as in CUDA."""

    def __init__(self, monkeypatch):
        self.allocs, self.next_id = {}, 1
        monkeypatch.setattr(_cuda, "allocation_of", self.allocation_of)
        monkeypatch.setattr(_cuda, "buffer_id_at", self.buffer_id_at)
        monkeypatch.setattr(_cuda, "ipc_handle", lambda a: b"h" * 64)
        monkeypatch.setattr(_cuda, "device_uuid", lambda d: "GPU-fake-%d" % d)

    def malloc(self, base, size):
        self.allocs[base] = (size, self.next_id)
        self.next_id += 1

    def free(self, base):
        del self.allocs[base]

    def allocation_of(self, ptr):
        for base, (size, bid) in self.allocs.items():
            if base <= ptr < base + size:
                return _cuda.Allocation(0, base, size, bid, None)
        raise ValueError("0x%x is not CUDA device memory" % ptr)

    def buffer_id_at(self, base):
        return self.allocs[base][1] if base in self.allocs else None


class Arg:
    def __init__(self, ptr):
        self.ptr, self.device = ptr, None


@pytest.fixture
def reg(monkeypatch):
    drv = FakeDriver(monkeypatch)
    log = []
    ids = iter(range(1, 1000))

    def register(handle, uuid, size, name):
        bid = "buf-%d" % next(ids)
        log.append(("register", bid, size))
        return bid

    def unregister(bid):
        log.append(("unregister", bid))
    return drv, _ipc.IpcRegistry(register, unregister), log


def test_one_registration_per_allocation(reg):
    drv, r, log = reg
    drv.malloc(0x10000, 4096)
    assert r.resolve(Arg(0x10000)) == ("buf-1", 0)
    assert r.resolve(Arg(0x10000 + 256)) == ("buf-1", 256)  # another tensor, same allocation
    assert r.registrations == 1 and log == [("register", "buf-1", 4096)]


def test_freed_and_replaced_at_the_same_address(reg):
    drv, r, log = reg
    drv.malloc(0x10000, 4096)
    r.resolve(Arg(0x10000))
    drv.free(0x10000)
    drv.malloc(0x10000, 4096)  # same base and size, a new allocation (new CUDA buffer id)
    assert r.resolve(Arg(0x10000)) == ("buf-2", 0)
    assert ("unregister", "buf-1") in log and r.registrations == 2
    assert r.buffer_ids() == ["buf-2"]


def test_freed_allocations_are_dropped_on_the_next_registration(reg):
    drv, r, log = reg
    drv.malloc(0x10000, 4096)
    drv.malloc(0x20000, 8192)
    r.resolve(Arg(0x10000))
    r.resolve(Arg(0x20000))
    drv.free(0x10000)
    drv.malloc(0x30000, 4096)
    r.resolve(Arg(0x30000))
    assert ("unregister", "buf-1") in log and ("unregister", "buf-2") not in log
    assert sorted(r.buffer_ids()) == ["buf-2", "buf-3"]


def test_release_and_close(reg):
    drv, r, log = reg
    drv.malloc(0x10000, 4096)
    drv.malloc(0x20000, 4096)
    r.resolve(Arg(0x10000))
    r.resolve(Arg(0x20000))
    r.release("buf-1")
    assert r.buffer_ids() == ["buf-2"]
    r.close()
    assert r.buffer_ids() == [] and ("unregister", "buf-2") in log
