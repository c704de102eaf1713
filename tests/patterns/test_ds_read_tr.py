"""ds_read_tr: provider map, the seed's K-split table, transposes, and the seed's FP16 GEMM example."""

import numpy as np
import pytest

from tvm_cdna4.isa import CATALOG, DS_READ_TR_OPS, formats, lanes, reference

# Seed "K-position split" table, transcribed (rows in builtin order).
SEED_K_SPLIT = {
    "ds_read_tr4_b64_v2i32": ("0-15,32-47", "16-31,48-63"),
    "ds_read_tr6_b96_v3i32": ("0-15,32-47", "16-31,48-63"),
    "ds_read_tr8_b64_v2i32": ("0-7,16-23,32-39,48-55", "8-15,24-31,40-47,56-63"),
    "ds_read_tr16_b64_v4i16": ("0-3,8-11", "4-7,12-15"),
    "ds_read_tr16_b64_v4f16": ("0-3,8-11", "4-7,12-15"),
    "ds_read_tr16_b64_v4bf16": ("0-3,8-11", "4-7,12-15"),
}


def _ranges(ks):
    ks, out, start = sorted(ks), [], None
    for i, k in enumerate(ks):
        if start is None:
            start = k
        if i + 1 == len(ks) or ks[i + 1] != k + 1:
            out.append(f"{start}-{k}")
            start = None
    return ",".join(out)


