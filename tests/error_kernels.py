"""Kernels for the error and workgroup-scope tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG
from tvm_cdna4.patterns.layouts import mfma_fragment, tr_fragment


OP = CATALOG["mfma_f32_16x16x32_f16"]
TR16 = CATALOG["ds_read_tr16_b64_v4f16"]
MALFORMED = ("scalar A", "scalar D", "five operands", "no operands", "global D", "repeat mismatch", "no layout", "tr scalar src",
             "tr global src", "tr one operand")


def malformed_apply(variant: str):
    """One wave applies ``mfma_f32_16x16x32_f16`` (or ``ds_read_tr16_b64_v4f16`` for the ``tr``
    variants) to a malformed operand list; ``variant`` is one of ``MALFORMED``."""
    la, _ = mfma_fragment(OP, "A", (1, 1))
    la2, _ = mfma_fragment(OP, "A", (1, 2))
    ld, _ = mfma_fragment(OP, "D", (1, 1))
    lt, _ = tr_fragment(TR16, (1,))
    mfma = T.amdgcn["mfma_f32_16x16x32_f16"]
    tr = T.amdgcn["ds_read_tr16_b64_v4f16"]
    # I.constexpr: TVMScript resolves the branch at parse time (a plain `if` would become IR)
    scalar_a, scalar_d, five, none, global_d, repeats, no_layout, tr_scalar, tr_global, tr_one = (
        variant == name for name in MALFORMED)

    @T.function
    def kernel(G: T.Tensor((1, 1, 16, 16), "float32"), S: T.Tensor((1, 4, 4, 16), "float16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((16,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=la)])
            A2 = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 2, 16, 32), "float16", scope="local", layout=la2)])
            An = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            Tf = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 4, 4, 16), "float16", scope="local", layout=lt)])
            if I.constexpr(scalar_a):
                T.rocm.tile.apply(mfma, Df, T.float32(1), Af, T.float32(0), scope="wave")
            elif I.constexpr(scalar_d):
                T.rocm.tile.apply(mfma, T.float32(0), Af, Af, T.float32(0), scope="wave")
            elif I.constexpr(five):
                T.rocm.tile.apply(mfma, Df, Af, Af, Df, Df, scope="wave")
            elif I.constexpr(none):
                T.rocm.tile.apply(mfma, scope="wave")
            elif I.constexpr(global_d):
                T.rocm.tile.apply(mfma, G, Af, Af, T.float32(0), scope="wave")
            elif I.constexpr(repeats):
                T.rocm.tile.apply(mfma, Df, A2, Af, T.float32(0), scope="wave")
            elif I.constexpr(no_layout):
                T.rocm.tile.apply(mfma, Df, An, Af, T.float32(0), scope="wave")
            elif I.constexpr(tr_scalar):
                T.rocm.tile.apply(tr, Tf, T.float16(0), scope="wave")
            elif I.constexpr(tr_global):
                T.rocm.tile.apply(tr, Tf, S, scope="wave")
            elif I.constexpr(tr_one):
                T.rocm.tile.apply(tr, Tf, scope="wave")

    return kernel
