"""Random problems through the families' public API (issue 35 deliverable 8): the schedule-level check.

A *case* is one ``GemmProblem`` or ``AttentionProblem`` (the constructor's keywords) on one target,
with the run-time rows ``validate`` needs (a dynamic-M problem's ``m``, a grouped one's
``group_rows``), drawn from a seeded numpy generator (:func:`sample`: same seed, same cases) either
within what the target documents (``invalid is None``) or with one change that puts it outside
(``invalid``: what was changed, ``expect``: a regular expression the refusal must match, so a
refusal for another reason is not counted as the right one). :func:`check` runs it through the
family's ``validate(problem, target, ...)`` (gfx950: the CPU wavefront emulator; sm80 and sm90 (GEMM
only): the CUDA emulator, hence their small sizes) and classifies the outcome (:data:`OUTCOMES`).

What is drawn. GEMM: every input dtype the target runs (gfx950: the dense dtypes and the MX
formats; sm80, sm90: f16, bf16), every output its dtype produces (or None), every layout, odd M, N, K and
sizes one off a tile edge, long K with few rows (``LONG_K``: split-K; gfx950 also the ordered
reduction), a random fused epilogue (scales, bias, activation, residual; on f32
accumulators), a batch axis (gfx950, without an epilogue), dynamic M with a run-time ``m`` (layouts nn / nt), grouped GEMMs (layouts nn / nt) of
1 to 4 groups whose rows include zeros, MX formats with K a multiple of 32 (gfx950, static, f32);
sm90: static and dynamic M, layout nt, K a multiple of 8 (ragged against its 64-wide K tile; long K
runs many laps of its stage ring), M <= 16 on the decode kernel it keeps and more rows on the TMA +
wgmma kernel.
Attention: batch, heads and GQA groups, odd ``seq_q`` and ``seq_kv`` (each 1 to 80, unequal),
causal, both head dims, bf16 / f16 (and fp8 on gfx950), an explicit scale. The sizes stay within
the emulators' reach: sm80 and sm90 at most ``gemm_target.EMULATED_MACS`` multiply-adds and
``attention_target.EMULATED_PAIRS`` scored pairs.

What is refused (``invalid``): a field the record refuses (M, N or K not a positive int, an unknown
dtype, layout, out dtype or activation, groups with a static M, a batch without one; attention:
heads not a multiple of kv_heads, an unknown head dim or dtype, a bad scale), a problem the target
refuses (sm80: a dtype other than f16 / bf16, an i32 / f64 output, a batch axis, fp8 attention;
gfx950: an output the dtype does not produce, a fused epilogue on an i32 / f64 accumulator (i8, f64)
or with a batch axis, an MX K off the 32-element scale blocks, an MX batch or output other than f32,
dynamic or grouped MX; both: dynamic M or grouped with A stored [K, M]; sm90: layouts nn / tn / tt,
K % 8 != 0 (fp8: 16), a dtype other than f16 / bf16 / fp8, an i32 / f64 output, a batch axis, grouped fp8 inputs), or run-time rows
``validate`` refuses (a missing, zero or negative ``m``; group rows of the wrong count, negative or
all zero). Every refusal must be a ``ValueError`` (``ContractError`` is one) that names the change.

Known bugs (:data:`KNOWN_BUGS`) are kept out of the draw (a case in their class is drawn again) until
their fix lands; each has its own strict-xfail test in ``tests/kernels/test_random_problems.py``.
"""

from __future__ import annotations

import math
import re
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from tvm_cdna4.kernels import attention, gemm
from tvm_cdna4.kernels.attention import AttentionProblem
from tvm_cdna4.kernels.gemm import Fusion, GemmProblem

