"""``cuda.wgmma_check`` around control flow (found by review, 2026-12-06): a kernel with an ``if`` after
the wait builds (the walk read ``If.cond``, which TIRx spells ``condition``); a group left in flight by a
``break`` reaches the read after the loop; a view made from a pointer variable (``p = acc.ptr_to(...)``)
is the accumulator it points into."""

import pytest

import wgmma_check_kernels as K
from tvm_cdna4.cuda.wgmma_check import check_accumulators
from tvm_cdna4.errors import ContractError
from tvm_cdna4.rocm.build import register

register()


def test_an_if_after_the_wait_is_accepted_and_builds():
    from tvm_cdna4.cuda.build import compile_blobs

    check_accumulators(K.k_if_ok)
    compile_blobs(K.k_if_ok, "sm_90a")


@pytest.mark.parametrize("kernel", ["k_break", "k_ptr", "k_ok_ctrl"])
def test_a_read_before_the_wait_is_refused_through_break_and_pointer_views(kernel):
    with pytest.raises(ContractError, match="before the wgmma.wait_group") as err:
        check_accumulators(getattr(K, kernel))
    assert err.value.check == "accumulator wait"


def test_a_swizzled_operand_must_start_in_the_first_row_of_its_period():
    # the descriptor's base offset is 0: a start 512 bytes into a 1024-byte 128B-swizzle period is refused
    from tvm_cdna4.cuda.build import compile_blobs
    from tvm_cdna4.errors import presented

    with pytest.raises(ContractError, match=r"first 128-byte row of a swizzle period.*found byte offset 512") as err:
        with presented():
            compile_blobs(K.sliced_a(4), "sm_90a")
    assert err.value.check == "alignment" and err.value.operand == "A"
    compile_blobs(K.sliced_a(8), "sm_90a")  # a whole period in: accepted
