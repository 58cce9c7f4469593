# Minimal MLIR-text writer for the low-precision probes (gpu + scf + arith + llvm + nvvm dialects,
# raw pointers, no memref / nvgpu ops). Adapted from the Hopper probes' hopper_emit.py (shared
# hopper notes): same conventions, plus FP8 wgmma, register-A wgmma by inline PTX, and the
# plain loads/stores the probes need. Dynamic shared memory is `llvm.mlir.global external @smem`
# in address space 3, aligned to 1024 (hopper notes P5).
from contextlib import contextmanager

# wgmma shared-memory descriptor, high bits: swizzle mode 1 (128B) in bits 62-63, stride byte offset
# 1024 B (>> 4 = 64) in bits 32-45, leading byte offset 16 B (>> 4 = 1) in bits 16-29. Same value as
# NVVMBuilder.h's wgmmaDescriptor and hopper_emit.HI_SW128.
HI_SW128 = (1 << 62) | (64 << 32) | (1 << 16)

_ACC = set()


def acc_type(nf):
    _ACC.add(nf)
    return f"!acc{nf}"


class Fn:
    def __init__(self, name, args, attrs):
        self.name, self.args, self.attrs = name, args, attrs
        self.consts = {}
        self.body = []
        self.n = 0
        self.depth = 2

    # ---- SSA plumbing
    def tmp(self, p="t"):
        self.n += 1
        return f"%{p}{self.n}"

    def c(self, v, ty="i32"):
        key = (int(v), ty)
        if key not in self.consts:
            self.consts[key] = f"%c{'m' if v < 0 else ''}{abs(int(v))}_{ty}"
        return self.consts[key]

    def _v(self, x, ty):
        return self.c(x, ty) if isinstance(x, int) else x

    def e(self, line):
        self.body.append("  " * self.depth + line)

    def op(self, rhs, p="t"):
        r = self.tmp(p)
        self.e(f"{r} = {rhs}")
        return r

    # ---- integer arithmetic
    def bin(self, name, a, b, ty="i32"):
        return self.op(f"arith.{name} {self._v(a, ty)}, {self._v(b, ty)} : {ty}")

    def add(self, a, b, ty="i32"):
        return self.bin("addi", a, b, ty)

    def sub(self, a, b, ty="i32"):
        return self.bin("subi", a, b, ty)

    def mul(self, a, b, ty="i32"):
        return self.bin("muli", a, b, ty)

    def and_(self, a, b, ty="i32"):
        return self.bin("andi", a, b, ty)

    def or_(self, a, b, ty="i32"):
        return self.bin("ori", a, b, ty)

    def xor(self, a, b, ty="i32"):
        return self.bin("xori", a, b, ty)

    def shl(self, a, b, ty="i32"):
        return self.bin("shli", a, b, ty)

    def shru(self, a, b, ty="i32"):
        return self.bin("shrui", a, b, ty)

    def cmp(self, pred, a, b, ty="i32"):
        return self.op(f"arith.cmpi {pred}, {self._v(a, ty)}, {self._v(b, ty)} : {ty}")

    def sel(self, c, a, b, ty="i32"):
        return self.op(f"arith.select {c}, {self._v(a, ty)}, {self._v(b, ty)} : {ty}")

    def zext(self, a, frm="i32"):
        return self.op(f"arith.extui {self._v(a, frm)} : {frm} to i64")

    # ---- f32 arithmetic
    def fmul(self, a, b):
        return self.op(f"arith.mulf {a}, {b} : f32", "f")

    def fadd(self, a, b):
        return self.op(f"arith.addf {a}, {b} : f32", "f")

    # ---- special registers
    def tid(self):
        return self.op("nvvm.read.ptx.sreg.tid.x : i32", "tid")

    # ---- pointers
    def smem_base(self, align=1024):
        sm = self.op("llvm.mlir.addressof @smem : !llvm.ptr<3>", "sm")
        smi = self.op(f"llvm.ptrtoint {sm} : !llvm.ptr<3> to i32", "smi")
        al = self.and_(self.add(smi, align - 1), -align)
        pad = self.sub(al, smi)
        self.smem, self.smem_i, self.pad = sm, smi, pad
        return sm, pad

    def sptr(self, off):
        """Shared pointer at aligned-base + off (off: i32 SSA value or int)."""
        o = self.add(self.pad, off)
        return self.op(
            f"llvm.getelementptr {self.smem}[{o}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8", "sp"
        )

    def saddr(self, off):
        """32-bit shared-window address of aligned-base + off."""
        return self.add(self.add(self.smem_i, self.pad), off)

    def gptr(self, generic):
        return self.op(f"llvm.addrspacecast {generic} : !llvm.ptr to !llvm.ptr<1>", "g")

    def gep1(self, base, off32):
        """Global pointer base + off32 bytes (off32: i32 SSA value or int, non-negative)."""
        o = self.zext(off32) if not isinstance(off32, int) else self.c(off32, "i64")
        return self.op(
            f"llvm.getelementptr {base}[{o}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8", "gp"
        )

    # ---- memory
    def ld_global(self, p, ty, align):
        return self.op(f"llvm.load {p} {{alignment = {align} : i64}} : !llvm.ptr<1> -> {ty}", "ld")

    def st_global(self, v, p, ty, align):
        self.e(f"llvm.store {v}, {p} {{alignment = {align} : i64}} : {ty}, !llvm.ptr<1>")

    def ld_shared(self, p, ty, align):
        return self.op(f"llvm.load {p} {{alignment = {align} : i64}} : !llvm.ptr<3> -> {ty}", "ls")

    def st_shared(self, v, p, ty, align):
        self.e(f"llvm.store {v}, {p} {{alignment = {align} : i64}} : {ty}, !llvm.ptr<3>")

    def ld_u8(self, base, off32):
        """zero-extended byte at global base + off32, as i32"""
        b = self.ld_global(self.gep1(base, off32), "i8", 1)
        return self.op(f"arith.extui {b} : i8 to i32")

    # ---- control flow
    @contextmanager
    def if_(self, cond):
        self.e(f"scf.if {cond} {{")
        self.depth += 1
        yield
        self.depth -= 1
        self.e("}")

    class Loop:
        pass

    @contextmanager
    def loop(self, lb, ub, step=1):
        L = Fn.Loop()
        L.iv = self.tmp("i")
        lb, ub, step = self._v(lb, "i32"), self._v(ub, "i32"), self._v(step, "i32")
        self.e(f"scf.for {L.iv} = {lb} to {ub} step {step} : i32 {{")
        self.depth += 1
        yield L
        self.depth -= 1
        self.e("}")

    def barrier(self):
        self.e("nvvm.barrier")

    # ---- mbarrier / TMA
    def mbar_init(self, bar, count):
        self.e(f"nvvm.mbarrier.init {bar}, {self._v(count, 'i32')} : !llvm.ptr<3>, i32")

    def mbar_wait(self, bar, parity):
        self.e(
            f"nvvm.mbarrier.try_wait.parity {bar}, {self._v(parity, 'i32')}, {self.c(10000000)} : !llvm.ptr<3>, i32, i32"
        )

    def mbar_expect_tx(self, bar, nbytes):
        self.e(
            f"nvvm.mbarrier.arrive.expect_tx {bar}, {self._v(nbytes, 'i32')} : !llvm.ptr<3>, i32"
        )

    def tma_load_2d(self, dst, tmap, bar, c0, c1):
        # dst in shared::cta (needs +ptx86); coordinates innermost first
        self.e(
            f"nvvm.cp.async.bulk.tensor.shared.cluster.global {dst}, {tmap}, {bar}, "
            f"box[{self._v(c0, 'i32')}, {self._v(c1, 'i32')}] {{isCTAOnly = true}} : !llvm.ptr<3>, !llvm.ptr"
        )

    def fence_proxy_async(self):
        self.e(
            "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}"
        )

    # ---- wgmma
    def desc(self, saddr):
        """K-major SWIZZLE_128B descriptor of the tile at 32-bit shared address saddr (every run-time
        offset folded into saddr; only constants are added to the result: hopper notes P1)."""
        a = self.shru(self.and_(saddr, 0x3FFFF), 4)
        return self.or_(self.zext(a), self.c(HI_SW128, "i64"), "i64")

    def wgmma_fence(self):
        self.e("nvvm.wgmma.fence.aligned")

    def wgmma_commit(self):
        self.e("nvvm.wgmma.commit.group.sync.aligned")

    def wgmma_wait(self, n=0):
        self.e(f"nvvm.wgmma.wait.group.sync.aligned {n}")

    def wgmma_ss(self, da, db, acc, n, nf, ty, accumulate=True):
        """m64nNkK with both operands from shared memory, K-major (row A / col B), f32 accumulators.
        ty: 'e4m3' (k = 32) or 'bf16' (k = 16)."""
        k = 32 if ty in ("e4m3", "e5m2") else 16
        t = acc_type(nf)
        sd = "one" if accumulate else "zero"
        return self.op(
            f"nvvm.wgmma.mma_async {da}, {db}, {acc}, <m = 64, n = {n}, k = {k}>, "
            f"D[<f32>, <{sd}>, <wrapped>], A[<{ty}>, <one>, <row>], B[<{ty}>, <one>, <col>] : {t} -> {t}",
            "acc",
        )

    def wgmma_rs_bf16(self, aregs, db, acc, n, nf, accumulate=True):
        """wgmma.mma_async m64nNk16 f32.bf16.bf16 with A from 4 x 32-bit registers (bf16x2 each)
        and B K-major from shared memory (descriptor db, imm-trans-b = 0), by inline PTX: MLIR 22's
        nvvm.wgmma.mma_async has no register-A form. The accumulators are tied in/out operands;
        scale-d is a predicate set from an i32 operand (0: D = A*B, 1: D += A*B)."""
        t = acc_type(nf)
        d = ", ".join(f"${i}" for i in range(nf))
        a = ", ".join(f"${nf + i}" for i in range(4))
        ptx = (
            "{\\0A.reg .pred p;\\0A"
            f"setp.ne.b32 p, ${nf + 5}, 0;\\0A"
            f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{d}}}, {{{a}}}, ${nf + 4}, p, 1, 1, 0;\\0A}}"
        )
        cons = ",".join(["=f"] * nf + ["r"] * 4 + ["l", "r"] + [str(i) for i in range(nf)])
        accs = [self.extract(acc, i, nf) for i in range(nf)]
        sd = self.c(1 if accumulate else 0)
        ops = ", ".join(list(aregs) + [db, sd] + accs)
        tys = ", ".join(["i32"] * 4 + ["i64", "i32"] + ["f32"] * nf)
        return self.op(
            f'llvm.inline_asm has_side_effects asm_dialect = att "{ptx}", "{cons}" {ops} : ({tys}) -> {t}',
            "acc",
        )

    def zero_acc(self, nf):
        return self.op(f"llvm.mlir.zero : {acc_type(nf)}", "z")

    def extract(self, acc, i, nf):
        return self.op(f"llvm.extractvalue {acc}[{i}] : {acc_type(nf)}", "x")

    # ---- output
    def text(self):
        head = [
            f"  gpu.func @{self.name}({', '.join(self.args)}) kernel attributes {{{self.attrs}}} {{"
        ]
        cs = [f"    {n} = arith.constant {v} : {t}" for (v, t), n in self.consts.items()]
        return "\n".join(head + cs + self.body + ["    gpu.return", "  }"])


def module(fns):
    body = "\n".join(f.text() for f in fns)
    aliases = "".join(
        f"!acc{n} = !llvm.struct<(" + ", ".join(["f32"] * n) + ")>\n" for n in sorted(_ACC)
    )
    return (
        aliases + "module attributes {gpu.container_module} {\ngpu.module @k {\n"
        "  llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>\n"
        + body
        + "\n}\n}\n"
    )
