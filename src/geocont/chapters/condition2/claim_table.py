"""The chapter's claims table: the comparison on every dataset, then the direct tests of drift, one function per
claim family, and the verdict on drift."""

from __future__ import annotations

import math

import pandas as pd

from ...book.chapter import ClaimsBuilder
from ...statistics import difference
from .comparison import comparison_claims
from .drift_tests import VERDICT_OF_DRIFT, StepTest, drift_tests_found, forks_found
from .forks import OUR_TEST, fork_claims
from .mechanism import explanations
from .motion_and_spectrum import SUBSPACE_KS, function_preserving_motion, spectrum
from .runs import Results
from .settings import CHAPTER
from .spikes import SPIKE_CLAIM, spike_calibration


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims: Condition 2 on every dataset (the headline dataset's the verdicts of record), then the
    direct tests of drift on the headline dataset and the verdict on drift."""
    builder = ClaimsBuilder(CHAPTER.name, dataset=results.settings.headline)
    comparison_claims(results, builder)
    drift_claims(results, builder)
    drift_verdict_claim(results, builder)
    return builder.table()


def drift_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The direct tests of drift (headline dataset), into ``builder``: a row for each, "not tested" where its runs or
    metrics are missing. A test of drift's prediction reads "reproduced" where the test says what drift predicts."""
    tag = f"({results.settings.headline})"
    motion_claim(results, builder, tag)
    subspace_claims(results, builder, tag)
    gap_turn_claim(results, builder, tag)
    step_test_claims(results, builder, tag)
    equal_distance_claim(results, builder, tag)
    batch_dose_claim(results, builder, tag)
    fork_claims(forks_found(results), builder, tag, results.baseline)
    spike_claim(results, builder, tag)


def motion_claim(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """The logits' function-preserving motion, res-none beside res-relu (the seeds whose loss rose left out)."""
    wording = dict(
        key="function-preserving-motion",
        claim="The linear net's layers move while its function stands still",
        quantity=f"log2(weight / function motion), res-none minus res-relu {tag}",
        paper=OUR_TEST,
    )
    found = function_preserving_motion(results)
    if found is None:
        builder.not_tested(**wording, note="motion not recorded in these runs")
        return
    none, relu = found.none, found.relu
    builder.add(
        **wording,
        ours=difference(none.log2_ratio, relu.log2_ratio),
        baseline=math.nan,
        verdict=found.verdict,
        note=f"res-none {none.log2_ratio}; res-relu {relu.log2_ratio}; seeds whose loss rose, left out: "
        f"res-none {len(none.left_out)}, res-relu {len(relu.left_out)}; every seed: res-none "
        f"{none.all_seeds_log2_ratio}, res-relu {relu.all_seeds_log2_ratio}; test loss change over the "
        f"second half: res-none {none.test_loss_change}, res-relu {relu.test_loss_change}",
    )


def subspace_claims(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """Whether the linear net loses its top-k subspaces as it loses v1, for each k of :data:`SUBSPACE_KS`."""
    shape = spectrum(results)
    for k in SUBSPACE_KS:
        wording = dict(
            key=f"linear-subspace-k{k}-falls",
            claim=f"The linear net loses the continuity of its top-{k} subspace",
            quantity=f"res-none top-{k} subspace cos: peak minus final {tag}",
            paper=OUR_TEST,
        )
        if shape is None:
            builder.not_tested(**wording, note="subspace_cos not recorded in these runs")
            continue
        subspace = next(found for found in shape.subspaces if found.k == k)
        fall = subspace.none_fall
        builder.add(
            **wording,
            ours=fall.drop,
            baseline=subspace.baseline,
            verdict=fall.verdict,
            note=f"peak {fall.peak}, final {fall.final}; res-relu final {subspace.relu}",
        )


def gap_turn_claim(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """Whether v1 turns more where the spectral gap is small (a rank correlation per run)."""
    wording = dict(
        key="linear-gap-turn-correlation",
        claim="v1 turns more where the spectral gap is small",
        quantity=f"ρ(turn rate, σ1/σ2), res-none {tag}",
        paper="negative (our test)",
    )
    shape = spectrum(results)
    if shape is None:
        builder.not_tested(**wording, note="sigma2 not recorded in these runs")
        return
    builder.add(
        **wording,
        ours=shape.turn_vs_gap.rho,
        baseline=math.nan,
        verdict=shape.verdict,
        std=shape.per_run.std,
        n=shape.per_run.n,
        note=f"pooled {shape.turn_vs_gap}; per run {shape.per_run}; res-relu {shape.relu_turn_vs_gap}",
    )


def step_test_claims(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """The lr step-down and step-up tests. Where the forks ran, the step-up reads "not tested": at lr 3e-4 the frame
    is still forming at its switch, and the forks test a faster rate from the formed state."""
    tests = drift_tests_found(results)
    for key, name, claim, quantity, test in (
        (
            "lr-step-down",
            "lr step-down",
            "After an lr step-down the linear net does not recover its continuity",
            "res-none weight v1: end minus switch",
            tests.step_down,
        ),
        (
            "lr-step-up",
            "lr step-up",
            "After an lr step-up the linear net's continuity falls faster",
            "res-none weight v1 lost per 1,000 steps: after minus before the switch",
            tests.step_up,
        ),
    ):
        wording = dict(key=key, claim=claim, quantity=f"{quantity} {tag}", paper="accumulated drift (our test)")
        if test is None:
            builder.not_tested(**wording, baseline=results.baseline, note=f"{name} not run in this build")
            continue
        not_applicable = bool(results.forks) and test.name == "lr step-up"
        builder.add(
            **wording,
            ours=test.change if test.name == "lr step-down" else test.rate_change,
            baseline=results.baseline,
            verdict="not tested" if not_applicable else VERDICT_OF_DRIFT[test.drift],
            note=_step_test_note(test, not_applicable),
        )


def _step_test_note(test: StepTest, not_applicable: bool) -> str:
    reason = (
        "not applicable: at lr 3e-4 the frame is still forming at the switch (the forks test a faster rate "
        "from the formed state); "
        if not_applicable
        else ""
    )
    return (
        f"{reason}{test.reading}; at the switch {test.at_switch}, at the end {test.at_end}; fall per 1,000 steps "
        f"before {test.fall_before}, after {test.fall_after}"
    )


def equal_distance_claim(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """lr 3e-4 run to the summed learning rate of lr 1e-3 over the horizon, against the base run."""
    wording = dict(
        key="lr-equal-distance",
        claim="At equal summed learning rate, lr 3e-4 ends where lr 1e-3 ends",
        quantity=f"res-none weight v1 at the end, lr 3e-4 over 10/3 x the steps {tag}",
    )
    equal = drift_tests_found(results).equal_distance
    if equal is None:
        builder.not_tested(
            **wording, paper=OUR_TEST, baseline=results.baseline, note="lr 3e-4 long not run in this build"
        )
        return
    builder.add(
        **wording,
        paper=f"{equal.base_final.mean:.2f} (the base run)",
        ours=equal.long_final,
        baseline=results.baseline,
        verdict=equal.verdict,
        note=f"base {equal.base_final}; at equal steps {equal.at_base_steps}; "
        f"{equal.still_rising} of {equal.runs} runs still rising at the end",
    )


def batch_dose_claim(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """The largest batch's weight v1 above the smallest's."""
    claim = "A larger batch keeps more of the linear net's continuity"
    dose = drift_tests_found(results).batch
    if dose is None:
        builder.not_tested(
            key="batch-dose",
            claim=claim,
            quantity=f"res-none weight v1, batch 256 minus batch 64 {tag}",
            paper=OUR_TEST,
            baseline=results.baseline,
            note="batch tests not run in this build",
        )
        return
    largest, smallest = max(dose.finals), min(dose.finals)
    builder.add(
        key="batch-dose",
        claim=claim,
        quantity=f"res-none weight v1, batch {largest} minus batch {smallest} {tag}",
        paper=OUR_TEST,
        ours=difference(dose.finals[largest], dose.finals[smallest]),
        baseline=results.baseline,
        verdict=dose.verdict,
        note="; ".join(f"batch {size}: {value}" for size, value in dose.finals.items()),
    )


def spike_claim(results: Results, builder: ClaimsBuilder, tag: str) -> None:
    """The calibrated spike detector: res-none's spikes per run beside res-relu's."""
    wording = dict(
        key="spike-detector",
        claim="The linear net spikes no more than the baseline (a spike detector calibrated on res-relu)",
        quantity=f"loss spikes per run, res-none minus res-relu {tag}",
        paper="drift, not instability (our test)",
    )
    spikes = spike_calibration(results)
    if spikes is None or spikes.chosen is None:
        builder.not_tested(
            **wording, note="no trace in these runs" if spikes is None else "no rule passed the calibration"
        )
        return
    builder.add(
        **wording,
        ours=difference(spikes.none, spikes.relu),
        baseline=math.nan,
        verdict=SPIKE_CLAIM[spikes.reading],
        note=f"rule: {spikes.chosen.label}; res-none {spikes.none}, res-relu {spikes.relu} events per run",
    )


#: The drift explanation's verdict as a claim's.
_CLAIM_OF_EXPLANATION = {
    "supported": "reproduced",
    "not supported": "not reproduced",
    "inconclusive": "inconclusive",
    "not tested": "not tested",
}


def drift_verdict_claim(results: Results, builder: ClaimsBuilder) -> None:
    """The explanation's verdict on rotation drift (:func:`.mechanism.explanations`) as a claim: its number is the
    share of the tests that read for drift among those that read for or against it (a coin's 0.5 beside it); it adds
    no test."""
    drift = next(found for found in explanations(results) if found.name == "rotation drift")
    readings = {**drift.numbers["motions"], **drift.numbers["readings"]}
    votes = list(readings.values())
    decisive = votes.count("for") + votes.count("against")
    builder.add(
        key="rotation-drift",
        claim="The linear net loses its continuity by rotation drift",
        quantity=f"share of the direct tests for drift among those for or against ({results.settings.headline})",
        paper="the mechanism of Condition 2",
        ours=votes.count("for") / decisive if decisive else math.nan,
        baseline=0.5,
        verdict=_CLAIM_OF_EXPLANATION[drift.verdict],
        n=len(results.settings.seeds),
        note=f"motion along the symmetry votes {drift.numbers['motion_vote']}, the learning-rate and batch "
        f"tests vote {drift.numbers['tests_vote']}; instability {drift.numbers['alternatives'][0]}, "
        f"memorisation {drift.numbers['alternatives'][1]}; "
        + "; ".join(f"{name}: {vote}" for name, vote in readings.items()),
    )
