"""A new fused-epilogue input is one row of ``kernels.gemm.epilogue.INPUTS`` (docs/architecture.md, "Where a
change goes"; reaching it from ``tvm_cdna4.torch`` adds its keyword there, the second file).

The test copies the package, adds a hypothetical per-column ``shift`` after the bias to ``INPUTS`` in the
copy's ``epilogue.py`` (that file and nothing else), and runs a fresh interpreter on the copy: both
targets' plans list the parameter (per group in a grouped GEMM), both kernels validate with it (gfx950
in the CPU wavefront emulator, sm80 in the CUDA emulator), the kernel's C is off the reference without
the shift (it is applied, not ignored), and the CLI has ``--shift`` and runs it.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from paths import ROOT

BIAS_ROW = '''    Input("bias", "column", "f32", "add", (-1.0, 1.0), "add a per-column f32 bias [N]"),
'''
SHIFT_ROW = '''    Input("shift", "column", "f32", "add", (-1.0, 1.0), "add a per-column f32 shift [N] after the bias"),
'''

CHECKS = textwrap.dedent('''
    import json
    import sys

    import attrs
    import numpy as np

    import tvm_cdna4
    from tvm_cdna4.cli import build_parser, main
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gemm import epilogue
    from tvm_cdna4.kernels.gemm.epilogue import PARAM_ORDER, Fusion

    assert tvm_cdna4.__file__.startswith(sys.argv[1]), tvm_cdna4.__file__  # the copy, not the tree
    assert PARAM_ORDER == ("row_scale", "col_scale", "bias", "shift", "residual"), PARAM_ORDER

    # the plans: the parameter after the bias on both targets, [N]; per group [G, N] in a grouped GEMM
    f = Fusion(bias=True, shift=True, residual=True)
    problem = gemm.GemmProblem(40, 64, 256, "bf16", "tn", "bf16", f)
    grouped = gemm.GemmProblem(None, 64, 256, "bf16", "nt", "bf16", f, groups=3)
    for target in ("sm80", "gfx950"):
        params = {p.name: p.shape for p in gemm.plan(problem, target).params}
        assert list(params)[2:] == ["C", "bias", "shift", "residual"] and params["shift"] == (64,), (target, params)
        assert {p.name: p.shape for p in gemm.plan(grouped, target, m=20).params}["shift"] == (3, 64), target

    # gfx950 in the emulator: C within the bound of the reference with the shift, off the one without
    data = gemm.random_inputs(problem, seed=1)
    c, where = gemm.TARGETS["gfx950"].verb("execute")(gemm.plan(problem, "gfx950"), data)
    assert data.ratio(c) <= 1 and where == "the CPU wavefront emulator", data.ratio(c)
    acc = data.arrays["A"].astype(np.float64).T @ data.arrays["B"].astype(np.float64)  # tn: A [K, M], B [K, N]
    without = epilogue.reference(acc, attrs.evolve(f, shift=False), data.arrays)
    np.testing.assert_allclose(data.want - without, np.broadcast_to(data.arrays["shift"], data.want.shape), atol=1e-12)
    assert np.abs(c.astype(np.float64) - without).max() > 0.25  # the shift's values: [-1, 1)

    # sm80 in the CUDA emulator, with an activation
    v = gemm.validate(gemm.GemmProblem(40, 64, 256, "bf16", "tn", "bf16", attrs.evolve(f, activation="silu")), "sm80",
                      seed=2)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)", v

    # the CLI: the flag, the plan it prints, its validation
    gemm_parser = build_parser().commands.choices["gemm"]
    assert "--shift" in gemm_parser.format_help() and "after the bias" in gemm_parser.format_help()
    flags = ["gemm", "--target", "gfx950", "--dtype", "f16", "-M", "33", "-N", "40", "-K", "72", "--shift"]
    assert main([*flags, "--emit", "config", "--validate"]) == 0
    print("OK")
''')


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_a_new_input_is_one_row_of_the_table(tmp_path):
    copy = tmp_path / "tvm_cdna4"
    shutil.copytree(ROOT / "tvm_cdna4", copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / "kernels" / "gemm" / "epilogue.py"
    text = path.read_text()
    assert text.count(BIAS_ROW) == 1, "the bias row of INPUTS moved: update BIAS_ROW"
    path.write_text(text.replace(BIAS_ROW, BIAS_ROW + SHIFT_ROW))
    changed = [p.relative_to(copy) for p in copy.rglob("*.py")
               if p.read_bytes() != (ROOT / "tvm_cdna4" / p.relative_to(copy)).read_bytes()]
    assert [str(p) for p in changed] == ["kernels/gemm/epilogue.py"]  # one package file
    proc = subprocess.run([sys.executable, "-c", CHECKS, str(copy)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout.rstrip().endswith("OK"), proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    config = json.loads(out.splitlines()[0])
    assert config["fusion"]["shift"] is True and config["fusion"]["steps"] == "acc + shift", config["fusion"]
    assert [p for p in out.splitlines() if p in ("PASS", "FAIL")] == ["PASS"]
