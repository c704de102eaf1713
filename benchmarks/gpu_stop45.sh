#!/bin/bash
# What stops 45 and 46 (2026-12-06) run on a GPU, by step, in device calls on an H100 / H200 (from the repository root; the
# TIRx / tvm-ffi wheels in $WHEELS, default .sm90tree/whl, or packed by benchmarks/pack_site.sh in .sm90tree/sitepack:
# carry that one where the call also carries FlashInfer or older trees; outputs under $OUT, packed into $OUT/call.tgz at the end:
# the device tool returns a bounded number of files). Steps, each cut by its own timeout (seconds of wall on an H100):
#   peers       the kernels cuBLAS / cuDNN launch on our benchmark shapes (benchmarks/peer_kernels.py) [~60]
#   partitions  the paged decode at batch 8, mean 2k (fp8 / bf16 1.53x there) at forced partitions and both merge
#               places [~60]
#   ncu         Nsight Compute (--set full, source counters) of the sm90 GEMM at M = 200 (Qwen2.5-7B QKV, the
#               bucket plan; 0.82x at M = 200) and of 4096^3 with a residual (+12 %): text pages, no report [~150]
#   ncu-attention  the same of the sm90 attention at 8 x 2k tokens, D 128 and D 64 causal (0.92 / 0.83x cuDNN) [~120]
#   validate    this stop's helpers' work: GPU tests, sm90_sweep --waves, the wide fp8 paged tiles [~330]
#   gemm-ab     the torch op's GEMM at every M, and at M = 32 / 96 / 200 with the package before the refit [~330]
#   refit       the torch op at M = 20 / 32 / 200 with main and with the cost model's refit (REFIT_PKG, default
#               .sm90tree/refitpkg: `git archive h-refit tvm_cdna4 | tar -x -C .sm90tree/refitpkg`, carried) [~120]
#   cluster     the sm90 GEMM in clusters of two (cluster_m): its GPU tests, then benchmarks/sm90_clusters.py at
#               M = ${CLUSTER_MS:-768,3000} (cluster_m 1 / 2 at the model's config beside torch.matmul) [~200]
#   ncu-cluster  Nsight Compute of the sm90 GEMM unclustered and in clusters of two (Qwen2.5-7B o at M = 3000,
#               128x224): the stall reasons of the clustered mainloop, should `cluster` still find it slower [~120]
#   residual    the residual reads spread over the mainloop ('sliced', 'prefetch'): GPU tests, sm90_gemm.py --epilogue
#               [~130]
#   attn-options  the persistent attention (Q released at the last S) and epilogue='tma_buffer': GPU tests, then
#               attention_sm90.py --seqs 2048,4096 --configs options --options tma-buffer [~160]
#   grouped-walks  the grouped kernel's prefix walk: its GPU tests, grouped_sm90_sweep.py --walks (the old and new
#               plans beside torch._grouped_mm) [~150]
#   grouped-op  the torch op's grouped GEMM at the prefix walk and the refit choice (torch_grouped_sm90.py), then the
#               sweep at the buckets the refit moved untimed (24-200 rows a group) [~300]
#   paged-fi8   FlashInfer beside ours at batch 8 (the rows short of it before the partition fill) [~150]
#   final       the torch ops at the stop's plans (GEMM every M, fp8, grouped + its peer's kernels, D 64 attention) [~480]
#   gemm        the GPU tests of the sm90 GEMM, the torch op over the 12 projections at every M [~240]
#   attention   every shape of benchmarks/attention_sm90.py at the cost model's configs [~300]
#   swapdyn     swapped dynamic-M plans over several tiles of M (issue 36, M = 96-256): their GPU tests, then the torch
#               op at M = ${SWAPDYN_MS:-32,96,200} with gemm_cost.WEIGH_SWAP_DYNAMIC off and on (one process each, beside
#               torch.matmul; torch_gemm.py --swap-dynamic off,on) [~360]
#   order       the persistent tile order (issue 36: group_m, raster; kernels.sm90.gemm_order's modelled DRAM bytes): its
#               GPU tests, then benchmarks/sm90_order.py at 4096^3 (plain, residual: group_m 4 / 8 / 16, raster n) and
#               the twelve projections at M = ${ORDER_MS:-3000} (g8, g16, the model's order) beside torch.mm [~200]
#   swapstore   the swapped kernel's C^T store as column pairs after one shfl.xor (stop 48, kernels.sm90.gemm_store): the
#               swapped GPU tests, the torch op's A/B at M = ${SWAPSTORE_MS:-96,200} (WEIGH_SWAP_DYNAMIC off / on; the
#               table of 2026-12-07 before), the static swap sweep at M = 200, then ncu of both QKV bucket plans [~420]
#   stop47      cluster (M = ${CLUSTER_MS:-3000}), order and swapdyn's benchmarks without their GPU tests [~450]
#   stop47b     attn-options, grouped-op's torch op and final's fp8, benchmarks only [~300]
#   cli-options the sm90 config fields from the CLI (--cluster-m, --residual-read, --epilogue-tile, --tile-walk,
#               attention --epilogue --persistent --stages): --validate and --bench on the card,
#               tests/gpu/test_sm90_cli_options_gpu.py [~110]
#   moedecode   Mixtral-8x7B's grouped decode (32 and 64 tokens, seeds 0 and 1) beside torch._grouped_mm and the sm80
#               kernel (stop 48's one-sweep plan was timed here and reverted) [~150]
#   attnsass    stop 48: the sm90 attention's consumer with hoisted wgmma descriptors, Q's in uniform registers and
#               the row max over four chains (SASS 538 -> 482 a kv tile a thread at D 128): its GPU tests, then
#               attention_sm90.py --seqs 2048,4096 with this tree and with the package before it (BASE_PKG, default
#               .sm90tree/basepkg: `git archive 325368f tvm_cdna4 | tar -x -C .sm90tree/basepkg`, carried) [~260]
#   attnring    stop 48: the ring's stage and phase carried as counters (SASS 482 -> 462 a kv tile at D 128): its GPU
#               tests, then attention_sm90.py --seqs 2048,4096 with this tree, the tree before it (RING_BASE_PKG, default
#               .sm90tree/attnsasspkg: `git archive 15059eb tvm_cdna4 | tar -x -C .sm90tree/attnsasspkg`) and the tree
#               before attnsass (BASE_PKG, as attnsass), both carried, on one card [~430]
#   m200        issue 36's M = 200 / 96 rows (stop 49, m200): the DeviceSpec the torch op plans with (the H100 runs
#               of 2026-12-06/07 planned with the H200's numbers: their stored estimates are DEVICES["H200"]'s), the
#               torch op at M = ${M200_MS:-400,1200} with gemm_cost.WEIGH_SPLIT_EPILOGUE off / on beside torch.matmul (the buckets it moves on an H100)
#               (torch_gemm.py --split-epilogue off,on), then cuBLAS's tiles of the M = 200 qkv / o / down and M = 96 o
#               rows in our swapped kernel (our ring and cuBLAS's deeper one) beside the bucket plans and the model's
#               choice, each with its estimate (sm90_sweep.py --peers) [~290]
#   epires      stop 49 (journal "Stop 49: epires"): the residual read ahead of the epilogue ('preread') and the global
#               read a column pair a load (gemm_residual.residual_pairs; 'global', 'prefetch'): their GPU tests, then
#               sm90_gemm.py --epilogue (every residual read; plain with the 64-column staging and a fourth stage;
#               cuBLAS's residual through beta = 1 and cuBLASLt's bias + gelu beside torch.mm) [~230]
#   epires-ncu  Nsight Compute source pages (stall sampling) of 4096^3 plain, residual 'tma' and 'preread': where the
#               residual's +10 % waits [~200]
#   stop49      one call of this stop's levers, benchmarks only (each checks every kernel first): the DeviceSpec the
#               torch op plans with, the attention at 2k / 4k with this tree and the tree before attnsass (BASE_PKG),
#               2 / 3 consumers at D 64 (attn3wg), the torch op at M = 96 / 200 beside torch.matmul, planned with the
#               present card's DeviceSpec (review49's fix: an H100 had planned with the H200's) [~470]
#   stop49b     stop49 without the tree before attnsass [~350]
#   attn3wg     stop 49 (journal "Stop 49: attn3wg"): three consumer warpgroups (Sm90AttentionConfig.consumers=3, 192
#               query rows) at D 64: tests/gpu/test_sm90_attention_3wg_gpu.py (exact, O and LSE), then attention_sm90.py
#               --head-dims 64 --seqs 2048,4096,16384 --configs consumers (2 and 3 consumers, 128 / 64 keys, grid and
#               persistent, beside cuDNN) [~280]
#   swaporder   stop 49 (journal "Stop 49: swapmulti"): a swapped bucket plan's token tiles of one weight panel on adjacent
#               CTAs (gemm_cost.SWAP_PANEL_ADJACENT, raster "n"): the swapped-tiles GPU tests, then the torch op at
#               M = ${SWAPORDER_MS:-96,200} (qkv / o / down) with WEIGH_SWAP_DYNAMIC on and the walk off / on, beside
#               torch.matmul (torch_gemm.py --swap-dynamic on --swap-order off,on) [~260]
#   swaporder-ncu  the two walks of Qwen2.5-7B o's swapped 64x128 bucket plan at M = 200 under ncu: DRAM bytes, L2 hit
#               rate, sectors across the L2 partitions' fabric, duration (whether a weight panel leaves DRAM or crosses
#               the fabric twice when its readers sit 8 CTAs apart); full sets: ncu_cases.py gemm-m200-o-swapped-m / -n [~150]
#   decode32    stop 50 (journal "Stop 50: decode32"): the decode kernel up to M = 32 tokens (decode_plan.DECODE_MAX_M):
#               tests/gpu/test_decode32_gpu.py (exact at M = 17 / 24 / 29 / 32, odd N / K, the torch op's 17..32 bucket), then
#               the torch op at M = ${DECODE32_MS:-12,16,17,20,24,27,32} with decode_plan.WEIGH_WIDE_DECODE off / on beside
#               torch.matmul (torch_gemm.py --wide-decode off,on) [~200]
#   swapcluster  stop 50 (journal "Stop 50: swapcluster"): the swapped kernel in clusters of two token tiles, the weights
#               multicast (Sm90Config(swap_ab=True, cluster_m=2)): its GPU tests, then sm90_sweep.py --swap-clusters (the
#               swapped tiles 64x104/1, 128x104/2, 64x48/1 and the model's, c1 / c2, on qkv / o / down of the three
#               models beside cuBLAS) at M = 200, 240, then 96, 144 [~235]
#   attnfit     stop 50 (journal "Stop 50: attnfit"): the torch op's attention (tvm_cdna4.torch.attention) at the cost
#               model's fitted defaults (attention_cost.WEIGH_CONSUMERS: 3 consumers at D 64 on 2k-16k tokens), D 64 and
#               128 at 2k / 4k / 16k tokens, MHA / GQA, causal or not, beside cuDNN and FA2 (attention_sm90.py
#               --torch-op; the default kernel beside it), after the torch op's D 64 default against SDPA
#               (tests/gpu/test_sm90_attention_3wg_gpu.py -k torch_ops_default) [~200]
#   attnfit-long  D 64 at 8k and 32k tokens, 2 / 3 consumers (--configs consumers, with the model's first
#               two-consumer config, 192 keys): the model's three there are untimed (5-11 % of its estimate ahead) [~130]
#   attnitem    stop 50 (journal "Stop 50: attnitem"): an item's first S and last P V outside ping-pong's turns
#               (Sm90AttentionConfig.item_overlap): tests/gpu/test_sm90_attention_item_overlap_gpu.py (exact, O and LSE;
#               the 8 x 2k D 128 shape against SDPA), then attention_sm90.py --head-dims 128,64 --seqs 2048,4096
#               --configs options --options item-overlap (grid / persistent, off / on, beside cuDNN) [~200]
#   attnzigzag  stop 50 (journal "Stop 50: attnzigzag"): the persistent CTAs' walks (Sm90AttentionConfig.walk: zigzag,
#               fold): tests/gpu/test_sm90_attention_walk_gpu.py (exact, O and LSE; 8 x 2k D 128 causal against SDPA),
#               then attention_sm90.py --head-dims 128,64 --seqs 2048,4096 --causal-only --configs options --options
#               zigzag,fold (grid / persistent round robin / zigzag / fold beside cuDNN) [~190]
#   fa3tile     stop 52 (journal "Stop 52: fa3sass"): FlashAttention-3's tile (176 keys, 2 stages) at D 128, with and
#               without split K / V barriers, grid / persistent, beside the default and cuDNN at 2k / 4k: the consumer
#               issues 424-434 instructions a 128 keys there against 462 at 128 keys (FA3 432) [~150]
#   attnlat     stop 52 (journal "Stop 52: attnlat2"): the overlapped loop's P V wait held behind the 8th / 16th exp
#               (Sm90AttentionConfig.exps_before_pv_wait: 14 / 30 of 66 EX2 before it, FA3 13-19; default 0), grid /
#               persistent, beside the default and cuDNN at 2k / 4k, D 128 [~150]
#   peers-mid   stop 50: what cuBLAS runs between the benchmark's M (257..512 is our worst: 0.79x at 300) [~60]
#   refine      the buckets cut where one plan loses > REGRET_MAX (gemm_dynamic.refined) at M between the old buckets'
#               tops [~200]
#   swapone     swapped buckets of one token tile (SWAP_M_TILES 1) on / off at M of every small bucket [~180]
#   splitwave   a K split of no more units than SMs (gemm_cost.SPLIT_IN_ONE_WAVE) on / off, the down projections [~90]
#   walktests   stop 51: the walks' GPU tests alone (tests/gpu/test_sm90_attention_walk_gpu.py) [~110]
#   finecut     stop 51: the torch op with gemm_dynamic.FINE_CUTS off / on at M = ${FINECUT_MS:-260,288,300,320} [~120]
#   trim        stop 51: Sm90Config.trim_loads (gemm_plan.TRIM_LOADS): tests/gpu/test_sm90_trim_loads_gpu.py, then the
#               torch op off / on at M = ${TRIM_MS:-96,200,260,300,333,600,1200,3000} [~260]
#   pagedsplit  stop 51 (journal "Stop 51: pagedsplit"): the paged split's GPU tests (forced partitions, a short hint,
#               both merges: exact), then paged_decode.py at batch 8 and 32 (control), means 2k / 8k / 32k, GQA 32/8 and
#               64/8, bf16 and fp8, FlashInfer (carried: .sm90tree/flashinfer, carry it) beside, ours also at forced
#               512 / 768 / 1024 keys (512: bf16's choice, 1024: fp8's past 2k; the estimate's candidates at 15k) and
#               each row's estimate (kernels.sm80.paged_decode_estimate); then batch 8 / 2k at 320 keys, the bf16
#               choice before FILL_WAVES (4d57cfe), beside today's [~165]
#   zerofill    stop 51 (journal "Stop 51: zerofill"): the torch op's bucket plans with gemm_cost.WEIGH_ZERO_FILL off / on
#               (the estimate weighs TMA's zero fill of a partial tile) at M = ${ZEROFILL_MS:-200,260,300,450,600,1200} [~200]
#   paged       stop 52: issue 37's table in one call: paged_decode.py's bf16 and fp8 sets at batch 8, 32, 64, means
#               2k / 8k / 32k, GQA 32/8 and 64/8, FlashInfer (carried: .sm90tree/flashinfer, carry it) and SDPA beside,
#               each row's estimate; RESULTS.md "Paged decode attention" [~280]
#   pagedb8     stop 52 (journal "Stop 52: pagedb8"): the balanced paged partition (PagedDecodeConfig.balance: the
#               partition widened on the device from the lengths to one wave of CTAs, FlashInfer TC's rule in closed
#               form): its GPU tests (sm80 / sm90, both merges), then paged_decode.py at batch 8, means 2k / 8k / 32k (1.8k /
#               9.4k / 15k drawn), GQA 32/8 and 64/8, bf16, FlashInfer (carried: .sm90tree/flashinfer, carry it) beside, ours
#               off (the row) / balance=true / split_major=true (CTAs launched partition-major: the empty ones last) /
#               both / balance=true with the last-CTA merge, the row's estimate and the balanced one [~150]
#               both / balance=true with the last-CTA merge, the row's estimate and the balanced one [~115]
#   fp8eff      stop 53 (journal "Stop 53: fp8eff"): the fp8 paged kernel's ring by its bytes in flight (issue 37; fp8 88-89 %
#               of the H200's read rate at batch 64 where bf16 reads 103-105 %): paged_decode.py fp8, batch 8 / 32, means 2k / 8k,
#               GQA 32/8 and 64/8, FlashInfer (carried: .sm90tree/flashinfer, carry it) beside; ours the model's (4 warps x 2
#               wide stages, 96 KiB in flight an SM) / inflight=true (2 warps x 3, 4 CTAs, 128 KiB) / stages=3 (4 x 3, 2 CTAs,
#               128 KiB) / warps=2:stages=4 (3 CTAs, 144 KiB) [~140]
#   short2k     stop 53 (journal "Stop 53: short2k"): paged decode at short contexts (issue 37): paged_decode.py bf16 / fp8,
#               batch 8 / 16, means 512 / 2k / 3k (512: the call's fixed part), GQA 32/8, FlashInfer (carried:
#               .sm90tree/flashinfer, carry it) beside; ours the model's (two launches) / merge=last-cta / the last-CTA merge in one round (merge_batch=16) / that
#               with the balanced partition-major grid / partition=1024 (fp8's bytes are half) [~120]
#   epiearly    stop 52 (journal "Stop 52: epiearly"): the residual's global loads issued in the mainloop into registers
#               (residual_read="early", gemm_residual.load_early): tests/gpu/test_sm90_residual_early_gpu.py (every read
#               path within the bound; C = bf16(A B^T + residual) bit for bit against torch), then sm90_gemm.py
#               --epilogue ("residual (early)", "all five (early)" beside plain, "global" and the other reads) [~220]
#   reach       stop 52 (journal "Stop 52: reach"): gemm_dynamic.FINE_CUTS off / on through the torch op on the models
#               beside the RESULTS three (torch_gemm.py --models ${REACH_MODELS:-llama-3.2-3b,qwen2.5-14b,qwen2.5-1.5b},
#               qkv / o / down: gate/up moves nowhere) at M = ${REACH_MS:-260,288,316,350,650,672,772,800}: the parts
#               257..320, 641..704, 769..832 the fine cut gives them (benchmarks/sm90_reach.py), 350 a control [~160]
#   power       stop 52: the sm90 GEMM and cuBLAS at M >= 768 at the SM clock and board power they sustain (random and
#               all-zero operands; benchmarks/sm90_power.py): the work per clock against the tensor cores' peak [~120]
#   widen       stop 52 (journal "Stop 52: widen"): the wide-N shapes (3000x14336x3584, 768x37888x3584; controls
#               3000x37888x3584, 768x14336x4096) at the clock and power they sustain: the torch op, its bucket plan and
#               the static plan built static, the candidates of benchmarks/sm90_widen.py (tail-filling widths 240 / 248,
#               the order of least DRAM bytes, clusters of two, a fourth stage) beside cuBLAS, whose kernel names it
#               records; each kernel checked first [~190]
#   deepwaves   stop 52: the torch op with gemm_cost.WEIGH_DEEP_WAVES off / on (wave-fitting widths to DEEP_MAX_WAVES waves:
#               the wide-N tails of benchmarks/sm90_widen.py) at M = ${DEEPWAVES_MS:-768,1200,3000,8192} [~130]
#   swap200     stop 53: the torch op with gemm_cost.WEIGH_SWAP_NARROW off / on (M past SWAP_DYNAMIC_MAX_M in swapped
#               16-row buckets, one token tile) at M = ${SWAP200_MS:-160,200,240,256}, ${SWAP200_PROJS:-qkv,o,down} [~140]
#   resclock    stop 53 (journal "Stop 53: resclock"): energy or cycles? The residual at 4096^3 at the clock and power it
#               sustains: our plain GEMM and residual (global, prefetch, tma; whole-tile staging s3, 64-column s4),
#               torch.mm and cuBLAS's addmm_ in place: time, clock, power, cycles and energy a call, each over its plain
#               GEMM (sm90_power.py --epilogue) [~100]
#   shiftbox    stop 53 (journal "Stop 53: shiftbox"): the last token tile row's box shifted to M - block, inside the
#               tokens (Sm90Config.shift_last, gemm_shift.SHIFT_LAST): tests/gpu/test_sm90_shift_last_gpu.py (C bit for
#               bit the unshifted kernel's), then the torch op off / on at M = ${SHIFTBOX_MS:-96,200,260,300,1200},
#               ${SHIFTBOX_PROJS:-qkv,o,down} [~180]
#
# NO_GPU_TESTS=1 skips the steps' pytest runs (every benchmark still checks each kernel against its reference first).
#
#   bash benchmarks/gpu_stop45.sh peers partitions ncu
#   fp8grp      stop 53: the fp8 and the grouped torch ops at today's plans, benchmarks only (torch_fp8_gemm.py,
#               torch_grouped_sm90.py; RESULTS.md's fp8 and grouped tables) [~190]
#   grpbig      stop 53 (journal "Stop 53: grpbig"): Mixtral-8x7B's grouped prefill (2k / 8k tokens) with the grouped
#               configs' walk prefix / windows / prefix (gemm_cost.GROUPED_WALK: torch_grouped_sm90.py --walk) [~140]
#   zerofill2   stop 53 (journal "Stop 53: shifttma"): gemm_cost.WEIGH_ZERO_FILL off / on with the shift on
#               (gemm_shift.SHIFT_LAST: the model moves TMA-store qkv / o plans to shifted register ones) at
#               M = ${ZEROFILL2_MS:-260,300,333,600}, ${ZEROFILL2_PROJS:-qkv,o} [~130]
#   shifttma    stop 53 (journal "Stop 53: shifttma"): TMA-store plans shift their last token tile row too
#               (gemm_shift.SHIFT_TMA: that tile stores from registers): tests/gpu/test_sm90_shift_tma_gpu.py (C bit
#               for bit the unshifted TMA kernel's), then the torch op off / on at M = ${SHIFTTMA_MS:-260,300,333},
#               ${SHIFTTMA_PROJS:-qkv,o} [~140]
#   shiftdepth  stop 55 (journal "Stop 55: shiftdepth"): SHIFT_TMA "half" (gemm_shift.HALF: a TMA-store plan shifts its last
#               token tile only where it holds at most half a tile): tests/gpu/test_sm90_shift_tma_gpu.py -k half (C bit for
#               bit the unshifted kernel's), then the torch op off / on / half at M = ${SHIFTDEPTH_MS:-260,300,333,3000},
#               ${SHIFTDEPTH_PROJS:-qkv,o} [~150]
#   pagedpdl    stop 54 (journal "Stop 54: pagedpdl"): the paged decode as programmatic dependent launches (issue 37's short
#               contexts; PagedDecodeConfig.pdl, kernels/sm80/paged_decode_pdl.py): tests/gpu/test_paged_pdl_gpu.py (eager and in
#               a CUDA graph), then paged_decode.py bf16 / fp8, batch 8 / 32, means 512 / 2k / 8k, GQA 32/8, FlashInfer (carried:
#               .sm90tree/flashinfer, carry it) beside; ours the model's / merge=kernel / pdl=true:merge=kernel /
#               merge=last-cta / pdl=true:merge=last-cta [~150]
#   chunkepi    stop 54 (journal "Stop 54: chunkepi"): the chunked TMA epilogue (epilogue_tile=64) with one named barrier
#               a chunk (gemm_epilogue.store_tma_chunks): tests/kernels/sm90/test_sm90_epilogue_tile.py on the card (two
#               and three chunks a tile), then at 4096^3 at the clock it sustains the whole-tile plain GEMM and residual
#               against the 64-column staging with four stages, plain / residual global / prefetch, beside torch.mm and
#               addmm_ (sm90_power.py --epilogue --set chunks): time, clock, cycles a call over plain [~150]
#   attnop      stop 55 (journal "Stop 55: attnop"): issue 38's torch op against the kernel alone at D 128 (RESULTS.md: op
#               0.92-0.98x the kernel on 9 of 12 rows; the same plan, one launch a call, on the CPU): attention_sm90.py
#               --head-dims 128 --seqs 2048,4096 --torch-op, 4 rounds in alternating order (odd rounds reversed: the
#               kernel alone then follows the op, not FA2), each round's op / kernel in the table; then 2 rounds in
#               attnfit's order with each graph replayed 300 ms untimed first (--settle-ms 300) [~120]
#   pagedrule   stop 55 (journal "Stop 55: pagedrule"): the balanced partition by rule (kernels/sm80/paged_decode_rule.py,
#               WEIGH_BALANCE: the estimate over stand-in batches of the hint): tests/gpu/test_paged_attention_gpu.py -k
#               balanced (the kernels the rule takes) and the op's PDL toggled between calls (test_paged_pdl_gpu.py -k
#               toggling: its cache keys the plan's flags), then paged_decode.py bf16 / fp8, batch 8 / 32, means 2k / 8k / 16k,
#               GQA 32/8, FlashInfer (carried: .sm90tree/flashinfer, carry it) beside; ours the model's /
#               balance=true:split_major=true / the rule's choice ("rule") [~150]
#   stagedc     stop 55 (journal "Stop 55: stagedc"): the residual staged by the producer in the chunk buffers
#               (residual_read="chunks", gemm_chunkres): tests/kernels/sm90/test_sm90_residual_chunks.py on the card, then
#               sm90_power.py --epilogue --set stagedc: chunkepi's rows and the chunks row (tma/64 s4) [~150]
#   edges       stop 55 (journal "Stop 55: edges"): the torch ops at a serving stack's edges on the card: empty
#               attention / paged calls captured in a CUDA graph at their first call, fp8 gemm with per-tensor scales
#               against torch._scaled_mm (tests/runtime/test_torch_edges.py), beside the rowwise ones (test_torch_fp8.py);
#               serving2's (journal "Stop 55: serving2"): paged_attention's one-element / float scales against [Hkv] ones
#               and replayed in a CUDA graph, gemm of [B, S, K] against F.linear (test_torch_serving.py); bshd's (journal
#               "Stop 55: bshd"): the sm90 attention on [B, S, H, D] storage within the bound and the op on
#               transpose(1, 2) views against SDPA, in a CUDA graph (tests/gpu/test_sm90_attention_bshd_gpu.py) [~150]
#   chunkab     stop 56: the one-barrier chunk loop (stop 54) against the tree of stop 53 in one run (CHUNK_BASE_PKG,
#               default .sm90tree/chunkbase: `git archive bbd13d5 tvm_cdna4 | tar -x -C .sm90tree/chunkbase`, carried),
#               each tree its own build cache: grouped prefill (torch_grouped_sm90.py, 2048 / 8192 tokens) in the order
#               now / base / now / base, then sm90_power.py --epilogue --set chunks with each [~400]
#   pagedmerge  stop 56 (journal "Stop 56: pagedmerge"): the paged decode's merge by the refitted model (WEIGH_LAST_CTA on,
#               paged_decode_plan.merge_seconds): the default against both merges forced (merge=kernel, merge=last-cta)
#               at batch 8 / 32 / 64 x 2k / 8k, bf16 and fp8, then batch 8 / 3k (balanced) bf16, fp8 and 4 queries,
#               beside FlashInfer (batch 64, 4 queries and the balanced 3k rows are the model's extrapolation); carry
#               .sm90tree/flashinfer [~150]
#   pagedfix    stop 56 (journal "Stop 56: pagedfix"): the balanced-partition rule weighing each plan with its merge
#               (paged_decode_estimate.merge_term) moved batch-16 rows: the default against the plan before
#               (balance=false) at batch 16 x 512 / 2k / 8k, bf16 and fp8, GQA 32/8 and 64/8, ours only [~140]
#   bshd80      stop 56 (journal "Stop 56: bshd80"): the sm80-class attention on [B, S, H, D] storage (layout bshd), the
#               sm80 target forced on the card: its GPU tests (validated cases, the op on transposed views against SDPA,
#               equal to the op on copies, a CUDA graph), then the CLI's --validate --bench of bshd and bhsd at 1 x 16/4
#               heads x 2048 causal D 128 (the float64 reference bounds the size) [~90]
if [ -f .sm90tree/sitepack/site.tar.xz ]; then  # benchmarks/pack_site.sh: the wheels installed and packed (33 of 49 MB)
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .sm90tree/sitepack/site.tar.xz
else
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl 2>/dev/null
fi
# older package trees packed as one tarball (.sm90tree/oldtrees/trees.tar.xz: attnsasspkg/, basepkg/, ...), if carried
[ -f .sm90tree/oldtrees/trees.tar.xz ] && tar -C .sm90tree -xJf .sm90tree/oldtrees/trees.tar.xz
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
[ -n "$NO_GPU_TESTS" ] && gpu_tests() { echo "GPU tests skipped (NO_GPU_TESTS=1): $2"; }  # benchmarks check each kernel first
carried_flashinfer() {  # FI: the carried FlashInfer (.sm90tree/flashinfer, carry it), probed once into $OUT
  FI=${FLASHINFER_CARRIED:-.sm90tree/flashinfer}
  export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/flashinfer}
  timeout 15 python3 benchmarks/flashinfer_carry.py --probe "$FI" > "$OUT/flashinfer_probe.log" 2>&1 \
    || echo "the carried FlashInfer did not load (flashinfer_probe.log): its cells say so"
}
ncu_case() {  # $1 case of benchmarks/ncu_cases.py: the details and source pages as text
  local rep=/tmp/ncu_$1
  timeout 120 ncu --profile-from-start off --clock-control none --set full --import-source yes -f -o "$rep" \
    python3 benchmarks/ncu_cases.py "$1" > "$OUT/ncu_$1.log" 2>&1
  ncu -i "$rep.ncu-rep" --page details > "$OUT/ncu_$1_details.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_$1_source.csv" 2>&1
  grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|L2 Hit Rate" \
    "$OUT/ncu_$1_details.txt" | head -24
}
for step in "$@"; do
  case $step in
  peers)
    mkdir -p "$OUT/peers"
    timeout 120 python3 benchmarks/peer_kernels.py --out "$OUT/peers" > "$OUT/peers.log" 2>&1
    cut -c1-260 "$OUT/peers.log" | grep -v "^$" | awk -F'\t' '{print $1 "\t" $2 "\t" substr($3,1,150)}' | head -400 ;;
  peers-mid)  # stop 50: what cuBLAS runs between the benchmark's M (257..512 is our worst: 0.79x at 300) [~60]
    mkdir -p "$OUT/peers_mid"
    timeout 100 python3 benchmarks/peer_kernels.py --only gemm --ms ${PEERS_MS:-300,400,600,1200,1700} \
      --out "$OUT/peers_mid" > "$OUT/peers_mid.log" 2>&1
    cut -c1-260 "$OUT/peers_mid.log" | grep -v "^$" | head -120 ;;
  partitions)
    mkdir -p "$OUT/part"
    timeout 90 python3 benchmarks/paged_decode.py --sets bf16,fp8 --batches 8 --means 2048 --gqa 32/8,64/8 --no-peers \
      --partitions 128,192,256,384,512 --merge last-cta,kernel --out "$OUT/part" 2>&1 | tee "$OUT/paged_partitions.log" \
      | grep -v "^{" | tail -40 ;;
  ncu)
    ncu_case gemm-m200-qkv
    ncu_case gemm-residual ;;
  ncu-cluster)  # where the clustered mainloop waits, beside the unclustered one (docs/sm90_gemm.md "Clusters") [~120]
    ncu_case gemm-cluster-c1
    ncu_case gemm-cluster-c2
    grep -iE "stall|membar" "$OUT/ncu_gemm-cluster-c2_details.txt" | head -12 ;;
  ncu-attention)  # the 2k-token shapes where the sm90 attention is 0.83-0.93x cuDNN (8 x 2k, hidden 2048) [~120]
    ncu_case attn-d128
    ncu_case attn-d64-causal ;;
  validate)  # the helpers' work of the stop: its GPU tests, the wave-width sweep, the wide fp8 paged tiles [~330]
    gpu_tests 150 "$OUT/pytest_gpu_validate.log" -n 8 tests/gpu/test_sm90_wave_widths_gpu.py \
      tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_paged_attention_gpu.py
    mkdir -p "$OUT/waves_small" "$OUT/waves_large" "$OUT/wide"
    timeout 120 python3 benchmarks/sm90_sweep.py --waves --ms 96,200 --out "$OUT/waves_small" 2>&1 \
      | tee "$OUT/waves_small.log" | grep -v "^{" | tail -30
    timeout 90 python3 benchmarks/sm90_sweep.py --waves --ms 768,3000 --out "$OUT/waves_large" 2>&1 \
      | tee "$OUT/waves_large.log" | grep -v "^{" | tail -30
    timeout 90 python3 benchmarks/paged_decode.py --sets bf16,fp8 --batches 8,64 --means 2048,8192 --no-peers \
      --configs tile_keys=16,tile_keys=32:stages=2 --out "$OUT/wide" 2>&1 | tee "$OUT/paged_wide.log" | grep -v "^{" | tail -16 ;;
  gemm-ab)  # the torch op's GEMM at every M, then at M = 32, 96, 200 with the package before the refit (OLD_PKG, default
            # .sm90tree/oldpkg: `git archive <commit> tvm_cdna4 | tar -x -C .sm90tree/oldpkg`, carried) [~330]
    mkdir -p "$OUT/gemm" "$OUT/old"
    timeout 230 python3 benchmarks/torch_gemm.py --calls 30 --reps 10 --out "$OUT/gemm" 2>&1 \
      | tee "$OUT/torch_gemm.log" | grep -v "^{" | tail -12
    PYTHONPATH=$PWD/${OLD_PKG:-.sm90tree/oldpkg}:/tmp/site timeout 120 python3 benchmarks/torch_gemm.py --ms 32,96,200 \
      --calls 30 --reps 10 --out "$OUT/old" 2>&1 | tee "$OUT/torch_gemm_old.log" | grep -v "^{" | tail -6 ;;
  refit)  # main against the refit of branch h-refit at the M it moves (17-32 buckets) and at M = 200 [~120]
    mkdir -p "$OUT/refit_main" "$OUT/refit"
    timeout 60 python3 benchmarks/torch_gemm.py --ms 20,32,200 --calls 30 --reps 10 --out "$OUT/refit_main" 2>&1 \
      | tee "$OUT/torch_gemm_refit_main.log" | grep -v "^{" | tail -5
    PYTHONPATH=$PWD/${REFIT_PKG:-.sm90tree/refitpkg}:/tmp/site timeout 60 python3 benchmarks/torch_gemm.py --ms 20,32,200 \
      --calls 30 --reps 10 --out "$OUT/refit" 2>&1 | tee "$OUT/torch_gemm_refit.log" | grep -v "^{" | tail -5 ;;
  cluster)  # thread-block clusters with B multicast: exact on the card first, then timed [~200]
    gpu_tests 90 "$OUT/pytest_gpu_cluster.log" -n 8 tests/gpu/test_sm90_cluster_gpu.py
    mkdir -p "$OUT/clusters"
    timeout 150 python3 benchmarks/sm90_clusters.py --ms ${CLUSTER_MS:-768,3000} --out "$OUT/clusters" 2>&1 \
      | tee "$OUT/clusters.log" | grep -v "^{" | tail -40 ;;
  residual)  # the residual's bytes spread over the mainloop instead of one burst a tile [~130]
    gpu_tests 60 "$OUT/pytest_gpu_residual.log" -n 4 tests/gpu/test_sm90_residual_spread_gpu.py
    timeout 100 python3 benchmarks/sm90_gemm.py --epilogue --out "$OUT" 2>&1 | tee "$OUT/epilogue.log" | grep -v "^{" | tail -30 ;;
  order)  # the tile orders: exact on the card, then timed beside their modelled DRAM bytes [~200]
    gpu_tests 50 "$OUT/pytest_gpu_order.log" -n 6 tests/gpu/test_sm90_order_gpu.py
    mkdir -p "$OUT/order"
    timeout 150 python3 benchmarks/sm90_order.py --ms ${ORDER_MS:-3000} --out "$OUT/order" 2>&1 \
      | tee "$OUT/order.log" | grep -v "^{" | grep -v "^residency" | tail -60 ;;
  cli-options)  # the sm90 config fields given on the command line: validated and timed on the card [~90]
    gpu_tests 80 "$OUT/pytest_gpu_cli_options.log" -n 4 tests/gpu/test_sm90_cli_options_gpu.py ;;
  attn-options)  # a persistent CTA's items overlapped: exact on the card, then beside the default and cuDNN at 2k / 4k [~160]
    gpu_tests 60 "$OUT/pytest_gpu_attention.log" -n 6 "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[10]" \
      "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[11]" \
      "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[21]" \
      "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[22]" \
      "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[23]" \
      "tests/gpu/test_sm90_attention_gpu.py::test_exact_within_the_documented_bound[24]"
    mkdir -p "$OUT/attn_options"
    timeout 120 python3 benchmarks/attention_sm90.py --out "$OUT/attn_options" --seqs 2048,4096 --configs options \
      --options tma-buffer --no-sm80 2>&1 | tee "$OUT/attention_options.log" | grep -v "^{" | tail -44 ;;
  grouped-walks)  # every row tile with rows shared evenly over the CTAs, not the gaps walk's round robin [~150]
    gpu_tests 60 "$OUT/pytest_gpu_grouped.log" -n 4 tests/kernels/sm90/test_sm90_grouped.py -k "hopper_gpu or torch"
    mkdir -p "$OUT/walks"
    timeout 150 python3 benchmarks/grouped_sm90_sweep.py --walks --calls 10 --reps 10 --out "$OUT/walks" 2>&1 \
      | tee "$OUT/grouped_walks.log" | grep -v "^{" | tail -40 ;;
  grouped-op)  # the grouped torch op at today's choices, then the buckets whose choice moved untimed [~300]
    mkdir -p "$OUT/grouped" "$OUT/gsweep_q" "$OUT/gsweep_m"
    timeout 110 python3 benchmarks/torch_grouped_sm90.py --calls 15 --reps 12 --out "$OUT/grouped" 2>&1 \
      | tee "$OUT/torch_grouped.log" | grep -v "^{" | tail -10
    timeout 90 python3 benchmarks/grouped_sm90_sweep.py --models qwen3-30b-a3b --tokens 384,768,1600 --top 2 \
      --calls 10 --reps 10 --out "$OUT/gsweep_q" 2>&1 | tee "$OUT/gsweep_q.log" | grep -v "^{" | tail -12
    timeout 90 python3 benchmarks/grouped_sm90_sweep.py --models mixtral-8x7b --tokens 96,192,400,800 --top 2 \
      --calls 10 --reps 10 --out "$OUT/gsweep_m" 2>&1 | tee "$OUT/gsweep_m.log" | grep -v "^{" | tail -12 ;;
  paged-fi8)  # the carried FlashInfer (.sm90tree/flashinfer, carried too) beside ours at batch 8 [~150]
    FI_BATCHES=8 FI_S=140 bash benchmarks/gpu_flashinfer.sh 2>&1 | tail -30 ;;
  final)  # the torch ops at the stop's plans: GEMM at every M, fp8, grouped (+ its peer's kernels), D 64 attention [~480]
    mkdir -p "$OUT/gemm" "$OUT/fp8" "$OUT/grouped" "$OUT/peers" "$OUT/d64"
    timeout 210 python3 benchmarks/torch_gemm.py --calls 30 --reps 10 --out "$OUT/gemm" 2>&1 \
      | tee "$OUT/torch_gemm.log" | grep -v "^{" | tail -12
    timeout 70 python3 benchmarks/torch_fp8_gemm.py --out "$OUT/fp8" 2>&1 | tee "$OUT/torch_fp8.log" | grep -v "^{" | tail -8
    timeout 100 python3 benchmarks/torch_grouped_sm90.py --calls 15 --reps 12 --out "$OUT/grouped" 2>&1 \
      | tee "$OUT/torch_grouped.log" | grep -v "^{" | tail -8
    timeout 40 python3 benchmarks/peer_kernels.py --only grouped --out "$OUT/peers" > "$OUT/peers_grouped.log" 2>&1
    cut -f1,3 "$OUT/peers_grouped.log" | grep -v Warn | cut -c1-220 | head -12
    timeout 90 python3 benchmarks/attention_sm90.py --head-dims 64 --seqs 8192,16384,32768 --no-sm80 --out "$OUT/d64" 2>&1 \
      | tee "$OUT/attention_d64.log" | grep -v "^{" | tail -14 ;;
  gemm)
    gpu_tests 100 "$OUT/pytest_gpu_gemm.log" -n 8 tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py
    mkdir -p "$OUT/gemm"
    timeout 200 python3 benchmarks/torch_gemm.py --calls 30 --reps 10 --out "$OUT/gemm" 2>&1 \
      | tee "$OUT/torch_gemm.log" | tail -14 ;;
  attention)
    mkdir -p "$OUT/full"
    timeout 300 python3 benchmarks/attention_sm90.py --no-sm80 --out "$OUT/full" 2>&1 | tee "$OUT/attention_full.log" \
      | grep -v "^{" | tail -46 ;;
  swapdyn)  # the swapped buckets over several tiles of M: exact on the card, then the A/B through the torch op [~360]
    gpu_tests 100 "$OUT/pytest_gpu_swapdyn.log" -n 8 tests/gpu/test_sm90_swap_tiles_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py
    mkdir -p "$OUT/swapdyn"
    timeout 260 python3 benchmarks/torch_gemm.py --ms ${SWAPDYN_MS:-32,96,200} --swap-dynamic off,on --calls 30 --reps 10 \
      --out "$OUT/swapdyn" 2>&1 | tee "$OUT/torch_gemm_swapdyn.log" | grep -v "^{" | tail -22 ;;
  swapstore)  # the swapped C^T store in column pairs: exact on the card, the A/B through the torch op, the static swap at
    # M = 200 (its store changed too), then where the swapped bucket plan still loses (ncu: stalls, L2 / DRAM bytes) [~420]
    gpu_tests 120 "$OUT/pytest_gpu_swapstore.log" -n 8 tests/gpu/test_sm90_swap_ab_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py \
      tests/gpu/test_sm90_swap_tiles_gpu.py
    mkdir -p "$OUT/swapstore" "$OUT/swapstatic"
    timeout 200 python3 benchmarks/torch_gemm.py --ms ${SWAPSTORE_MS:-96,200} --swap-dynamic off,on --calls 30 --reps 10 \
      --out "$OUT/swapstore" 2>&1 | tee "$OUT/torch_gemm_swapstore.log" | grep -v "^{" | tail -22
    timeout 120 python3 benchmarks/sm90_sweep.py --out "$OUT/swapstatic" --swap-ab --swap-top 1 --ms 200 2>&1 \
      | tee "$OUT/sm90_swap_static.log" | grep -v "^{" | tail -16
    ncu_case gemm-m200-qkv
    ncu_case gemm-m200-qkv-swapped ;;
  stop47)  # the three untimed levers of stop 47 in one call, benchmarks only (each checks every kernel first) [~450]
    mkdir -p "$OUT/clusters" "$OUT/order" "$OUT/swapdyn"
    timeout 130 python3 benchmarks/sm90_clusters.py --ms ${CLUSTER_MS:-3000} --out "$OUT/clusters" 2>&1 \
      | tee "$OUT/clusters.log" | grep -v "^{" | tail -24
    timeout 150 python3 benchmarks/sm90_order.py --ms ${ORDER_MS:-3000} --out "$OUT/order" 2>&1 \
      | tee "$OUT/order.log" | grep -v "^{" | tail -30
    timeout 200 python3 benchmarks/torch_gemm.py --ms ${SWAPDYN_MS:-96,200} --swap-dynamic off,on --calls 30 --reps 10 \
      --out "$OUT/swapdyn" 2>&1 | tee "$OUT/torch_gemm_swapdyn.log" | grep -v "^{" | tail -22 ;;
  stop47b)  # the attention options at 2k / 4k, the grouped and the fp8 torch ops at today's plans, benchmarks only [~300]
    mkdir -p "$OUT/attn_options" "$OUT/grouped" "$OUT/fp8"
    timeout 120 python3 benchmarks/attention_sm90.py --out "$OUT/attn_options" --seqs 2048,4096 --configs options \
      --options tma-buffer --no-sm80 2>&1 | tee "$OUT/attention_options.log" | grep -v "^{" | tail -44
    timeout 110 python3 benchmarks/torch_grouped_sm90.py --calls 15 --reps 12 --out "$OUT/grouped" 2>&1 \
      | tee "$OUT/torch_grouped.log" | grep -v "^{" | tail -10
    timeout 70 python3 benchmarks/torch_fp8_gemm.py --out "$OUT/fp8" 2>&1 | tee "$OUT/torch_fp8.log" | grep -v "^{" | tail -8 ;;
  attnsass)  # the consumer's per-tile SASS cut (journal, stop 48 attnsass): exact on the card, then this tree and the
    # package before it in one call (SDPA's cuDNN beside each; carry BASE_PKG, made with
    # `mkdir -p .sm90tree/basepkg && git archive 325368f tvm_cdna4 | tar -x -C .sm90tree/basepkg`) [~260]
    gpu_tests 90 "$OUT/pytest_gpu_attnsass.log" -n 6 tests/gpu/test_sm90_attention_gpu.py
    mkdir -p "$OUT/attnsass" "$OUT/attnsass_main"
    timeout 120 python3 benchmarks/attention_sm90.py --no-sm80 --seqs 2048,4096 --out "$OUT/attnsass" 2>&1 \
      | tee "$OUT/attention_attnsass.log" | grep -v "^{" | tail -24
    PYTHONPATH=$PWD/${BASE_PKG:-.sm90tree/basepkg}:/tmp/site timeout 120 python3 benchmarks/attention_sm90.py --no-sm80 \
      --seqs 2048,4096 --out "$OUT/attnsass_main" 2>&1 | tee "$OUT/attention_attnsass_main.log" | grep -v "^{" | tail -24 ;;
  attnring)  # the ring's counters (journal, stop 48 attnring): exact on the card, then this tree, the tree before it
    # (15059eb, RING_BASE_PKG) and the tree before attnsass (325368f, BASE_PKG) in one call, SDPA's cuDNN beside each;
    # carry both, made with `mkdir -p .sm90tree/attnsasspkg && git archive 15059eb tvm_cdna4 | tar -x -C
    # .sm90tree/attnsasspkg` (and attnsass's for BASE_PKG) [~430]
    gpu_tests 90 "$OUT/pytest_gpu_attnring.log" -n 6 tests/gpu/test_sm90_attention_gpu.py
    for tree in attnring:. attnsass:${RING_BASE_PKG:-.sm90tree/attnsasspkg} base:${BASE_PKG:-.sm90tree/basepkg}; do
      name=${tree%%:*}; mkdir -p "$OUT/ring_$name"
      PYTHONPATH=$PWD/${tree#*:}:/tmp/site timeout 110 python3 benchmarks/attention_sm90.py --no-sm80 --seqs 2048,4096 \
        --out "$OUT/ring_$name" 2>&1 | tee "$OUT/attention_ring_$name.log" | grep -v "^{" | tail -24
    done ;;
  m200)  # issue 36's M = 200 / 96 rows: the planned DeviceSpec, the split epilogue's A/B, cuBLAS's tiles in ours [~290]
    python3 -c "import ctypes.util; from tvm_cdna4.kernels import devices as d; \
print('find_library:', ctypes.util.find_library('cuda')); print('driver:', d._driver_attributes()); \
print('planned:', d.planned('sm80'))" 2>&1 | tee "$OUT/m200_device.txt"
    mkdir -p "$OUT/m200" "$OUT/m200_peers" "$OUT/m96_peers"
    timeout 150 python3 benchmarks/torch_gemm.py --ms ${M200_MS:-400,1200} --split-epilogue off,on --calls 30 --reps 10 \
      --out "$OUT/m200" 2>&1 | tee "$OUT/torch_gemm_m200.log" | grep -v "^{" | tail -22
    timeout 90 python3 benchmarks/sm90_sweep.py --peers --ms 200 --projs qkv,o,down --out "$OUT/m200_peers" 2>&1 \
      | tee "$OUT/sm90_peers.log" | grep -v "^{" | tail -36
    timeout 50 python3 benchmarks/sm90_sweep.py --peers --ms 96 --projs o --out "$OUT/m96_peers" 2>&1 \
      | tee "$OUT/sm90_peers_m96.log" | grep -v "^{" | tail -16 ;;
  moedecode)  # Mixtral's grouped decode rows at 32 / 64 tokens, two draws (seed 0 splits the 42-row expert across two
    # sweeps of 8 row tiles, seed 1 none); stop 48's one-sweep plan was timed here and reverted (journal) [~150]
    mkdir -p "$OUT/moedecode" "$OUT/moedecode_seed1"
    timeout 140 python3 benchmarks/torch_grouped_sm90.py --models mixtral-8x7b --tokens 32,64 --calls 15 --reps 12 \
      --out "$OUT/moedecode" 2>&1 | tee "$OUT/moedecode.log" | grep -v "^{" | tail -10
    timeout 100 python3 benchmarks/torch_grouped_sm90.py --models mixtral-8x7b --tokens 64 --seed 1 --calls 15 --reps 12 \
      --out "$OUT/moedecode_seed1" 2>&1 | tee "$OUT/moedecode_seed1.log" | grep -v "^{" | tail -8 ;;
  epires)  # the residual's reads out of the epilogue's critical path (preread, pairs); the peer's residual cost [~230]
    gpu_tests 90 "$OUT/pytest_gpu_epires.log" -n 8 tests/gpu/test_sm90_residual_preread_gpu.py \
      tests/gpu/test_sm90_residual_pairs_gpu.py tests/gpu/test_sm90_residual_spread_gpu.py
    timeout 150 python3 benchmarks/sm90_gemm.py --epilogue --out "$OUT" 2>&1 | tee "$OUT/epilogue.log" | grep -v "^{" | tail -45 ;;
  epires-ncu)  # where the residual's time goes: the three kernels' source-level stall samples [~200]
    for c in gemm-plain gemm-residual gemm-residual-preread; do ncu_case $c; done ;;
  swaporder)  # the swapped bucket plans' walk (adjacent CTAs vs group_m apart); since stop 50 (one token tile, swap to 128) it moves no plan: historical [~260]
    gpu_tests 80 "$OUT/pytest_gpu_swaporder.log" -n 8 tests/gpu/test_sm90_swap_tiles_gpu.py
    python3 -c "from tvm_cdna4.kernels import devices as d; print('planned:', d.planned('sm80'))" 2>&1 \
      | tee "$OUT/device_planned.txt"
    mkdir -p "$OUT/swaporder"
    timeout 170 python3 benchmarks/torch_gemm.py --ms ${SWAPORDER_MS:-96,200} --projs qkv,o,down --swap-dynamic on \
      --swap-order off,on --calls 30 --reps 10 --out "$OUT/swaporder" 2>&1 | tee "$OUT/torch_gemm_swaporder.log" \
      | grep -v "^{" | tail -22 ;;
  swaporder-ncu)  # the swapped 64x128 o plan's two walks: DRAM, L2 hits and partition crossings [~150]
    for c in gemm-m200-o-swapped-m gemm-m200-o-swapped-n; do
      timeout 90 ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,\
lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex.sum,launch__grid_size \
        python3 benchmarks/ncu_cases.py "$c" > "$OUT/ncu_metrics_$c.txt" 2>&1
      echo "== $c"; grep -E "gpu__time|dram__bytes|hit_rate|ltcfabric|srcunit_tex|grid_size" "$OUT/ncu_metrics_$c.txt" | tail -6
    done ;;
  stop49b)  # stop49 without the tree before attnsass: this tree's attention at 2k / 4k beside cuDNN, attn3wg's
    # consumers, the torch op at M = 96 / 200 with the present card's plans [~350]
    python3 -c "from tvm_cdna4.kernels import devices as d; print('planned:', d.planned('sm80'))" 2>&1 \
      | tee "$OUT/device_planned.txt"
    mkdir -p "$OUT/attention" "$OUT/attn3wg" "$OUT/m200"
    timeout 110 python3 benchmarks/attention_sm90.py --no-sm80 --seqs 2048,4096 --out "$OUT/attention" 2>&1 \
      | tee "$OUT/attention.log" | grep -v "^{" | tail -20
    timeout 120 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 64 --seqs 2048,4096 --configs consumers \
      --out "$OUT/attn3wg" 2>&1 | tee "$OUT/attention_3wg.log" | grep -v "^{" | tail -30
    timeout 110 python3 benchmarks/torch_gemm.py --ms 96,200 --calls 30 --reps 10 \
      --out "$OUT/m200" 2>&1 | tee "$OUT/torch_gemm_m200.log" | grep -v "^{" | tail -16 ;;
  stop49)  # attnring's two ends, attn3wg's consumers, the torch op at M = 96 / 200 with the H100's plans [~470]
    python3 -c "import ctypes.util; from tvm_cdna4.kernels import devices as d; \
print('find_library:', ctypes.util.find_library('cuda')); print('driver:', d._driver_attributes()); \
print('planned:', d.planned('sm80'))" 2>&1 | tee "$OUT/m200_device.txt"
    for tree in attnring:. base:${BASE_PKG:-.sm90tree/basepkg}; do
      name=${tree%%:*}; mkdir -p "$OUT/ring_$name"
      PYTHONPATH=$PWD/${tree#*:}:/tmp/site timeout 110 python3 benchmarks/attention_sm90.py --no-sm80 --seqs 2048,4096 \
        --out "$OUT/ring_$name" 2>&1 | tee "$OUT/attention_ring_$name.log" | grep -v "^{" | tail -20
    done
    mkdir -p "$OUT/attn3wg" "$OUT/m200"
    timeout 120 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 64 --seqs 2048,4096 --configs consumers \
      --out "$OUT/attn3wg" 2>&1 | tee "$OUT/attention_3wg.log" | grep -v "^{" | tail -30
    timeout 110 python3 benchmarks/torch_gemm.py --ms 96,200 --calls 30 --reps 10 \
      --out "$OUT/m200" 2>&1 | tee "$OUT/torch_gemm_m200.log" | grep -v "^{" | tail -16 ;;
  attn3wg)  # three consumer warpgroups at D 64: exact on the card, then 2 / 3 consumers beside cuDNN [~280]
    gpu_tests 100 "$OUT/pytest_gpu_attn3wg.log" -n 8 tests/gpu/test_sm90_attention_3wg_gpu.py
    mkdir -p "$OUT/attn3wg"
    timeout 175 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 64 --seqs 2048,4096,16384 \
      --configs consumers --out "$OUT/attn3wg" 2>&1 | tee "$OUT/attention_3wg.log" | grep -v "^{" | tail -36 ;;
  decode32)  # the decode kernel at 17..32 tokens: exact on the card, then the 17..32 bucket's A/B through the torch op [~200]
    gpu_tests 50 "$OUT/pytest_gpu_decode32.log" -n 8 tests/gpu/test_decode32_gpu.py
    mkdir -p "$OUT/decode32"
    timeout 150 python3 benchmarks/torch_gemm.py --ms ${DECODE32_MS:-12,16,17,20,24,27,32} --wide-decode off,on --calls 20 \
      --reps 8 --out "$OUT/decode32" 2>&1 | tee "$OUT/torch_gemm_decode32.log" | grep -v "^{" | tail -30 ;;
  refine)  # the buckets cut where one plan loses > REGRET_MAX (gemm_dynamic.refined) at M between the old buckets' tops [~200]
    mkdir -p "$OUT/refine"
    timeout 200 python3 benchmarks/torch_gemm.py --ms ${REFINE_MS:-600,1200,1400,2200,2500} --refine-buckets off,on \
      --calls 20 --reps 8 --out "$OUT/refine" 2>&1 | tee "$OUT/torch_gemm_refine.log" | grep -v "^{" | tail -24 ;;
  swapone)  # swapped buckets of one token tile (SWAP_M_TILES 1) on / off at M of every small bucket [~180]
    mkdir -p "$OUT/swapone"
    timeout 180 python3 benchmarks/torch_gemm.py --ms ${SWAPONE_MS:-20,48,80,112,160,240} --swap-dynamic off,on \
      --calls 20 --reps 8 --out "$OUT/swapone" 2>&1 | tee "$OUT/torch_gemm_swapone.log" | grep -v "^{" | tail -24 ;;
  swapcluster)  # the weights multicast to two token tiles in the swapped kernel: exact on the card, then c1 / c2 [~235]
    gpu_tests 55 "$OUT/pytest_gpu_swapcluster.log" -n 8 tests/gpu/test_sm90_swap_cluster_gpu.py
    mkdir -p "$OUT/swapcluster_m200" "$OUT/swapcluster_m96"
    timeout 95 python3 benchmarks/sm90_sweep.py --swap-clusters --ms 200,240 --workers 16 \
      --out "$OUT/swapcluster_m200" 2>&1 | tee "$OUT/sm90_swap_clusters_m200.log" | grep -v "^{" | grep -v "built" | tail -50
    timeout 80 python3 benchmarks/sm90_sweep.py --swap-clusters --ms 96,144 --workers 16 \
      --out "$OUT/swapcluster_m96" 2>&1 | tee "$OUT/sm90_swap_clusters_m96.log" | grep -v "^{" | grep -v "built" | tail -40 ;;
  attnfit)  # stop 50: the torch op at the fitted defaults beside cuDNN / FA2, D 64 and 128 at 2k / 4k / 16k [~200]
    gpu_tests 40 "$OUT/pytest_gpu_attnfit.log" tests/gpu/test_sm90_attention_3wg_gpu.py -k torch_ops_default
    mkdir -p "$OUT/attnfit"
    timeout 160 python3 benchmarks/attention_sm90.py --no-sm80 --seqs 2048,4096,16384 --torch-op --out "$OUT/attnfit" \
      2>&1 | tee "$OUT/attention_attnfit.log" | grep -v "^{" | tail -60 ;;
  attnfit-long)  # D 64 at 8k / 32k tokens: 2 / 3 consumers beside cuDNN (the model's three untimed there) [~130]
    mkdir -p "$OUT/attnfit_long"
    timeout 130 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 64 --seqs 8192,32768 --configs consumers \
      --out "$OUT/attnfit_long" 2>&1 | tee "$OUT/attention_attnfit_long.log" | grep -v "^{" | tail -30 ;;
  attnitem)  # stop 50: item_overlap exact on the card, then off / on at D 128 and 64, 2k / 4k, beside cuDNN [~200]
    gpu_tests 75 "$OUT/pytest_gpu_attnitem.log" -n 8 tests/gpu/test_sm90_attention_item_overlap_gpu.py
    mkdir -p "$OUT/attnitem"
    timeout 120 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128,64 --seqs 2048,4096 --configs options \
      --options item-overlap --out "$OUT/attnitem" 2>&1 | tee "$OUT/attention_attnitem.log" | grep -v "^{" | tail -40 ;;
  attnzigzag)  # stop 50: the persistent walks exact on the card, then grid / round robin / zigzag / fold, causal [~190]
    gpu_tests 130 "$OUT/pytest_gpu_attnzigzag.log" -n 8 tests/gpu/test_sm90_attention_walk_gpu.py
    mkdir -p "$OUT/attnzigzag"
    timeout 115 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128,64 --seqs 2048,4096 --causal-only \
      --configs options --options zigzag,fold --out "$OUT/attnzigzag" 2>&1 | tee "$OUT/attention_attnzigzag.log" \
      | grep -v "^{" | tail -40 ;;
  fa3tile)  # stop 52: FA3's 176-key tile (2 stages, split K / V barriers or not) beside the default and cuDNN, D 128 [~150]
    mkdir -p "$OUT/fa3tile"
    timeout 140 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128 --seqs 2048,4096 --configs options \
      --options 176-keys,176-keys+split-kv --out "$OUT/fa3tile" 2>&1 | tee "$OUT/attention_fa3tile.log" \
      | grep -v "^{" | tail -40 ;;
  attnop)  # stop 55: the torch op against the kernel alone, D 128, 2k / 4k: alternating order, then settled [~120]
    mkdir -p "$OUT/attnop" "$OUT/attnop_settle"
    timeout 80 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128 --seqs 2048,4096 --torch-op --rounds 4 \
      --order alternate --out "$OUT/attnop" 2>&1 | tee "$OUT/attention_attnop.log" | grep -v "^{" | tail -13
    timeout 70 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128 --seqs 2048,4096 --torch-op --rounds 2 \
      --settle-ms 300 --out "$OUT/attnop_settle" 2>&1 | tee "$OUT/attention_attnop_settle.log" | grep -v "^{" | tail -10 ;;
  attnlat)  # stop 52: the P V wait after the 8th / 16th exp (exps_before_pv_wait) beside the default and cuDNN, D 128 [~150]
    mkdir -p "$OUT/attnlat"
    timeout 140 python3 benchmarks/attention_sm90.py --no-sm80 --head-dims 128 --seqs 2048,4096 --configs options \
      --options pv-wait-8,pv-wait-16 --out "$OUT/attnlat" 2>&1 | tee "$OUT/attention_attnlat.log" \
      | grep -v "^{" | tail -40 ;;
  splitwave)  # a K split of no more units than SMs (gemm_cost.SPLIT_IN_ONE_WAVE) on / off, the down projections [~90]
    mkdir -p "$OUT/splitwave"
    timeout 120 python3 benchmarks/torch_gemm.py --ms ${SPLITWAVE_MS:-20,32,48} --projs down --split-one-wave off,on \
      --calls 20 --reps 8 --out "$OUT/splitwave" 2>&1 | tee "$OUT/torch_gemm_splitwave.log" | grep -v "^{" | tail -16 ;;
  walktests)  # stop 51: the walks' GPU tests alone (the attnzigzag call of 10:25 cut them at 70 s, 12 of 15 passed) [~110]
    gpu_tests 130 "$OUT/pytest_gpu_walks.log" -n 8 tests/gpu/test_sm90_attention_walk_gpu.py ;;
  finecut)  # stop 51: the bucket 257..384 cut at 64-row multiples (gemm_dynamic.FINE_CUTS) off / on [~120]
    mkdir -p "$OUT/finecut"
    timeout 160 python3 benchmarks/torch_gemm.py --ms ${FINECUT_MS:-260,288,300,320} --fine-cuts off,on --calls 20 \
      --reps 8 --out "$OUT/finecut" 2>&1 | tee "$OUT/torch_gemm_finecut.log" | grep -v "^{" | tail -24 ;;
  trim)  # stop 51: loads past M / N trimmed (Sm90Config.trim_loads, one box of trim_boxes): exact on the card, then off / on [~260]
    gpu_tests 150 "$OUT/pytest_gpu_trim.log" -n 8 tests/gpu/test_sm90_trim_loads_gpu.py
    mkdir -p "$OUT/trim"
    timeout 200 python3 benchmarks/torch_gemm.py --ms ${TRIM_MS:-96,200,260,300,333,600,1200,3000} --trim-loads off,on \
      --calls 20 --reps 8 --out "$OUT/trim" 2>&1 | tee "$OUT/torch_gemm_trim.log" | grep -v "^{" | tail -30 ;;
  zerofill)  # stop 51: the cost model weighs TMA's zero fill of a partial tile (gemm_cost.WEIGH_ZERO_FILL) off / on [~200]
    mkdir -p "$OUT/zerofill"
    timeout 230 python3 benchmarks/torch_gemm.py --ms ${ZEROFILL_MS:-200,260,300,450,600,1200} --zero-fill off,on \
      --calls 20 --reps 8 --out "$OUT/zerofill" 2>&1 | tee "$OUT/torch_gemm_zerofill.log" | grep -v "^{" | tail -30 ;;
  pagedsplit)  # stop 51: the split's GPU tests, then batch 8 / 32 beside FlashInfer at forced partitions [~165]
    gpu_tests 30 "$OUT/pytest_gpu_pagedsplit.log" -n 8 tests/gpu/test_paged_attention_gpu.py -k "forced_partitions"
    carried_flashinfer
    mkdir -p "$OUT/pagedsplit" "$OUT/pagedsplit_old"
    timeout 105 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,32 \
      --means 2048,8192,32768 --gqa 32/8,64/8 --partitions 512,768,1024 --out "$OUT/pagedsplit" 2>&1 \
      | tee "$OUT/paged_decode_pagedsplit.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -45
    timeout 25 python3 benchmarks/paged_decode.py --sets bf16 --batches 8 --means 2048 --no-peers --partitions 320 \
      --out "$OUT/pagedsplit_old" 2>&1 | tee "$OUT/paged_decode_pagedsplit_old.log" | grep "B=" ;;
  paged)  # stop 52: issue 37's table in one call (bf16 / fp8, batch 8 / 32 / 64, 2k-32k, FlashInfer beside) [~280]
    carried_flashinfer
    mkdir -p "$OUT/paged"
    timeout ${PAGED_S:-290} python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,32,64 \
      --means 2048,8192,32768 --gqa 32/8,64/8 --out "$OUT/paged" 2>&1 | tee "$OUT/paged_decode_paged.log" \
      | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -45 ;;
  pagedb8)  # stop 52: the balanced partition and the partition-major order off / on beside FlashInfer at batch 8 (2k-15k) [~150]
    gpu_tests 100 "$OUT/pytest_gpu_pagedb8.log" -n 8 tests/gpu/test_paged_attention_gpu.py -k "balanced or merge_batch"
    carried_flashinfer
    mkdir -p "$OUT/pagedb8"
    timeout 110 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16 --batches 8 --means 2048,8192,32768 \
      --gqa 32/8,64/8 --configs balance=true,split_major=true,balance=true:split_major=true,balance=true:merge=last-cta \
      --out "$OUT/pagedb8" 2>&1 \
      | tee "$OUT/paged_decode_pagedb8.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -20 ;;
  fp8eff)  # stop 53: the fp8 paged ring by its bytes in flight (inflight=true, 3 stages, 2 warps x 4) beside the default [~140]
    carried_flashinfer
    mkdir -p "$OUT/fp8eff"
    timeout 125 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets fp8 --batches 8,32 --means 2048,8192 \
      --gqa 32/8,64/8 --configs inflight=true,stages=3,warps=2:stages=4 \
      --out "$OUT/fp8eff" 2>&1 \
      | tee "$OUT/paged_decode_fp8eff.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -20 ;;
  short2k)  # stop 53: paged decode at 512 / 2k / 3k: one launch, its merge in one round, beside the default and FlashInfer [~120]
    carried_flashinfer
    mkdir -p "$OUT/short2k"
    timeout 105 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,16 --means 512,2048,3072 \
      --gqa 32/8 --configs merge=last-cta,merge=last-cta:merge_batch=16,balance=true:split_major=true:merge=last-cta:merge_batch=16,partition=1024 \
      --out "$OUT/short2k" 2>&1 \
      | tee "$OUT/paged_decode_short2k.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -30 ;;
  pagedpdl)  # stop 54: programmatic dependent launch off / on, both merges, at 512 / 2k / 8k beside FlashInfer [~150]
    gpu_tests 90 "$OUT/pytest_gpu_pagedpdl.log" -n 8 tests/gpu/test_paged_pdl_gpu.py
    carried_flashinfer
    mkdir -p "$OUT/pagedpdl"
    timeout 95 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,32 --means 512,2048,8192 \
      --gqa 32/8 --configs merge=kernel,pdl=true:merge=kernel,merge=last-cta,pdl=true:merge=last-cta \
      --out "$OUT/pagedpdl" 2>&1 \
      | tee "$OUT/paged_decode_pagedpdl.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -30 ;;
  pagedrule)  # stop 55: the balanced partition by rule (WEIGH_BALANCE) off / on beside FlashInfer at batch 8 / 32 [~150]
    gpu_tests 40 "$OUT/pytest_gpu_pagedrule.log" -n 8 tests/gpu/test_paged_attention_gpu.py tests/gpu/test_paged_pdl_gpu.py \
      -k "balanced or toggling"
    carried_flashinfer
    mkdir -p "$OUT/pagedrule"
    timeout 95 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,32 \
      --means 2048,8192,16384 --gqa 32/8 --configs balance=true:split_major=true --rule \
      --out "$OUT/pagedrule" 2>&1 \
      | tee "$OUT/paged_decode_pagedrule.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -30 ;;
  epiearly)  # stop 52: the residual's loads under the mainloop ('early'): exact on the card, then --epilogue [~220]
    gpu_tests 90 "$OUT/pytest_gpu_epiearly.log" -n 8 tests/gpu/test_sm90_residual_early_gpu.py
    timeout 170 python3 benchmarks/sm90_gemm.py --epilogue --out "$OUT" 2>&1 | tee "$OUT/epilogue.log" | grep -v "^{" | tail -55 ;;
  reach)  # stop 52: FINE_CUTS off / on on three models no issue named, at the M its cuts move (sm90_reach.py) [~160]
    mkdir -p "$OUT/reach"
    timeout 220 python3 benchmarks/torch_gemm.py --models ${REACH_MODELS:-llama-3.2-3b,qwen2.5-14b,qwen2.5-1.5b} \
      --projs qkv,o,down --ms ${REACH_MS:-260,288,316,350,650,672,772,800} --fine-cuts off,on --calls 20 --reps 8 \
      --out "$OUT/reach" 2>&1 | tee "$OUT/torch_gemm_reach.log" | grep -v "^{" | tail -40 ;;
  power)  # stop 52: the sm90 GEMM and cuBLAS at M >= 768 at the clock and power they sustain (sm90_power.py) [~120]
    timeout 170 python3 benchmarks/sm90_power.py --seconds ${POWER_S:-1.6} --out "$OUT/power" 2>&1 | tee "$OUT/sm90_power.log" | tail -14 ;;
  widen)  # stop 52: the wide-N shapes' candidates beside the plans and cuBLAS, sustained (sm90_widen.py) [~190]
    timeout 195 python3 benchmarks/sm90_widen.py --seconds ${WIDEN_S:-1.0} --out "$OUT/widen" 2>&1 \
      | tee "$OUT/sm90_widen.log" | grep -v "^{" | tail -40 ;;
  deepwaves)  # stop 52: the wave-fitting widths to DEEP_MAX_WAVES waves (gemm_cost.WEIGH_DEEP_WAVES) off / on [~130]
    mkdir -p "$OUT/deepwaves"
    timeout 170 python3 benchmarks/torch_gemm.py ${DEEPWAVES_MODELS:+--models $DEEPWAVES_MODELS} \
      --ms ${DEEPWAVES_MS:-768,1200,3000,8192} --deep-waves off,on --calls 20 --reps 8 --out "$OUT/deepwaves" 2>&1 \
      | tee "$OUT/torch_gemm_deepwaves.log" | grep -v "^{" | tail -30 ;;
  fp8grp)  # stop 53: the fp8 and the grouped torch ops at today's plans, benchmarks only [~190]
    mkdir -p "$OUT/grouped" "$OUT/fp8"
    timeout 110 python3 benchmarks/torch_grouped_sm90.py --calls 15 --reps 12 --out "$OUT/grouped" 2>&1 \
      | tee "$OUT/torch_grouped.log" | grep -v "^{" | tail -10
    timeout 70 python3 benchmarks/torch_fp8_gemm.py --out "$OUT/fp8" 2>&1 | tee "$OUT/torch_fp8.log" | grep -v "^{" | tail -8 ;;
  swap200)  # stop 53: swapped 16-row buckets past SWAP_DYNAMIC_MAX_M (gemm_cost.WEIGH_SWAP_NARROW) off / on [~140]
    mkdir -p "$OUT/swap200"
    timeout 150 python3 benchmarks/torch_gemm.py --ms ${SWAP200_MS:-160,200,240,256} --projs ${SWAP200_PROJS:-qkv,o,down} \
      --swap-narrow off,on --calls 20 --reps 8 --out "$OUT/swap200" 2>&1 | tee "$OUT/torch_gemm_swap200.log" \
      | grep -v "^{" | tail -30 ;;
  resclock)  # stop 53: the residual at 4096^3 sustained: time, clock, power, cycles, energy a call (sm90_power.py --epilogue) [~100]
    timeout 140 python3 benchmarks/sm90_power.py --epilogue --seconds ${RESCLOCK_S:-2} --out "$OUT/resclock" 2>&1 \
      | tee "$OUT/sm90_power_resclock.log" | grep -v "^{" | tail -20 ;;

  shiftbox)  # stop 53: the last tile row's box at M - block (Sm90Config.shift_last): exact on the card, then off / on [~180]
    gpu_tests 100 "$OUT/pytest_gpu_shiftbox.log" -n 8 tests/gpu/test_sm90_shift_last_gpu.py
    mkdir -p "$OUT/shiftbox"  # gate_up's plans past one token tile store with TMA: never shifted
    timeout 145 python3 benchmarks/torch_gemm.py --ms ${SHIFTBOX_MS:-96,200,260,300,1200} --projs ${SHIFTBOX_PROJS:-qkv,o,down} \
      --shift-last off,on --calls 20 --reps 8 --out "$OUT/shiftbox" 2>&1 | tee "$OUT/torch_gemm_shiftbox.log" \
      | grep -v "^{" | tail -30 ;;
  grpbig)  # stop 53: Mixtral's grouped prefill, the walk prefix / windows / prefix (each kernel checked first) [~140]
    mkdir -p "$OUT/grpbig/1" "$OUT/grpbig/2" "$OUT/grpbig/3"  # the runs write into their own folders
    for run in 55:1:prefix 55:2:windows 40:3:prefix; do  # timeout:order:walk (the first builds both shapes' plans)
      IFS=: read -r secs i walk <<< "$run"
      timeout "$secs" python3 benchmarks/torch_grouped_sm90.py --models mixtral-8x7b --tokens 2048,8192 --walk "$walk" \
        --no-sm80 --calls 15 --reps 12 --out "$OUT/grpbig/$i" 2>&1 | tee -a "$OUT/torch_grouped_grpbig.log" \
        | grep -v "^{" | tail -7
    done ;;
  zerofill2)  # stop 53: WEIGH_ZERO_FILL off / on with SHIFT_LAST on (TMA-store plans -> shifted register plans) [~130]
    mkdir -p "$OUT/zerofill2"  # gate_up / down: the same plans both ways at these M (torch_gemm.py --plans --zero-fill)
    timeout 145 python3 benchmarks/torch_gemm.py --ms ${ZEROFILL2_MS:-260,300,333,600} --projs ${ZEROFILL2_PROJS:-qkv,o} \
      --zero-fill off,on --calls 20 --reps 8 --out "$OUT/zerofill2" 2>&1 | tee "$OUT/torch_gemm_zerofill2.log" \
      | grep -v "^{" | tail -30 ;;
  shifttma)  # stop 53: the TMA-store plans' shifted last tile row (gemm_shift.SHIFT_TMA): exact on the card, then off / on [~140]
    gpu_tests 55 "$OUT/pytest_gpu_shifttma.log" -n 8 tests/gpu/test_sm90_shift_tma_gpu.py
    mkdir -p "$OUT/shifttma"  # the same plans both ways (WEIGH_ZERO_FILL off), the TMA ones with " shift" on
    timeout 90 python3 benchmarks/torch_gemm.py --ms ${SHIFTTMA_MS:-260,300,333} --projs ${SHIFTTMA_PROJS:-qkv,o} \
      --shift-tma off,on --calls 20 --reps 8 --out "$OUT/shifttma" 2>&1 | tee "$OUT/torch_gemm_shifttma.log" \
      | grep -v "^{" | tail -30 ;;

  shiftdepth)  # stop 55: SHIFT_TMA half (the shallow last tile only): exact on the card, then off / on / half [~150]
    gpu_tests 60 "$OUT/pytest_gpu_shiftdepth.log" -n 2 tests/gpu/test_sm90_shift_tma_gpu.py -k half
    mkdir -p "$OUT/shiftdepth"  # the same plans each way (WEIGH_ZERO_FILL off); half: 260 / 300 shift, 333 keeps TMA
    timeout 125 python3 benchmarks/torch_gemm.py --ms ${SHIFTDEPTH_MS:-260,300,333,3000} --projs ${SHIFTDEPTH_PROJS:-qkv,o} \
      --shift-tma off,on,half --calls 20 --reps 8 --out "$OUT/shiftdepth" 2>&1 | tee "$OUT/torch_gemm_shiftdepth.log" \
      | grep -v "^{" | tail -34 ;;

  chunkepi)  # stop 54: the chunk loop's one barrier: exact on the card, then whole vs 64-column s4 sustained [~150]
    gpu_tests 50 "$OUT/pytest_gpu_chunkepi.log" -n 3 tests/kernels/sm90/test_sm90_epilogue_tile.py
    timeout 110 python3 benchmarks/sm90_power.py --epilogue --set chunks --seconds ${CHUNKEPI_S:-2} --out "$OUT/chunkepi" 2>&1 \
      | tee "$OUT/sm90_power_chunkepi.log" | grep -v "^{" | tail -20 ;;

  stagedc)  # stop 55: the residual staged in the chunk buffers, 4 stages: exact on the card, then sustained [~150]
    gpu_tests 40 "$OUT/pytest_gpu_stagedc.log" -n 6 tests/kernels/sm90/test_sm90_residual_chunks.py
    timeout 110 python3 benchmarks/sm90_power.py --epilogue --set stagedc --seconds ${STAGEDC_S:-2} --out "$OUT/stagedc" 2>&1 \
      | tee "$OUT/sm90_power_stagedc.log" | grep -v "^{" | tail -20 ;;
  edges)  # stop 55: empty attention / paged calls in a CUDA graph, fp8 per-tensor scales vs torch._scaled_mm; serving2's broadcast paged scales, gemm [B, S, K]; bshd attention vs SDPA [~150]
    gpu_tests 120 "$OUT/pytest_gpu_edges.log" -n 4 tests/runtime/test_torch_edges.py tests/runtime/test_torch_fp8.py \
      tests/runtime/test_torch_serving.py
    gpu_tests 120 "$OUT/pytest_gpu_bshd.log" -n 8 tests/gpu/test_sm90_attention_bshd_gpu.py ;;
  chunkab)  # stop 56: the chunk loop of stop 54 against stop 53's tree, grouped prefill alternating, then sustained [~400]
    for run in 1:90:now:. 2:90:base:${CHUNK_BASE_PKG:-.sm90tree/chunkbase} 3:60:now:. 4:60:base:${CHUNK_BASE_PKG:-.sm90tree/chunkbase}; do
      IFS=: read -r i secs tree pkg <<< "$run"
      mkdir -p "$OUT/chunkab/$i"  # the first run of each tree builds its kernels into its own cache
      echo "== run $i: $tree ($pkg)" | tee -a "$OUT/torch_grouped_chunkab.log"
      PYTHONPATH=$PWD/$pkg:/tmp/site TVM_CDNA4_CACHE_DIR=/tmp/cache_$tree timeout "$secs" python3 benchmarks/torch_grouped_sm90.py \
        --tokens 2048,8192 --no-sm80 --calls 15 --reps 12 --out "$OUT/chunkab/$i" 2>&1 \
        | tee -a "$OUT/torch_grouped_chunkab.log" | grep -v "^{" | tail -5
    done
    for run in now:. base:${CHUNK_BASE_PKG:-.sm90tree/chunkbase}; do
      IFS=: read -r tree pkg <<< "$run"
      echo "== sustained: $tree ($pkg)" | tee -a "$OUT/sm90_power_chunkab.log"
      PYTHONPATH=$PWD/$pkg:/tmp/site TVM_CDNA4_CACHE_DIR=/tmp/cache_$tree timeout 85 python3 benchmarks/sm90_power.py \
        --epilogue --set chunks --seconds ${CHUNKAB_S:-1.5} --out "$OUT/chunkab/power_$tree" 2>&1 \
        | tee -a "$OUT/sm90_power_chunkab.log" | grep -v "^{" | tail -9
    done ;;
  pagedmerge)  # stop 56: the refitted merge choice against both merges forced, 1 and 4 queries, beside FlashInfer [~150]
    gpu_tests 60 "$OUT/pytest_gpu_pagedmerge.log" -n 8 tests/gpu/test_paged_attention_gpu.py -k "exact_against or prepared_launch"
    carried_flashinfer
    mkdir -p "$OUT/pagedmerge" "$OUT/pagedmerge3k"
    timeout 85 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches 8,32,64 --means 2048,8192 \
      --gqa 32/8 --configs merge=kernel,merge=last-cta --out "$OUT/pagedmerge" 2>&1 \
      | tee "$OUT/paged_decode_pagedmerge.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -22
    timeout 30 python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8,q4 --batches 8 --means 3072 \
      --gqa 32/8 --configs merge=kernel,merge=last-cta --out "$OUT/pagedmerge3k" 2>&1 \
      | tee "$OUT/paged_decode_pagedmerge3k.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -8 ;;
  pagedfix)  # stop 56: the rule's batch-16 moves (each plan weighed with its merge) against balance=false [~140]
    gpu_tests 30 "$OUT/pytest_gpu_pagedfix.log" -n 8 tests/gpu/test_paged_attention_gpu.py -k "balanced"
    mkdir -p "$OUT/pagedfix"
    timeout 105 python3 benchmarks/paged_decode.py --no-peers --sets bf16,fp8 --batches 16 --means 512,2048,8192 \
      --gqa 32/8,64/8 --configs balance=false --out "$OUT/pagedfix" 2>&1 \
      | tee "$OUT/paged_decode_pagedfix.log" | grep -v "^{" | grep -v -i warn | grep -v "return F" | tail -16 ;;
  bshd80)  # stop 56: the sm80 attention on [B, S, H, D] storage, forced on the card: GPU tests, CLI validate + bench [~90]
    gpu_tests 75 "$OUT/pytest_gpu_bshd80.log" -n 8 tests/gpu/test_sm80_attention_bshd_gpu.py
    for layout in bshd bhsd; do
      timeout 40 python3 -m tvm_cdna4 attention --target sm80 --layout $layout --batch 1 --heads 16 --kv-heads 4 \
        --seq 2048 --head-dim 128 --causal --validate --bench 2>&1 | tee -a "$OUT/attention_bshd80.log" | tail -3
    done ;;
  *) echo "unknown step $step (peers, partitions, ncu, ncu-cluster, ncu-attention, validate, gemm-ab, refit, cluster, residual, attn-options, grouped-walks, grouped-op, paged-fi8, final, gemm, attention, swapdyn, cli-options, order, stop47, stop47b, swapstore, moedecode, attnsass, attnring, m200, epires, epires-ncu, stop49, stop49b, attn3wg, swaporder, swaporder-ncu, decode32, refine, swapone, swapcluster, attnfit, attnfit-long, attnitem, splitwave, attnzigzag, peers-mid, finecut, walktests, trim, pagedsplit, zerofill, paged, reach, epiearly, power, widen, deepwaves, pagedb8, fa3tile, attnlat, fp8grp, swap200, short2k, resclock, shiftbox, fp8eff, grpbig, zerofill2, shifttma, shiftdepth, pagedpdl, chunkepi, attnop, pagedrule, stagedc, edges, chunkab, pagedmerge, pagedfix, bshd80)"; exit 2 ;;
  esac
done
cd "$OUT" && tar czf /tmp/call.tgz --exclude=call.tgz . && find . -mindepth 1 -delete && mv /tmp/call.tgz "$OUT/call.tgz"
