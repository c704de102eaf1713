"""The sm80-class paged decode's plan-time rules that weigh the estimate (issue 37), and the module flags a plan
reads. Pure Python, no TIRx.

**The balanced partition by rule** (``WEIGH_BALANCE``, on; ``weigh_balance``): a plan whose config leaves
``balance`` to the module (``PagedDecodeConfig.balance`` None, ``BALANCE`` off) takes the balanced partition with the
partition-major order (``split_major``, unless the config says otherwise) where ``paged_decode_estimate.plan_seconds``
puts it faster than the plan without it on **every** stand-in batch (``standin_contexts``): the host knows the
longest context's hint, the batch, the kv heads and the SMs, not the lengths (reading them would synchronize), so the
rule asks the estimate about the batches that hint allows at their extremes and takes the balance only where none
of them loses: every sequence at the hint; the lengths evenly spread below it (``hint (i + 1) / batch``); the lengths
spread log-evenly over ``STANDIN_SPREAD`` below it. A tie keeps the plan. Where the balanced partition is refused
(``check_balance``: ``balance_divisor`` < 1, past ``MAX_BALANCE_BATCH``) the rule keeps the plan. The estimate's two
terms for this (``EMPTY_CTA_S``: an empty CTA holds its slot a moment, so the launch order counts;
``BALANCE_START_S``: a balanced CTA reads and sums every length first) are fitted to the H100 runs of both switches.
Each plan is weighed with the merge it takes (``paged_decode_plan.merged``; the estimate's ``merge_term``: a last-CTA
merge saves the merge kernel's launch, less its partials): the balanced plan, about one wave, has few partitions a
sequence, so it often merges in the last CTA where the default merges in the kernel or merges more. Balance alone (a config's ``split_major=False``) is weighed in the bh-major order, where its empty CTAs come first:
the rule does not take it at the 9.4k row (``test_paged_decode_rule.py``).

What it does (GQA 32/8, D 128, 132 SMs, the hints of ``benchmarks/paged_decode.py``'s draws; balanced over default
by stand-in, all at the hint / even / log-spread, H100 spec, each with its merge): batch 8, bf16: off at the 4.7k
hint (the 1.8k draw: -4.0 / -2.3 / +1.0 %), on at 23.8k / 23.6k (the 9.4k / 15k draws: -0.7..-5.4 % on each); fp8:
off at 4.7k (-2.1 / +0.5 / +1.6 %), on at 23.8k / 23.6k (-0.5..-3.1 %); batch 32, both: off (even +3.5..+5.2 %, log
-0.3..+17.1 %: one wave of about one CTA a sequence puts the longest sequence's CTA in the tail); batch 64: refused
(``balance_divisor`` < 1), off. The H200 spec (the planner's without a GPU) makes the same choices at GQA 32/8 and
64/8 (``tests/kernels/sm80/test_paged_decode_rule.py``). Weighing the merges (stop 56) moved batch 16 only (the
benchmark's means 512 / 2k / 8k / 32k; both GQAs but where said): on the H100 spec bf16 at the 2k hint (the 512 draw; log -0.0 %:
a near tie) and fp8 at 29.2k (the 8k draw), on the H200 spec fp8 at 7.9k / 29.2k and bf16 64/8 at 29.2k / 32.1k:
each turned on (journal "Stop 56: pagedfix"; ``gpu_stop45.sh pagedfix`` times them). The estimate is fitted to the
sm80 kernel's bf16 timings; the sm90 row and fp8 plans are weighed by it unfitted.

**The flags a plan reads** (``PLAN_FLAGS``, ``plan_flags``): the module switches ``plan_paged_decode`` consults
where the config leaves a choice to the module. A cache of built kernels keyed by the problem alone would serve a
kernel planned under other values after a flag is toggled: ``tvm_cdna4.torch.paged_attention`` keys its kernels and
its prepared launches by ``plan_flags()`` too. The tuning constants (``STAGES``, ``FILL_WAVES`` ...) are not flags:
not in the key."""

from __future__ import annotations

import attrs

from ..attention.paged import PagedDecodeProblem
from ..flags import FlagSet
from ..gemm.dynamic_m import ceil_div
from .paged_decode_estimate import plan_seconds
from .paged_decode_grid import balance_divisor

