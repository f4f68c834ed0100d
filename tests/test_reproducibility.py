"""What "reproducible" means, tested (docs/reproducibility.md):

- on one machine, the same config and seed give the same numbers to the last digit, and a router
  restored from its frozen JSON state scores bit for bit like the fitted router that was
  evaluated, whatever the memory layout of its arrays;
- across CPUs (BLAS kernels differ: AVX2, AVX-512, ...) the same decisions, counts and ranks, and
  floats equal within tests/helpers/numeric.py's tolerance. The suite shows this on the machine it
  runs on by running the same computations under two OpenBLAS kernels (OPENBLAS_CORETYPE).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from policies.preprocess import linear_predictor
from tests.helpers import numeric

REPO = Path(__file__).resolve().parent.parent


# ---- the linear predictor: values only, no layout, no BLAS ---------------------------------------
def _brute_force(z: np.ndarray, coef: np.ndarray, intercept: float) -> np.ndarray:
    """Plain Python floats, same order: sum_j z[i, j] * coef[j], then + intercept."""
    out = []
    for row in z.tolist():
        acc = 0.0
        for x, c in zip(row, coef.tolist()):
            acc += x * c
        out.append(acc + intercept)
    return np.array(out)


def test_linear_predictor_is_the_plain_sum_bit_for_bit_and_matmul_within_tolerance():
    rng = np.random.default_rng(7)
    z = rng.normal(size=(200, 9)) * rng.uniform(0.01, 100, size=9)
    coef, intercept = rng.normal(size=9), float(rng.normal())
    got = linear_predictor(z, coef, intercept)
    np.testing.assert_array_equal(got, _brute_force(z, coef, intercept))
    np.testing.assert_allclose(got, z @ coef + intercept, rtol=1e-12, atol=1e-12)


def test_linear_predictor_does_not_depend_on_memory_layout():
    """The frozen state's coefficients come back from JSON as a new C-ordered array; sklearn's may
    be a transposed or Fortran-ordered view. Scores must not care (they did with ``@`` on an
    AVX-512 CPU: 48 of 100 scores differed in the last place)."""
    rng = np.random.default_rng(3)
    z = rng.normal(size=(101, 6))
    coef = rng.normal(size=(3, 6))
    intercept = rng.normal(size=3)
    reference = linear_predictor(z, coef, intercept)
    assert reference.shape == (101, 3)
    variants = [
        (np.asfortranarray(z), coef, intercept),
        (z, np.asfortranarray(coef), intercept),
        (z, np.ascontiguousarray(coef.T).T, intercept),  # a transposed view
        (np.ascontiguousarray(np.hstack([z, z])[:, :6]), np.array(json.loads(json.dumps(coef.tolist()))), intercept),
        (z.astype(np.float64, order="F"), coef.astype(np.float64), list(intercept)),
    ]
    for zz, cc, bb in variants:
        np.testing.assert_array_equal(linear_predictor(zz, cc, bb), reference)
    for k in range(3):  # one class row at a time is the same column
        np.testing.assert_array_equal(linear_predictor(z, coef[k], intercept[k]), reference[:, k])


def test_linear_predictor_refuses_mismatched_shapes():
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="3 feature columns but 2 coefficients"):
        linear_predictor(np.zeros((4, 3)), np.zeros(2), 0.0)


# ---- the tolerance itself can fail ---------------------------------------------------------------
def test_cross_cpu_comparison_accepts_rounding_and_refuses_real_changes():
    x = 0.11818155307414781
    assert numeric.close(x, 0.11818155307414784)  # the AVX2 / AVX-512 difference seen on dev/tau
    assert numeric.close(float("nan"), float("nan"))
    assert not numeric.close(x, x + 1e-9)
    assert not numeric.close(float("nan"), 0.0)
    assert numeric.differences({"a": [1, 2.0], "b": "s"}, {"a": [1, 2.0 + 1e-15], "b": "s"}) == []
    assert numeric.differences({"n": 3}, {"n": 3.0})  # a count must stay an integer
    assert numeric.differences({"a": [1, 2]}, {"a": [1, 2, 3]})
    assert numeric.differences({"a": 1}, {"b": 1})
    assert numeric.differences({"d": [0, 1]}, {"d": [1, 1]}) == ["$.d[0]: 0 vs recorded 1"]
    with pytest.raises(AssertionError, match="1 place"):
        numeric.assert_same_numbers({"t": 0.5}, {"t": 0.5000001})


# ---- the same computations under two OpenBLAS kernels --------------------------------------------
_CROSS_KERNEL_SCRIPT = r"""
import json, sys, tempfile
from pathlib import Path
import threadpoolctl
from harness.synthetic import synthetic_outcome_table
import tests.helpers.recorded as rec

arch = sorted({i.get("architecture") for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"})
outputs = rec._builtin_outputs(synthetic_outcome_table(n_docs=60, questions_per_doc=5, seed=0))
protocol = {}
for key in rec.PREVIOUS_KEYS:
    with tempfile.TemporaryDirectory() as folder:
        res = rec._one_repeat(key, Path(folder))
        protocol[",".join(map(str, key))] = rec._output_record(res, sorted(res.metrics))
json.dump({"arch": arch, "policies": outputs, "protocol": protocol}, sys.stdout)
"""

#: OpenBLAS kernels that every x86-64 CPU can run (SSE3; AVX); the machine's own is the third run
_PORTABLE_KERNELS = ("Prescott", "Sandybridge")


def _run_under(kernel: str | None) -> dict:
    env = dict(os.environ)  # the machine's own settings stay as they are for the native run
    if kernel:
        env["OPENBLAS_CORETYPE"] = kernel
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", _CROSS_KERNEL_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _openblas_x86() -> bool:
    import threadpoolctl

    has_openblas = any(i.get("internal_api") == "openblas" for i in threadpoolctl.threadpool_info())
    return has_openblas and platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.slow
@pytest.mark.skipif(not _openblas_x86(), reason="OPENBLAS_CORETYPE selects x86-64 OpenBLAS kernels only")
def test_numbers_and_decisions_agree_across_blas_kernels():
    """Every built-in router's scores and frozen state, and protocol A's metrics, decisions and
    frozen files, computed under the machine's own kernel and two portable ones: decisions and
    counts identical, floats within the cross-CPU tolerance (and a fitted router always scores
    bit for bit like its restored copy, which _builtin_outputs asserts inside each run)."""
    runs = {kernel or "native": _run_under(kernel) for kernel in (None, *_PORTABLE_KERNELS)}
    arches = {name: tuple(run["arch"]) for name, run in runs.items()}
    assert len(set(arches.values())) >= 2, f"the kernels were not switched: {arches}"
    reference = runs.pop("native")
    for name, run in runs.items():
        numeric.assert_same_numbers(run["policies"], reference["policies"], f"policies under {name}")
        numeric.assert_same_numbers(run["protocol"], reference["protocol"], f"protocol A under {name}")
        for key, rec in run["protocol"].items():  # the decisions themselves are identical
            assert rec["decisions"]["ran_extra"] == reference["protocol"][key]["decisions"]["ran_extra"]
    assert all(math.isfinite(v) for v in reference["protocol"]["lstsq,1,0.02"]["decisions"]["score"])
