"""benchmarks/compare_precision.py: the bf16-against-fp32 comparison, its rule, on a tiny setting."""

import importlib.util
from pathlib import Path

import pytest
from helpers import synthetic

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_precision.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("compare_precision", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rule_is_the_larger_of_0_03_and_the_pooled_sd(script):
    quantities = {"weight v1": ("weight_cos", "input", 1)}
    fp32 = synthetic({("res-relu", 0): [0.50], ("res-relu", 1): [0.52], ("res-none", 0): [0.5], ("res-none", 1): [0.5]})

    def verdicts(bf16_values):
        bf16 = synthetic(bf16_values)
        rows = script.comparison_rows("m", {"fp32": fp32, "bf16-autocast": bf16}, quantities, ("res-relu", "res-none"))
        return {row["group"]: (row["verdict"], round(row["difference"], 6)) for row in rows}

    # res-relu: sd 0.014 in fp32, so 0.03 rules; res-none: no spread at all, 0.03 rules too
    assert verdicts(
        {("res-relu", 0): [0.529], ("res-relu", 1): [0.549], ("res-none", 0): [0.54], ("res-none", 1): [0.54]}
    ) == {"res-relu": ("within", 0.029), "res-none": ("OUTSIDE", 0.04)}
    # a wide seed spread widens the tolerance beyond 0.03
    wide = {("res-relu", 0): [0.40], ("res-relu", 1): [0.80], ("res-none", 0): [0.5], ("res-none", 1): [0.5]}
    assert verdicts(wide)["res-relu"][0] == "within"


def test_a_tiny_comparison_runs_both_precisions_and_writes_a_verdict_per_quantity(script):
    frame = script.compare("smoke", seeds=2, lm_seeds=2, executor="serial", progress=False)
    mlp, lm = (frame[frame["model"].str.startswith(name)] for name in ("MLP", "transformer"))
    assert len(mlp) == len(script.MLP_CONDITIONS) * len(script.MLP_QUANTITIES)
    assert len(lm) == len(script.LM_VARIANTS) * len(script.LM_QUANTITIES)
    assert (frame["n"] == 2).all() and set(frame["verdict"]) <= {"within", "OUTSIDE"}
    assert ((frame["difference"].abs() <= frame["tolerance"]) == (frame["verdict"] == "within")).all()
    assert (frame["difference"] != 0).any()  # the two precisions are different runs
    text = script.markdown(frame)
    assert text.count("\n- ") == 2 and "| MLP 16x32" in text