OUTCOMES = {
    "pass": "valid problem, the kernel within the error bound",
    "refused": "invalid problem refused with a ValueError / ContractError naming the change",
    "wrong": "BUG: valid problem, the kernel over the error bound (a wrong result)",
    "valid_refused": "BUG: valid problem refused with a ValueError",
    "invalid_accepted": "BUG: invalid problem accepted",
    "refused_otherwise": "BUG: invalid problem refused, but the message does not name the change",
    "internal_error": "BUG: an exception other than ValueError / ContractError (an internal error)",
}
BUGS = [k for k, v in OUTCOMES.items() if v.startswith("BUG")]
FAMILIES = ("gemm", "attention")
TARGETS = ("gfx950", "sm80", "sm90")
"""Every target of the draw (a family runs those of its rows in :data:`KINDS`: attention has no sm90); the
index of one seeds its stream, so a target added at the end leaves the others' draws as they were."""

GFX950_OUTS = {"f16": ("f32", "f16", "bf16"), "bf16": ("f32", "f16", "bf16"), "fp8": ("f32", "f16", "bf16"),
               "bf8": ("f32", "f16", "bf16"), "fp8_bf8": ("f32", "f16", "bf16"), "bf8_fp8": ("f32", "f16", "bf16"),
               "i8": ("i32",), "f32": ("f32", "f16", "bf16"), "f64": ("f64",)}
"""The outputs each dense dtype produces on gfx950 (``kernels.gfx950.gemm_config.DTYPES``); MX: f32."""
MX = ("mxfp8", "mxbf8", "mxfp6", "mxbf6", "mxfp4")
SM80_DTYPES, SM80_OUTS = ("f16", "bf16"), ("f32", "f16", "bf16")
ROW_LAYOUTS = ("nn", "nt")  # A stored [M, K]: what dynamic M and grouped GEMMs take
SM80_MACS = 1 << 22  # kernels.sm80.gemm_target.EMULATED_MACS (checked by the tests)
SM80_PAIRS = 1 << 16  # kernels.sm80.attention_target.EMULATED_PAIRS (checked by the tests)
SM90_DTYPES, SM90_OUTS, SM90_LAYOUTS = ("f16", "bf16", "fp8"), ("f32", "f16", "bf16"), ("nt",)
"""What the sm90 GEMM runs (``kernels.sm90.gemm_plan``'s ``DTYPES``, ``OUT_DTYPES``, ``LAYOUTS``; checked by the
tests); it validates in the CUDA emulator up to sm80's ``EMULATED_MACS``."""
SM90_K_STEP = {"f16": 8, "bf16": 8, "fp8": 16}
"""The step of K per dtype (kernels.sm90.gemm_plan: TMA strides are multiples of 16 bytes; checked by the tests)."""
LONG_K = 0.2
"""The share of static and dynamic-M GEMMs drawn with at most 24 rows and K of 512 to 2048 (the
planners split K there, and sm80 takes its decode kernel for 16 rows or fewer)."""
KINDS = {("gemm", "gfx950"): ("static", "dynamic", "grouped", "mx"), ("gemm", "sm80"): ("static", "dynamic", "grouped"),
         ("gemm", "sm90"): ("static", "dynamic"),
         ("attention", "gfx950"): ("bf16", "f16", "fp8"), ("attention", "sm80"): ("bf16", "f16")}
"""What the draw cycles through, one case each in turn (so that a few cases cover them all): the GEMM
kinds (a static M, dynamic M, grouped, MX) and the attention dtypes of each target."""


def targets(family: str) -> tuple[str, ...]:
    """The targets ``family`` is drawn on (its rows of :data:`KINDS`, in :data:`TARGETS`' order)."""
    return tuple(t for t in TARGETS if (family, t) in KINDS)


@dataclass
class Case:
    """One problem on one target (module docstring). ``fields``: the problem's constructor keywords
    (``fusion`` as a dict of ``Fusion``'s); ``run``: ``validate``'s keywords (``m``, ``group_rows``)."""

    family: str
    target: str
    fields: dict
    run: dict = field(default_factory=dict)
    seed: int = 0
    invalid: str | None = None  # what puts the problem outside the target's documented range
    expect: str | None = None  # a regular expression the refusal's message must match

    def problem(self):
        """The problem record (a ValueError where the record itself refuses the fields)."""
        if self.family == "gemm":
            fields = dict(self.fields)
            if isinstance(fields.get("fusion"), dict):
                fields["fusion"] = Fusion(**fields["fusion"])
            return GemmProblem(**fields)
        return AttentionProblem(**self.fields)

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.fields.items()
                           if not (k == "fusion" and not any(v.values())))
        run = "".join(f", {k}={v!r}" for k, v in self.run.items())
        record = "GemmProblem" if self.family == "gemm" else "AttentionProblem"
        kind = f" | invalid: {self.invalid}" if self.invalid else " | valid"
        return f"{self.target} {record}({fields}){run} seed={self.seed}{kind}"


