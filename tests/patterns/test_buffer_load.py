"""T.rocm.buffer_load: the LLVM helper compiles to buffer_load_dwordx4, and the emulator applies the
raw-buffer range check (out-of-range lanes read zeros) and rejects lanes only partly in range."""

import numpy as np
import pytest

from tvm_cdna4 import build
from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4 import register

from rocm_kernels import buffer_load_rows

register()


def test_buffer_load_compiles_to_buffer_load_dwordx4():
    asm = build(buffer_load_rows(256, 40, 64)).asm
    assert "buffer_load_dwordx4" in asm
    assert "global_load" not in asm


def test_in_range_lanes_read_their_bytes_and_masked_lanes_read_zeros():
    x = np.arange(256, dtype=np.float32)
    d = np.full((64, 4), np.nan, np.float32)
    emulate(buffer_load_rows(256, 40, 64), x, d)
    want = np.zeros((64, 4), np.float32)
    want[:40] = x[16 + np.arange(40)[:, None] * 4 + np.arange(4)]  # soffset 64 bytes = 16 floats
    np.testing.assert_array_equal(d, want)


def test_lane_partly_in_range_is_an_error():
    x = np.zeros(64, np.float32)  # 256 bytes; lane 15 reads [240, 256) + soffset 8 -> past the end
    with pytest.raises(EmulationError, match="only partly inside the buffer range"):
        emulate(buffer_load_rows(64, 64, 8), x, np.zeros((64, 4), np.float32))


def test_misaligned_buffer_load_is_an_error():
    x = np.zeros(1024, np.float32)
    with pytest.raises(EmulationError, match="not 4-byte aligned"):
        emulate(buffer_load_rows(1024, 64, 0, voffset_step=18), x, np.zeros((64, 4), np.float32))


def test_num_bytes_out_of_range_is_refused():
    from tvm_cdna4.patterns.wave import buffer_load

    with pytest.raises(ValueError, match=r"num_bytes 0 must be in \[1, 2\*\*31\)"):
        buffer_load(None, 0, 0, 0, "float32x4")
    with pytest.raises(ValueError, match="not a 16-byte vector or a 32-bit word"):
        buffer_load(None, 64, 0, 0, "float32x2")
