# Host test only (never on the device): a numpy-backed stand-in for the few torch calls of the
# lowprec runners, so that run_all.sh runs end to end here with the kernels emulated:
#   PYTHONPATH=$PWD/bench/probes/lowprec/hostmock OUT=/tmp/lp_out bash bench/probes/lowprec/run_all.sh
import types, numpy as np

__version__ = "mock"
version = types.SimpleNamespace(cuda="mock")
uint8, int16, int32, float32 = np.uint8, np.int16, np.int32, np.float32
float8_e4m3fn = "f8"
REG = {}


class T:
    def __init__(self, a, f8=False):
        self.a, self.f8 = a, f8
        REG[self.a.ctypes.data] = self

    shape = property(lambda s: s.a.shape)

    def data_ptr(self):
        return self.a.ctypes.data

    def stride(self, d):
        return self.a.strides[d] // self.a.itemsize

    def element_size(self):
        return self.a.itemsize

    def cuda(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def view(self, dt):
        if dt == "f8":
            return T(self.a.view(np.uint8), f8=True)
        return T(self.a.view(dt))

    def float(self):
        if self.f8:
            import lp_host

            return T(lp_host.e4m3_decode(self.a).astype(np.float32))
        return T(self.a.astype(np.float32))

    def t(self):
        return T(np.ascontiguousarray(self.a.T))

    def __matmul__(self, o):
        return T((self.a @ o.a).astype(np.float32))

    def __getitem__(self, i):
        return T(np.ascontiguousarray(self.a[i]))

    def __mul__(self, o):
        return T((self.a * (o.a if isinstance(o, T) else o)).astype(np.float32))

    def __iadd__(self, o):
        self.a += o.a
        return self

    def repeat_interleave(self, n):
        return T(np.repeat(self.a, n))


def from_numpy(a):
    return T(a)


def full(shape, v, device=None, dtype=np.float32):
    return T(np.full(shape, v, dtype=dtype))


def zeros(*shape, dtype=np.float32, device=None):
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    return T(np.zeros(shape, dtype=dtype))


def frombuffer(b, dtype):
    return T(np.frombuffer(bytes(b), dtype=dtype).copy())


class _Stream:
    cuda_stream = 0

    def query(self):
        return True


cuda = types.SimpleNamespace(
    get_device_properties=lambda i: types.SimpleNamespace(
        name="MockGPU", multi_processor_count=132, major=9, minor=0
    ),
    current_stream=lambda: _Stream(),
    synchronize=lambda: None,
)
backends = types.SimpleNamespace(
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True))
)