WEIGH_BALANCE = True
"""Whether a plan without ``PagedDecodeConfig.balance`` weighs the balanced partition by the estimate
(``weigh_balance``): yes since stop 55 (H100, ``benchmarks/gpu_stop45.sh pagedrule``: the rows the rule moves, batch
8 at 8k / 16k means, bf16 and fp8, 1.01-1.06x the default; the rows it leaves equal the default's plan)."""
STANDIN_SPREAD = 16
"""The longest over the shortest length of the log-spread stand-in batch (``standin_contexts``): the spread of
``benchmarks/paged_decode.py``'s draws (``SPREAD`` below and above the centre)."""
PLAN_FLAGS = (("sm80.paged_decode_plan", "BALANCE"), ("sm80.paged_decode_plan", "SPLIT_MAJOR"),
              ("sm80.paged_decode_plan", "INFLIGHT"), ("sm80.paged_decode_plan", "WIDE_FP8"),
              ("sm80.paged_decode_plan", "WEIGH_LAST_CTA"), ("sm80.paged_decode_plan", "WEIGH_REGISTER_CAP"),
              ("sm80.paged_decode_pdl", "PDL"), ("sm80.paged_decode_rule", "WEIGH_BALANCE"))
"""``(module dotted from tvm_cdna4.kernels, name)`` of every module flag ``plan_paged_decode`` reads (the sm90 row
plans through it): ``plan_flags``' values. The guard (``tests/kernels/test_plan_flags.py``, as for every family)
holds it to the switches of both rows' build closure but two build-path edges: ``sm80.paged_target``'s import of
``sm80.gemm`` (the build cache's digest and compile) reaches ``decode_plan.WEIGH_WIDE_DECODE``, and the sm90
emitter's of ``sm90.gemm_emit`` (a tensor map's host lines) ``gemm_plan`` / ``gemm_shift``'s switches; no paged
plan reads them (they choose GEMM plans): not listed."""


plan_flags = FlagSet(PLAN_FLAGS)
"""``plan_flags()``: the values of ``PLAN_FLAGS`` now, in their order: what a cache of plans or kernels keys besides
the problem (read on every eager call of the torch op: kept between sets of a flag, ``kernels.flags``)."""


def standin_contexts(problem: PagedDecodeProblem, context: int) -> dict:
    """``{name: lengths}``: the stand-in batches of ``problem.batch`` lengths whose longest is the hint ``context``
    (module docstring): ``"full"``, ``"even"``, ``"log"``."""
    B = problem.batch
    return {"full": [context] * B, "even": [ceil_div(context * (i + 1), B) for i in range(B)],
            "log": [max(1, round(context * STANDIN_SPREAD ** (-i / max(B - 1, 1)))) for i in range(B)]}


def weigh_balance(plan, divisor: int, split_major: bool, device, place) -> bool:
    """Whether ``plan`` (no balance) evolved to ``balance=divisor`` and ``split_major`` is faster by
    ``paged_decode_estimate.plan_seconds`` on ``device`` on every ``standin_contexts`` batch (module docstring), each
    plan with the merge ``place`` gives it (``paged_decode_plan.merged``: the estimate weighs the launch it saves)."""
    balanced, unbalanced = place(attrs.evolve(plan, balance=divisor, split_major=split_major)), place(plan)
    return all(plan_seconds(balanced, lengths, device) < plan_seconds(unbalanced, lengths, device)
               for lengths in standin_contexts(plan.problem, plan.context).values())


def balance_by_rule(plan, config, slots: int, device, place):
    """``plan`` (its ``split_major`` decided, no balance, its merge not placed; its config leaves ``balance`` to the
    module, ``BALANCE`` off, the batch within ``MAX_BALANCE_BATCH``: the planner's checks) with the balanced partition
    where the rule takes it (``WEIGH_BALANCE`` on, ``balance_divisor`` >= 1, ``weigh_balance`` with ``place``):
    partition-major unless ``config.split_major`` is False; else ``plan``."""
    if not WEIGH_BALANCE:
        return plan
    divisor = balance_divisor(plan.problem, slots)
    if divisor < 1:
        return plan
    major = config.split_major is not False
    if not weigh_balance(plan, divisor, major, device, place):
        return plan
    return attrs.evolve(plan, balance=divisor, split_major=major)


__all__ = ["PLAN_FLAGS", "STANDIN_SPREAD", "WEIGH_BALANCE", "balance_by_rule", "plan_flags", "standin_contexts",
           "weigh_balance"]