@dataclass
class Result:
    outcome: str
    case: Case
    detail: str = ""
    seconds: float = 0.0


# ------------------------------------------------------------------------------------ the draw


def _size(rng, top: int) -> int:
    """1 .. top: uniform half the time, else one off (or on) a multiple of 16."""
    if rng.random() < 0.5:
        return int(rng.integers(1, top + 1))
    edge = int(rng.integers(1, max(2, top // 16) + 1)) * 16 + int(rng.integers(-1, 2))
    return min(max(edge, 1), top)


def _fusion(rng, rate: float = 0.35) -> dict:
    draw = {k: bool(rng.random() < rate) for k in ("bias", "residual", "row_scale", "col_scale")}
    activation = rng.choice(["relu", "silu", "gelu"]) if rng.random() < rate else None
    return {**draw, "activation": None if activation is None else str(activation)}


def _group_rows(rng, groups: int, top: int) -> tuple[int, ...]:
    rows = [0 if rng.random() < 0.3 else int(rng.integers(1, top + 1)) for _ in range(groups)]
    if not sum(rows):
        rows[int(rng.integers(groups))] = int(rng.integers(1, top + 1))
    return tuple(rows)


def _gemm_gfx950(rng, kind: str) -> tuple[dict, dict]:
    fusion = _fusion(rng)
    if kind == "mx":
        return dict(M=_size(rng, 80), N=_size(rng, 80), K=32 * int(rng.integers(1, 5)), dtype=str(rng.choice(MX)),
                    layout=str(rng.choice(gemm.LAYOUTS)), out_dtype="f32" if rng.random() < 0.5 else None,
                    fusion=fusion), {}
    dtype = str(rng.choice(list(GFX950_OUTS)))
    out = rng.choice([*GFX950_OUTS[dtype], None])
    if dtype in ("i8", "f64"):  # the fused epilogue computes on f32 accumulators
        fusion = _fusion(rng, 0.0)
    long_k = kind != "grouped" and rng.random() < LONG_K  # few rows, long K: the planner's K splits
    rows = 24 if long_k else 80
    fields = dict(N=_size(rng, 48 if long_k else 80), K=int(rng.integers(512, 2049)) if long_k else _size(rng, 160),
                  dtype=dtype, out_dtype=None if out is None else str(out), fusion=fusion)
    if kind == "static":
        batch = 0 if long_k else int(rng.choice([0, 0, 0, 2, 3]))
        if batch:  # the fused epilogue's inputs are per matrix: no batch axis
            fields["fusion"] = _fusion(rng, 0.0)
        run = {"reduction": "ordered"} if rng.random() < 0.3 else {}  # how a K split is reduced
        return dict(M=_size(rng, rows), **fields, layout=str(rng.choice(gemm.LAYOUTS)), batch=batch), run
    fields["layout"] = str(rng.choice(ROW_LAYOUTS))
    if kind == "dynamic":
        return dict(M=None, **fields), {"m": _size(rng, rows + 16)}
    groups = int(rng.integers(1, 5))
    return dict(M=None, **fields, groups=groups), {"group_rows": _group_rows(rng, groups, 40)}


def _gemm_sm80(rng, kind: str) -> tuple[dict, dict]:
    dtype, out = str(rng.choice(SM80_DTYPES)), rng.choice([*SM80_OUTS, None])
    long_k = kind != "grouped" and rng.random() < LONG_K  # few rows, long K: split-K, the decode kernel
    N, K = (_size(rng, 128), int(rng.integers(512, 2049))) if long_k else (_size(rng, 72), _size(rng, 320))
    fields = dict(N=N, K=K, dtype=dtype, out_dtype=None if out is None else str(out), fusion=_fusion(rng))
    rows_top = max(1, min(24 if long_k else 72, SM80_MACS // (N * K)))  # the CUDA emulator's reach
    if kind == "static":
        layout = "nt" if long_k and rng.random() < 0.5 else str(rng.choice(gemm.LAYOUTS))  # nt: the decode kernel's
        return dict(M=_size(rng, rows_top), **fields, layout=layout), {}
    fields["layout"] = str(rng.choice(ROW_LAYOUTS))
    if kind == "dynamic":
        return dict(M=None, **fields), {"m": _size(rng, rows_top)}
    groups = int(rng.integers(1, 5))
    return dict(M=None, **fields, groups=groups), {"group_rows": _group_rows(rng, groups, max(1, rows_top // groups))}


def _gemm_sm90(rng, kind: str) -> tuple[dict, dict]:
    """Layout nt, K a multiple of 8 (ragged against the 64-wide K tile), static or dynamic M; M <= 16 is the
    decode kernel's, more rows the TMA + wgmma kernel's (long K: many laps of its stage ring)."""
    dtype, out = str(rng.choice(SM90_DTYPES)), rng.choice([*SM90_OUTS, None])
    long_k = rng.random() < LONG_K
    N = _size(rng, 64 if long_k else 72)
    K = SM90_K_STEP[dtype] * (int(rng.integers(64 * 8 // SM90_K_STEP[dtype], 257)) if long_k else _size(rng, 40))
    fields = dict(N=N, K=K, dtype=dtype, out_dtype=None if out is None else str(out), fusion=_fusion(rng),
                  layout="nt")
    rows_top = max(1, min(24 if long_k else 72, SM80_MACS // (N * K)))  # the CUDA emulator's reach
    if kind == "static":
        return dict(M=_size(rng, rows_top), **fields), {}
    return dict(M=None, **fields), {"m": _size(rng, rows_top)}


def _attention(rng, dtype: str) -> dict:
    kv_heads = int(rng.integers(1, 3))
    seq_q, seq_kv = _size(rng, 80), _size(rng, 80)
    fields = dict(batch=int(rng.integers(1, 3)), heads=kv_heads * int(rng.choice([1, 2, 4])), kv_heads=kv_heads,
                  seq_q=seq_q, seq_kv=seq_kv, head_dim=int(rng.choice([64, 128])), causal=bool(rng.random() < 0.5),
                  dtype=dtype)
    if rng.random() < 0.25:
        fields["scale"] = round(float(rng.uniform(0.02, 0.5)), 3)
    while fields["batch"] * fields["heads"] * fields["seq_q"] * fields["seq_kv"] > SM80_PAIRS:  # the CUDA emulator's reach
        fields["seq_kv"] = max(1, fields["seq_kv"] // 2)
    return fields


# (invalid, expect, change): one change each that takes a valid problem outside the documented range
GEMM_RECORD = [
    ("M or N = 0", r"[MN]: expected a positive int", lambda f, r: f.update(M=0) if f["M"] else f.update(N=0)),
    ("K negative", r"K: expected a positive int", lambda f, r: f.update(K=-int(r.integers(1, 64)))),
    ("N a bool", r"N: expected a positive int", lambda f, r: f.update(N=True)),
    ("N a float", r"N: expected a positive int", lambda f, r: f.update(N=float(f["N"]))),
    ("dtype 'f8'", r"dtype: expected one of", lambda f, r: f.update(dtype=str(r.choice(["f8", "fp16", "F16", "int8"])))),
    ("layout upper case", r"layout: expected one of", lambda f, r: f.update(layout=f.get("layout", "nt").upper())),
    ("out_dtype 'i8'", r"out_dtype: expected one of", lambda f, r: f.update(out_dtype=str(r.choice(["i8", "f8", "fp32"])))),
    ("activation 'tanh'", r"activation .*expected one of", lambda f, r: f["fusion"].update(activation="tanh")),
    ("groups with a static M", r"expected M=None with groups", lambda f, r: f.update(M=int(r.integers(1, 64)), groups=2)),
    ("negative groups", r"groups: expected an int >= 0", lambda f, r: f.update(groups=-1)),
    ("batch with dynamic M", r"batch: a batch axis is for a static M",
     lambda f, r: f.update(M=None, batch=2, groups=0)),
]
RUN_ROWS = [  # validate's run-time rows: (applies to, invalid, expect, change of run)
    ("dynamic", "m missing", r"expected the run-time m", lambda run, r: run.pop("m")),
    ("dynamic", "m = 0", r"expected the run-time m", lambda run, r: run.update(m=0)),
    ("dynamic", "m negative", r"expected the run-time m", lambda run, r: run.update(m=-int(r.integers(1, 9)))),
    ("grouped", "group_rows of another count", r"expected group_rows",
     lambda run, r: run.update(group_rows=(*run["group_rows"], 3))),
    ("grouped", "a negative group", r"group_rows: expected ints >= 0",
     lambda run, r: run.update(group_rows=(-1, *run["group_rows"][1:]))),
    ("grouped", "every group empty", r"with a positive sum",
     lambda run, r: run.update(group_rows=(0,) * len(run["group_rows"]))),
]


def _kind(fields: dict) -> str:
    return "grouped" if fields.get("groups") else ("dynamic" if fields.get("M") is None else "static")


def _sm90_changes(rng, kind: str, fields: dict, run: dict) -> list:
    """The sm90 GEMM's refusals (docs/sm90_gemm.md "Scope today"), each a ContractError naming the operand."""
    def grouped():  # a grouped problem of fp8 inputs (the sm90 grouped kernel runs f16 / bf16)
        groups = int(rng.integers(1, 5))
        fields.update(groups=groups, dtype="fp8", out_dtype=None, K=-(-fields["K"] // 16) * 16)
        run.clear()
        run.update(group_rows=_group_rows(rng, groups, 16))

    options = [("sm90 layout nn / tn / tt", r"sm90 GEMM layout: .*expected \('nt',\), found (nn|tn|tt)",
                lambda: fields.update(layout=str(rng.choice(["nn", "tn", "tt"])))),
               ("sm90 K % 8 != 0", r"sm90 GEMM K: .*expected K % (8|16) == 0, found",
                lambda: fields.update(K=fields["K"] + int(rng.integers(1, SM90_K_STEP[fields["dtype"]])))),
               ("sm90 dtype", r"sm90 GEMM dtype: .*expected \('f16', 'bf16', 'fp8'\)",
                lambda: fields.update(dtype=str(rng.choice(["bf8", "i8", "f32", "f64", "bf8_fp8", *MX])),
                                      out_dtype=None)),
               ("sm90 out i32 / f64", r"sm90 GEMM out_dtype: .*expected \('f32', 'f16', 'bf16'\)",
                lambda: fields.update(out_dtype=str(rng.choice(["i32", "f64"]))))]
    if kind == "static":
        options.append(("sm90 batch", r"sm90 GEMM M: a batched problem is not planned",
                        lambda: fields.update(batch=int(rng.integers(2, 4)))))
    else:
        options.append(("sm90 grouped fp8", r"sm90 grouped GEMM dtype: f16 or bf16 inputs", grouped))
    return options


def _gemm_target_change(rng, target: str, fields: dict, run: dict):
    """A change the record takes and ``target`` refuses: (invalid, expect), fields and run edited."""
    kind = _kind(fields)
    options = []
    if target == "sm90":
        options += _sm90_changes(rng, kind, fields, run)
    elif target == "sm80":
        options += [("sm80 dtype", r"sm80 GEMM dtype: expected one of",
                     lambda: fields.update(dtype=str(rng.choice(["fp8", "bf8", "i8", "f32", "f64", "fp8_bf8"])),
                                           out_dtype=None)),
                    ("sm80 out i32 / f64", r"sm80 GEMM out_dtype: expected one of",
                     lambda: fields.update(out_dtype=str(rng.choice(["i32", "f64"]))))]
        if kind == "static":
            options.append(("sm80 batch", r"sm80 GEMM batch", lambda: fields.update(batch=2)))
    else:
        options += [("gfx950 out the dtype does not produce", r"out_dtype|output",
                     lambda: fields.update(out_dtype={"i8": "f32", "f64": "f32"}.get(fields["dtype"], "i32"))),
                    ("a fused epilogue on an i32 / f64 accumulator", r"fused epilogue .*computes on f32 accumulators",
                     lambda: fields.update(dtype=str(rng.choice(["i8", "f64"])), out_dtype=None,
                                           fusion={**_fusion(rng, 0.0), "bias": True}))]
        if kind == "static":
            options += [("MX K off the 32-element blocks", r"multiple of 32",
                         lambda: fields.update(dtype=str(rng.choice(MX)), out_dtype=None,
                                               K=32 * int(rng.integers(1, 4)) + int(rng.integers(1, 32)), batch=0)),
                        ("MX batch", r"batch",
                         lambda: fields.update(dtype=str(rng.choice(MX)), out_dtype=None, K=64, batch=2)),
                        ("a fused epilogue with a batch axis", r"fused epilogue .*not with a batch axis",
                         lambda: fields.update(batch=2, dtype=str(rng.choice(["f16", "bf16", "fp8", "f32"])),
                                               out_dtype=None, fusion={**_fusion(rng, 0.0), "residual": True})),
                        ("MX out bf16", r"out_dtype|output",
                         lambda: fields.update(dtype=str(rng.choice(MX)), out_dtype="bf16", K=64, batch=0))]
        else:
            options.append(("dynamic / grouped MX", r"dense dtypes",
                            lambda: fields.update(dtype=str(rng.choice(MX)), out_dtype=None, K=64)))
    if kind != "static" and target != "sm90":  # sm90 refuses every layout but nt (its own change)
        options.append(("dynamic / grouped with A stored [K, M]", r"layouts? .*nn|A stored \[M, K\]|expected one of",
                        lambda: fields.update(layout=str(rng.choice(["tn", "tt"])))))
    invalid, expect, change = options[int(rng.integers(len(options)))]
    change()
    return invalid, expect


def gemm_case(rng, target: str, invalid_rate: float = 0.0, index: int = 0) -> Case:
    """A GEMM case of the ``index``-th kind of ``KINDS[("gemm", target)]`` (the draw cycles through them)."""
    kind = KINDS["gemm", target][index % len(KINDS["gemm", target])]
    fields, run = {"gfx950": _gemm_gfx950, "sm80": _gemm_sm80, "sm90": _gemm_sm90}[target](rng, kind)
    case = Case("gemm", target, fields, run, seed=int(rng.integers(2**31)))
    if rng.random() >= invalid_rate:
        return case
    kind, where = _kind(fields), rng.random()
    rows = [r for r in RUN_ROWS if r[0] == kind]
    if rows and where < 0.25:
        _, case.invalid, case.expect, change = rows[int(rng.integers(len(rows)))]
        change(run, rng)
    elif where < 0.6:
        case.invalid, case.expect, change = GEMM_RECORD[int(rng.integers(len(GEMM_RECORD)))]
        change(fields, rng)
    else:
        case.invalid, case.expect = _gemm_target_change(rng, target, fields, run)
    return case


ATTENTION_RECORD = [
    ("batch 0", r"batch: expected a positive int", lambda f, r: f.update(batch=0)),
    ("seq_q negative", r"seq_q: expected a positive int", lambda f, r: f.update(seq_q=-int(r.integers(1, 9)))),
    ("seq_kv a float", r"seq_kv: expected a positive int", lambda f, r: f.update(seq_kv=float(f["seq_kv"]))),
    ("heads not a multiple of kv_heads", r"kv_heads must divide heads",
     lambda f, r: f.update(heads=3, kv_heads=2)),
    ("head_dim", r"head_dim: expected one of", lambda f, r: f.update(head_dim=int(r.choice([32, 96, 256, 80])))),
    ("dtype", r"dtype: expected one of", lambda f, r: f.update(dtype=str(r.choice(["f32", "fp16", "e4m3", "i8"])))),
    ("scale", r"scale: expected a positive finite",
     lambda f, r: f.update(scale=[0.0, -0.125, math.inf, math.nan, True][int(r.integers(5))])),
]


def attention_case(rng, target: str, invalid_rate: float = 0.0, index: int = 0) -> Case:
    """An attention case of the ``index``-th dtype of ``KINDS[("attention", target)]``."""
    fields = _attention(rng, KINDS["attention", target][index % len(KINDS["attention", target])])
    case = Case("attention", target, fields, seed=int(rng.integers(2**31)))
    if rng.random() >= invalid_rate:
        return case
    if target == "sm80" and rng.random() < 0.3:
        case.invalid, case.expect = "sm80 fp8", r"sm80 attention dtype: expected one of"
        fields["dtype"] = "fp8"
        return case
    case.invalid, case.expect, change = ATTENTION_RECORD[int(rng.integers(len(ATTENTION_RECORD)))]
    change(fields, rng)
    return case


KNOWN_BUGS: dict = {}
"""Known bugs whose class the draw avoids (name -> predicate of a case) until their fix lands: none
open (the last, sm80 plans of one K tile per CTA, was fixed by ``KStep.fragments``)."""


def known_bug(case: Case) -> str | None:
    return next((name for name, hit in KNOWN_BUGS.items() if hit(case)), None)


def sample(family: str, target: str, n: int, seed: int = 0, invalid_rate: float = 0.3, avoid_known: bool = True,
           redrawn=None) -> list[Case]:
    """``n`` cases of ``family`` on ``target`` from ``seed`` (a share ``invalid_rate`` of them invalid);
    ``avoid_known``: none in a known bug's class (:data:`KNOWN_BUGS`: such a draw is drawn again and
    counted in ``redrawn``, a ``collections.Counter`` by bug, when given)."""
    rng = np.random.default_rng([seed, FAMILIES.index(family), TARGETS.index(target)])
    draw = gemm_case if family == "gemm" else attention_case
    cases = []
    while len(cases) < n:
        case = draw(rng, target, invalid_rate, len(cases))
        bug = known_bug(case) if avoid_known else None
        if bug is None:
            cases.append(case)
        elif redrawn is not None:
            redrawn[bug] += 1
    return cases


# ------------------------------------------------------------------------------------ the check


def _first_line(err: BaseException) -> str:
    return f"{type(err).__name__}: " + (str(err).strip().splitlines() or [""])[0][:300]


def _validate(case: Case):
    problem = case.problem()
    if case.family == "gemm":
        return gemm.validate(problem, case.target, seed=case.seed % 1000, **case.run)
    return attention.validate(problem, case.target, seed=case.seed % 1000)


def check(case: Case) -> Result:
    """Run ``case`` through ``validate`` and classify it (:data:`OUTCOMES`)."""
    start = time.perf_counter()

    def result(outcome, detail=""):
        return Result(outcome, case, detail, time.perf_counter() - start)

    try:
        v = _validate(case)
    except ValueError as err:  # ContractError is a ValueError
        if case.invalid is None:
            return result("valid_refused", _first_line(err))
        if not re.search(case.expect, str(err)):
            return result("refused_otherwise", f"expected /{case.expect}/; " + _first_line(err))
        return result("refused", _first_line(err))
    except Exception as err:  # noqa: BLE001 - classified: the report lists it
        return result("internal_error", _first_line(err) + "\n" + traceback.format_exc(limit=-3))
    if case.invalid is not None:
        return result("invalid_accepted", f"ok={v.ok} on {v.where}")
    ratio = v.ratio if case.family == "gemm" else max(v.o_ratio, v.lse_ratio or 0.0)
    return result("pass" if v.ok else "wrong", f"{ratio:.3g} of the bound on {v.where}")


__all__ = ["BUGS", "KNOWN_BUGS", "OUTCOMES", "Case", "Result", "attention_case", "check", "gemm_case",
           "known_bug", "sample"]
