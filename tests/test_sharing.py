"""Cross-layer basis sharing at equal budgets, layer pruning and held-out evaluation (geocont.sharing)."""

import functools
import math
import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import tiny_llama_data

from geocont import sharing as sh
from geocont import sweeps
from geocont.config import TransformerShape
from geocont.layouts import PROJECTIONS
from geocont.transformer import build_llama, projection_groups

# (out, in) of the SmolLM2-135M projections (d=576, GQA k/v 192, SwiGLU 1536) and odd shapes
SHAPES = [(576, 576), (192, 576), (1536, 576), (576, 1536), (88, 32), (7, 13)]

#: A two-block Llama small enough to evaluate in milliseconds.
TINY = TransformerShape(n_layers=2, d_model=32, n_heads=2, n_kv_heads=2, ffn_dim=88, vocab_size=512, max_seq_len=64)


@pytest.mark.parametrize("n_out,n_in", SHAPES)
@pytest.mark.parametrize("group_size", [2, 3])
@pytest.mark.parametrize("budget", [0.1, 0.25, 0.5])
def test_input_and_output_sharing_get_the_same_budget(n_out, n_in, group_size, budget):
    ranks = sh.matched_ranks(n_out, n_in, group_size, budget)
    counts = {s: sh.sharing_parameters(n_out, n_in, group_size, s, r) for s, r in ranks.items()}
    target = budget * group_size * n_out * n_in
    largest_cost = max(sh.rank_cost(n_out, n_in, group_size, s) for s in ("input", "output"))
    assert abs(counts["input"] - counts["output"]) < largest_cost
    if target >= largest_cost:  # both fit: neither exceeds the budget by more than the exact-grid slack
        assert counts["input"] <= 1.1 * target and counts["output"] <= 1.1 * target
    assert counts["none"] <= max(target, sh.rank_cost(n_out, n_in, group_size, "none"))


@pytest.mark.parametrize("n_out,n_in", [(576, 576), (192, 576), (1536, 576), (576, 1536)])
def test_smollm2_shapes_have_exactly_equal_budgets(n_out, n_in):
    for budget in (0.125, 0.25, 0.5):
        ranks = sh.matched_ranks(n_out, n_in, 2, budget)
        assert sh.sharing_parameters(n_out, n_in, 2, "input", ranks["input"]) == sh.sharing_parameters(
            n_out, n_in, 2, "output", ranks["output"]
        )


@pytest.mark.parametrize("n_out,n_in", [(12, 12), (6, 10), (10, 6)])
@pytest.mark.parametrize("sharing", sh.SHARINGS)
def test_full_rank_reconstructs_exactly(n_out, n_in, sharing):
    torch.manual_seed(0)
    weights = [torch.randn(n_out, n_in) for _ in range(3)]
    rank = sh.max_rank(n_out, n_in, 3, sharing)
    approx = sh.shared_approximation(weights, sharing, rank)
    for w, a in zip(weights, approx):
        torch.testing.assert_close(a, w, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(sh.shared_approximation(weights, sharing, 1)[0], weights[0], atol=1e-2)


def test_shared_bases_are_the_right_spaces():
    """Matrices that share a row space are exact under input-space sharing at that rank, not output."""
    torch.manual_seed(1)
    basis = torch.linalg.qr(torch.randn(20, 3)).Q  # a 3-dim subspace of the input space
    weights = [torch.randn(15, 3) @ basis.T for _ in range(2)]
    exact_in = sh.shared_approximation(weights, "input", 3)
    shared_out = sh.shared_approximation(weights, "output", 3)
    assert all(torch.allclose(a, w, atol=1e-5) for a, w in zip(exact_in, weights))
    assert not all(torch.allclose(a, w, atol=1e-3) for a, w in zip(shared_out, weights))
    # the transposed problem is exact in the output space
    transposed = [w.T.contiguous() for w in weights]
    assert all(
        torch.allclose(a, w, atol=1e-5) for a, w in zip(sh.shared_approximation(transposed, "output", 3), transposed)
    )


def test_sharing_error_falls_with_rank_and_plan_counts_parameters():
    torch.manual_seed(2)
    weights = [torch.randn(16, 24) for _ in range(4)]
    errors = [sh.plan_sharing(weights, "q_proj", range(4), 2, "input", b)[0].relative_error for b in (0.1, 0.3, 0.6)]
    assert errors[0] > errors[1] > errors[2] > 0
    plan, approximations = sh.plan_sharing(weights, "q_proj", [0, 1, 2], 2, "output", 0.25)
    assert sorted(approximations) == [0, 1, 2] and len(plan.ranks) == 2  # groups [0, 1] and [2]
    assert plan.dense_parameters == 3 * 16 * 24
    assert plan.parameters == plan.ranks[0] * (16 + 2 * 24) + plan.ranks[1] * (16 + 24)


def test_bad_input_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="valid choices: input, output, none"):
        sh.shared_approximation([torch.ones(2, 2)], "diagonal", 1)
    with pytest.raises(ValueError, match="same shape"):
        sh.shared_approximation([torch.ones(2, 2), torch.ones(3, 2)], "input", 1)
    with pytest.raises(ValueError, match="valid choices: q_proj"):
        sh.check_projections(["query"])


