"""The sm90 options of issue 36 as data and as refusals: ``--emit config`` (``summary``) shows what a cluster's
CTAs load (``b_shares``) and when a persistent attention CTA releases Q (``early_q_release``, ``tiles_before_q``,
O's buffer); a refusal names the fields it found and, for the attention's ring, the deepest that fits."""

from __future__ import annotations

import json

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention, gemm
from tvm_cdna4.kernels.attention.problem import AttentionProblem
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

SMEM = 232448  # an H100's / H200's shared memory per SM


def test_a_gemm_plans_json_names_each_ctas_share_of_b():
    p = gemm.plan(GemmProblem(300, 500, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 168, cluster_m=2))
    assert json.loads(p.to_json())["b_shares"] == [88, 80]
    p = gemm.plan(GemmProblem(300, 500, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 128))
    assert json.loads(p.to_json())["b_shares"] == [128]


@pytest.mark.parametrize("persistent, epilogue, release, before, buffer", [
    (False, "registers", False, 0, None),
    (True, "registers", True, 1, None),
    (True, "tma", False, 3, None),
    (True, "tma_buffer", True, 1, 8192 + 3 * 2 * 8192),
])
def test_an_attention_plans_json_names_its_q_release_and_o_buffer(persistent, epilogue, release, before, buffer):
    problem = AttentionProblem(1, 2, 1, 130, 200, 64)
    p = attention.plan(problem, "sm90", Sm90AttentionConfig(128, 3, persistent=persistent, epilogue=epilogue))
    s = json.loads(p.to_json())
    assert (s["early_q_release"], s["tiles_before_q"], s["o_buffer"]) == (release, before, buffer)


def test_the_attention_epilogue_refusal_names_every_epilogue_and_the_ring_refusal_the_deepest_that_fits():
    d128 = AttentionProblem(1, 2, 1, 130, 200, 128)
    with pytest.raises(ContractError, match="its own buffer") as e:
        Sm90AttentionConfig(128, 2, epilogue="buffer").check(d128, SMEM)
    assert e.value.operand == "epilogue"
    with pytest.raises(ContractError, match=r"stages <= 2 of 128 keys with epilogue='tma_buffer'") as e:
        Sm90AttentionConfig(128, 3, epilogue="tma_buffer").check(d128, SMEM)
    assert e.value.operand == "stages"


@pytest.mark.parametrize("config, found", [
    (Sm90Config(residual_read="sliced", epilogue="registers"),
     "residual_read='sliced', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=1"),
    (Sm90Config(cluster_m=2, swap_ab=True, split_k=2), "split_k=2, swap_ab=True, multicast='A'"),
    (Sm90Config(block_n=8, cluster_m=2), "cluster_m=2, block_n=8, multicast='B'"),
    (Sm90Config(cluster_m=2, ctas=5), "cluster_m=2, ctas=5"),
    (Sm90Config(cluster_m="2"), "'2'"),
])
def test_a_gemm_refusal_names_the_fields_it_found(config, found):
    with pytest.raises(ContractError) as e:
        gemm.plan(GemmProblem(256, 256, 256, "bf16", "nt", "bf16", fusion=Fusion(residual=True)), "sm90", config)
    assert e.value.found == found


def test_the_grouped_cost_model_takes_the_gaps_walk_where_the_prefix_leaves_no_two_stage_ring():
    """The prefix walk's 8 bytes a group (``gemm_plan.prefix_bytes``): at 30000 groups 240 KB, past the SM's shared
    memory; the cost model's plan then walks the gaps (no shared words), not a refusal of its own choice."""
    many = gemm.plan(GemmProblem(None, 256, 256, "bf16", "nt", "bf16", groups=30000), "sm90", m=30000 * 64)
    assert many.config.tile_walk == "gaps" and many.smem_bytes <= SMEM
    few = gemm.plan(GemmProblem(None, 256, 256, "bf16", "nt", "bf16", groups=64), "sm90", m=64 * 64)
    assert few.config.tile_walk == "prefix"


def test_a_prefix_walk_past_the_shared_memory_is_refused_naming_the_gaps_walk():
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config as C

    with pytest.raises(ContractError, match="prefix walk") as e:
        gemm.plan(GemmProblem(None, 256, 256, "bf16", "nt", "bf16", groups=30000), "sm90",
                  C(64, 64, 2, 1, tile_walk="prefix"), m=30000)
    assert e.value.operand == "stages" and "tile_walk='gaps'" in e.value.expected