def _grid(cols):
    return np.meshgrid(np.arange(64), np.arange(cols), indexing="ij")


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_provider_map_is_a_bijection_within_16_lane_groups(op):
    lane, elem = _grid(op.elements)
    src, s_elem = lanes.tr_provider(op, lane, elem)
    assert ((src // 16) == (lane // 16)).all()
    flat = (src * op.elements + s_elem).ravel()
    assert sorted(flat.tolist()) == list(range(64 * op.elements))
    back_lane, back_elem = lanes.tr_consumer(op, src, s_elem)
    assert (back_lane == lane).all() and (back_elem == elem).all()


def _b_needed(op, mfma, call):
    """B coordinates (k, col) each result lane/element of ``call`` must hold for ``mfma``."""
    lane, elem = _grid(op.elements)
    _, col, k = lanes.b_owner(mfma, lane, call * op.elements + elem)
    return k, col


def chunk_stride(op):
    """Bytes between consecutive chunks of a row: the load size rounded up to the LDS alignment
    (tr6: 12 B of data in 16 B, as rocRoller lays it out)."""
    return -(-op.load_bits // 8 // op.lds_alignment) * op.lds_alignment


def chunk_addresses(op, mfma, call, row_pitch):
    """Per-lane byte address in a row-major K x N tile (chunks of ``op.elements`` along N, rows
    ``row_pitch`` bytes apart) derived from the maps: lane j's chunk must hold, at element s, what
    the provider map routes from (j, s)."""
    lane, elem = _grid(op.elements)
    k, col = _b_needed(op, mfma, call)
    src, s_elem = lanes.tr_provider(op, lane, elem)
    src_k, src_col = np.empty_like(k), np.empty_like(col)
    src_k[src, s_elem], src_col[src, s_elem] = k, col
    # contiguity: element s of every chunk is the next column of the same row, chunk-aligned
    assert (src_k == src_k[:, :1]).all() and (src_col - src_col[:, :1] == np.arange(op.elements)).all()
    assert (src_col[:, 0] % op.elements == 0).all()
    return src_k[:, 0] * row_pitch + src_col[:, 0] // op.elements * chunk_stride(op)


def row_major_lds(op, fmt, tile):
    """LDS bytes of a K x N tile, row-major, chunk by chunk (padded per chunk_stride)."""
    rows, cols = tile.shape
    per_row = cols // op.elements * chunk_stride(op)
    lds = np.zeros(rows * per_row, np.uint8)
    words = formats.to_words(fmt, tile.reshape(-1, op.elements)).view(np.uint8).reshape(rows, cols // op.elements, -1)
    for c in range(cols // op.elements):
        lds.reshape(rows, per_row)[:, c * chunk_stride(op) : c * chunk_stride(op) + words.shape[-1]] = words[:, c]
    return lds, per_row


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_seed_k_split_table(op):
    mfma = CATALOG[op.k_split_mfma]
    assert mfma.b_elems == 2 * op.elements  # a pair of calls fills one operand
    got = tuple(_ranges(set(_b_needed(op, mfma, call)[0].ravel().tolist())) for call in (0, 1))
    assert got == SEED_K_SPLIT[op.name]
    assert got == tuple(",".join(f"{lo}-{hi}" for lo, hi in call) for call in op.k_split)


def _format_of(op):
    return {4: "fp4", 6: "fp6", 8: "i8", 16: "f16"}[op.element_bits]


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_transpose_of_a_row_major_tile(op, rng):
    mfma = CATALOG[op.k_split_mfma]
    n_cols = mfma.n + 32  # a wider tile: addresses must honour the row pitch
    fmt = _format_of(op)
    tile = formats._from_codes(formats.fmt(fmt), rng.integers(0, 2**op.element_bits, (mfma.k, n_cols), dtype=np.uint64))
    lds, pitch = row_major_lds(op, fmt, tile)
    for call in (0, 1):
        addr = chunk_addresses(op, mfma, call, pitch)
        assert (addr % op.lds_alignment == 0).all()
        got = formats.from_words(fmt, reference.ds_read_tr(op, lds, addr), op.elements)
        k, col = _b_needed(op, mfma, call)
        np.testing.assert_array_equal(formats._codes(formats.fmt(fmt), got), formats._codes(formats.fmt(fmt), tile[k, col]))


def test_tr16_lane_receives_its_column():
    # cdna4-facts: tr16 moves a 4x16 tile per 16 lanes, lane l receives column l
    op = CATALOG["ds_read_tr16_b64_v4f16"]
    lane, elem = _grid(4)
    src, s = lanes.tr_provider(op, lane, elem)
    assert ((src % 16) // 4 == elem).all() and ((src % 4) * 4 + s == lane % 16).all()


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_misaligned_and_out_of_range_addresses_are_rejected(op):
    lds = np.zeros(4096, np.uint8)
    addr = np.arange(64) * 16
    addr[7] += 4
    with pytest.raises(ValueError, match=f"lane 7 address {7 * 16 + 4} is not {op.lds_alignment}-byte aligned"):
        reference.ds_read_tr(op, lds, addr)
    with pytest.raises(ValueError, match="lane 63 reads LDS"):
        reference.ds_read_tr(op, np.zeros(63 * 16 + 4, np.uint8), np.arange(64) * 16)


def test_seed_fp16_gemm_example(rng):
    """MfmaCdna4F16TrPolicy: load_a (scalar), load_b (two ds_read_tr16 calls), mma, store_c, literally."""
    mfma = CATALOG["mfma_f32_16x16x32_f16"]
    tr = CATALOG["ds_read_tr16_b64_v4f16"]
    k_tile, block_tile_n, tile_b_col, tile_a_row, ki = 64, 32, 16, 0, 32
    tile_a = rng.normal(size=(16, k_tile)).astype(np.float16)
    tile_b = rng.normal(size=(k_tile, block_tile_n)).astype(np.float16)  # row-major B: tile_b[k][n]
    lds_b = tile_b.view(np.uint8).ravel()
    lane = np.arange(64)
    # load_a: frag[e] = tile_a_ptr[row * k_tile_size + k_off + e]
    row, k_off = tile_a_row + lane % 16, ki + 8 * (lane // 16)
    a_frag = tile_a.ravel()[(row * k_tile + k_off)[:, None] + np.arange(8)]
    # load_b: base0 / base1 as written in the seed (element offsets, 2 bytes each)
    local_tx, k_base = lane % 16, ki + 8 * (lane // 16)
    base0 = (k_base + local_tx // 4) * block_tile_n + tile_b_col + (local_tx % 4) * 4
    base1 = (k_base + 4 + local_tx // 4) * block_tile_n + tile_b_col + (local_tx % 4) * 4
    r0 = formats.from_words("f16", reference.ds_read_tr(tr, lds_b, 2 * base0), 4)
    r1 = formats.from_words("f16", reference.ds_read_tr(tr, lds_b, 2 * base1), 4)
    b_frag = np.concatenate([r0, r1], axis=1)
    acc = reference.mfma(mfma, a_frag, b_frag, np.zeros((64, 4), np.float32))
    # store_c: i = 4 * (L / 16) + (G % 4), j = L % 16
    c = np.zeros((16, 16), np.float32)
    for G in range(4):
        c[4 * (lane // 16) + G, lane % 16] = acc[:, G]
    want = tile_a[:, ki : ki + 32].astype(np.float64) @ tile_b[ki : ki + 32, tile_b_col : tile_b_col + 16].astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
    # the fragments equal what the catalog's B owner map asks for
    _, col, k = lanes.b_owner(mfma, *_grid(8))
    np.testing.assert_array_equal(b_frag, tile_b[ki + k, tile_b_col + col])
    # call 2 covers ki+4..7, 12..15, 20..23, 28..31 (the seed's prose says "ki + 24 to ki + 31": a typo)
    k2 = sorted(set((ki + k[:, 4:]).ravel().tolist()))
    assert _ranges([x - ki for x in k2]) == "4-7,12-15,20-23,28-31"


def _shifted_source(column: int, pitch: int):
    """The operand form of ds_read_tr16 on an LDS tile ``(16, pitch)`` of float16 (pitch 2*pitch B),
    read from the region that starts at ``column``."""
    from tvm_tirx.script import tirx as T

    from tvm_cdna4.patterns.layouts import mfma_fragment

    mfma = CATALOG["mfma_f32_32x32x16_f16"]
    lb, nb = mfma_fragment(mfma, "B")
    K, N = mfma.k, mfma.n

    @T.function
    def kernel(B: T.Tensor((K, N), "float16"), D: T.Tensor((64, nb), "float16")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            SB = T.alloc_tensor(ty_args=[T.Tensor((K, pitch), "float16", scope="shared", align=16,
                                                  layout=T.TileLayout(T.S[(K, pitch) : (pitch, 1)]))])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "float16", scope="local")])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((N, K), "float16", scope="local", layout=lb)])
            T.rocm.tile.apply(T.amdgcn["ds_read_tr16_b64_v4f16"], Bf, SB[0:K, column : column + N], scope="wave",
                              mfma=mfma.name, operand="B")
            for r in T.unroll(nb):
                D[tx, r] = rb[r]

    return kernel


def test_a_source_shifted_by_a_column_names_the_column_offset_not_the_pitch():
    import tvm_cdna4
    from tvm_cdna4 import ContractError

    with pytest.raises(ContractError) as err:
        tvm_cdna4.build(_shifted_source(column=1, pitch=40))  # pitch 80 B: a multiple of 8
    text = str(err.value).splitlines()[0]
    assert text.startswith("ds_read_tr16_b64_v4f16: operand src: the chunk that lane 0 reads must start 8-byte aligned; "
                           "expected the region to start at a multiple of 8 bytes, found byte offset 2"), text
    assert ": the region starts at byte 2 of the tile" in text
    assert "Suggestion: start the region at an element offset (column) that is a multiple of 4 elements" in text
    assert "row pitch" not in text
    with pytest.raises(ContractError, match="Suggestion: make the row pitch of the LDS layout a multiple of 8 bytes"):
        tvm_cdna4.build(_shifted_source(column=0, pitch=38))  # 76 B rows, region at byte 0
    tvm_cdna4.build(_shifted_source(column=4, pitch=40))  # byte 8: aligned


def test_fragment_registers_count_the_whole_repeated_tile():
    from tvm_cdna4.patterns.layouts import Fragment, mfma_fragment, tr_fragment

    tr, mfma = CATALOG["ds_read_tr16_b64_v4f16"], CATALOG["mfma_f32_16x16x32_f16"]
    assert tr_fragment(tr).tile_registers == tr.elements
    assert tr_fragment(tr, (3,)).tile_registers == 3 * tr.elements
    one, tile = mfma_fragment(mfma, "A"), mfma_fragment(mfma, "A", (2, 4))
    assert isinstance(tile, Fragment) and (one.tile_registers, tile.tile_registers) == (mfma.a_elems, 8 * mfma.a_elems)
    layout, registers = tile  # callers unpack it as before
    assert registers == tile.tile_registers and layout is tile.layout