@pytest.fixture(scope="module")
def tiny_model():
    return build_llama(TINY, seed=0).eval()


def test_dropping_nothing_leaves_the_loss_unchanged_and_dropping_a_block_changes_it(tiny_model):
    windows = torch.randint(0, TINY.vocab_size, (3, 16), generator=torch.Generator().manual_seed(0))
    base = sh.window_nll(tiny_model, windows)
    with sh.without_layer(tiny_model, None):
        torch.testing.assert_close(sh.window_nll(tiny_model, windows), base, rtol=0, atol=0)
    with sh.without_layer(tiny_model, 1):
        assert len(tiny_model.model.layers) == 1
        dropped = sh.window_nll(tiny_model, windows)
    assert not torch.allclose(dropped, base)
    assert len(tiny_model.model.layers) == 2 and tiny_model.config.num_hidden_layers == 2
    torch.testing.assert_close(sh.window_nll(tiny_model, windows), base, rtol=0, atol=0)
    # the same as a model built with that block removed for good
    manual = build_llama(TINY, seed=0).eval()
    manual.model.layers = torch.nn.ModuleList([manual.model.layers[0]])
    manual.config.num_hidden_layers = 1
    torch.testing.assert_close(sh.window_nll(manual, windows), dropped)
    with pytest.raises(ValueError, match="out of range"):
        with sh.without_layer(tiny_model, 5):
            pass


def test_window_nll_matches_the_models_own_loss(tiny_model):
    windows = torch.randint(0, TINY.vocab_size, (4, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = float(tiny_model(input_ids=windows, labels=windows).loss)
    assert math.isclose(float(sh.window_nll(tiny_model, windows, batch_size=3).mean()), expected, rel_tol=1e-5)


def test_replaced_weights_are_restored_and_full_rank_changes_nothing(tiny_model):
    windows = torch.randint(0, TINY.vocab_size, (2, 16), generator=torch.Generator().manual_seed(2))
    base = sh.window_nll(tiny_model, windows)
    weights = [p.data for p in projection_groups(tiny_model)["gate_proj"]]
    originals = [w.clone() for w in weights]
    n_out, n_in = weights[0].shape
    exact = dict(enumerate(sh.shared_approximation(weights, "input", sh.max_rank(n_out, n_in, 2, "input"))))
    with sh.replaced_weights(tiny_model, "gate_proj", exact):
        torch.testing.assert_close(sh.window_nll(tiny_model, windows), base, atol=1e-4, rtol=1e-4)
    _, low = sh.plan_sharing(weights, "gate_proj", [0, 1], 2, "output", 0.1)
    with sh.replaced_weights(tiny_model, "gate_proj", low):
        assert not torch.allclose(sh.window_nll(tiny_model, windows), base)
    for p, original in zip(projection_groups(tiny_model)["gate_proj"], originals):
        assert torch.equal(p.data, original)


def test_layer_continuity_uses_pairs_touching_each_block(tiny_model):
    pairs = sh.continuity_pairs(tiny_model)
    assert set(pairs["projection"]) == set(PROJECTIONS) and set(pairs["layer"]) == {0}
    per_layer = sh.per_layer_continuity(pairs)
    assert list(per_layer["layer"]) == [0, 1]
    assert np.allclose(per_layer["continuity"], pairs["value"].mean())
    three = pd.DataFrame(dict(projection="q_proj", space="input", layer=[0, 1], value=[0.2, 0.6]))
    assert np.allclose(sh.per_layer_continuity(three)["continuity"], [0.2, 0.4, 0.6])


def test_distant_order_pairs_far_layers_and_adjacent_sharing_wins_on_continuous_weights():
    assert sh.distant_order(range(30), 2)[:4] == [0, 15, 1, 16]
    assert sh.distant_order(range(4), 2) == [0, 2, 1, 3]
    assert sorted(sh.distant_order(range(7), 3)) == list(range(7))
    # a slowly rotating input basis: adjacent layers are similar, distant ones are not
    torch.manual_seed(3)
    start, end = torch.linalg.qr(torch.randn(24, 24)).Q, torch.linalg.qr(torch.randn(24, 24)).Q
    weights = [torch.randn(16, 4) @ ((1 - t) * start[:, :4] + t * end[:, :4]).T for t in torch.linspace(0, 1, 8)]
    adjacent = sh.plan_sharing(weights, "q_proj", range(8), 2, "input", 0.2)[0]
    distant = sh.plan_sharing(weights, "q_proj", sh.distant_order(range(8), 2), 2, "input", 0.2)[0]
    assert adjacent.parameters == distant.parameters and adjacent.relative_error < distant.relative_error


def test_experiments_are_cached_per_configuration_and_load_the_model_only_on_a_miss():
    loads = []

    def load():
        loads.append(1)
        ids = torch.randint(0, TINY.vocab_size, (400,), generator=torch.Generator().manual_seed(0))
        return build_llama(TINY, seed=0).eval(), ids

    def subject():
        return sh.Subject("tiny", {"test": "tiny"}, load, window_length=16)

    sharing = sh.sharing_results(subject(), ["q_proj", "down_proj"], [0.25, 0.5], 2, n_windows=3, progress=False)
    assert len(loads) == 1 and len(sharing) == 2 * 3 * 2 * 3
    assert np.allclose(sharing["loss_increase"], sharing["nll"] - sharing["base_nll"])
    square = sharing[sharing["projection"] == "q_proj"].groupby("sharing")["parameters"].first()
    assert square["input"] == square["output"]
    pruning = sh.pruning_results(subject(), n_windows=3, progress=False)
    assert len(loads) == 2 and sorted(pruning["layer"].unique()) == [0, 1]
    assert pruning["continuity"].notna().all()
    again = sh.sharing_results(subject(), ["q_proj", "down_proj"], [0.25, 0.5], 2, n_windows=3, progress=False)
    sh.pruning_results(subject(), n_windows=3, progress=False)
    assert len(loads) == 2  # everything came from the cache
    pd.testing.assert_frame_equal(again, sharing)
    sh.sharing_results(subject(), ["q_proj"], [0.3], 2, n_windows=3, progress=False)
    assert len(loads) == 3  # a new budget is a new configuration
    errors = sharing.groupby(["projection", "sharing", "budget"])["relative_error"].first().unstack("budget")
    assert (errors[0.5] < errors[0.25]).all()  # a larger budget reconstructs every scheme better


def _sweep_tables(subject, executor: str) -> list[pd.DataFrame]:
    """The compression chapter's jobs on one subject: base and continuity first, then the rest."""
    sweeps.run_jobs([sh.base_job(subject, 3), sh.continuity_job(subject)], executor=executor, progress=False)
    jobs = [
        sh.sharing_job(subject, projection, [0.25, 0.5], 2, 3, layers=[0, 1, 2]) for projection in ("q_proj", "o_proj")
    ]
    jobs += [sh.pruning_job(subject, 3), sh.grouping_job(subject, ["q_proj", "o_proj"], 0.25, 2, [0, 1, 2])]
    return sweeps.run_jobs(jobs, executor=executor, progress=False)


@pytest.mark.slow
def test_compression_jobs_give_the_same_tables_under_serial_and_local_workers(tmp_path, monkeypatch):
    subject = sh.Subject("tiny", {"test": "tiny-3"}, functools.partial(tiny_llama_data, 3), window_length=16)
    assert pickle.loads(pickle.dumps(subject)).identity == subject.identity
    tables = {}
    for executor in ("serial", "local:2"):
        monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / executor.replace(":", "-")))
        tables[executor] = _sweep_tables(subject, executor)
        assert pickle.loads(pickle.dumps(subject))._loaded is None  # a worker loads the model itself
    for serial, local in zip(tables["serial"], tables["local:2"]):
        pd.testing.assert_frame_equal(local, serial, check_exact=True)
    sharing, pruning, grouping = pd.concat(tables["serial"][:2], ignore_index=True), *tables["serial"][2:]
    assert len(sharing) == 2 * 3 * 2 * 3 and sorted(pruning["layer"].unique()) == [0, 1, 2]
    assert set(grouping["grouping"]) == {"adjacent", "distant"}
    # the same numbers as the functions called in this process (in a third cache)
    monkeypatch.setenv("GEOCONT_CACHE_DIR", str(tmp_path / "direct"))
    direct = sh.sharing_results(subject, ["q_proj", "o_proj"], [0.25, 0.5], 2, 3, layers=[0, 1, 2], progress=False)
    pd.testing.assert_frame_equal(direct, sharing, check_exact=True)
    pd.testing.assert_frame_equal(sh.pruning_results(subject, 3, progress=False), pruning, check_exact=True)


def test_a_sharing_jobs_key_holds_its_whole_configuration():
    subject = sh.Subject("tiny", {"test": "tiny-3"}, functools.partial(tiny_llama_data, 3), window_length=16)
    job = sh.sharing_job(subject, "q_proj", [0.25, 0.5], 2, 3, layers=[0, 1, 2])
    assert job.config["budgets"] == [0.25, 0.5] and job.config["sharings"] == list(sh.SHARINGS)
    keys = {
        sweeps.Job.key_config(j).__repr__()
        for j in (
            job,
            sh.sharing_job(subject, "q_proj", [0.25], 2, 3, layers=[0, 1, 2]),
            sh.sharing_job(subject, "q_proj", [0.25, 0.5], 2, 4, layers=[0, 1, 2]),
            sh.sharing_job(subject, "q_proj", [0.25, 0.5], 2, 3, layers=[0, 1]),
            sh.sharing_job(subject, "o_proj", [0.25, 0.5], 2, 3, layers=[0, 1, 2]),
        )
    }
    assert len(keys) == 5
    # the single-configuration entries keep their keys: the base job's is the one base_nll always used
    assert sh.base_job(subject, 3).config == {
        "subject": {"test": "tiny-3"},
        "experiment": "base",
        "n_windows": 3,
        "length": 16,
    }
