"""The chapter's claims table: the comparison on every dataset, then the direct tests of drift, one function per
claim family, and the verdict on drift."""

from __future__ import annotations

import math

import pandas as pd

from ...book.chapter import ClaimsBuilder
from ...statistics import difference
from .comparison import comparison_claims
from .drift_tests import BATCH_TESTS, NOT_TALLIED, VERDICT_OF_DRIFT, counts, drift_tests_found, forks_found
from .forks import fork_claims
from .formatting import PROSE
from .mechanism import explanations
from .motion_and_spectrum import SUBSPACE_KS, function_preserving_motion, spectrum
from .runs import Results
from .settings import CHAPTER, DRIFT_TESTS
from .spikes import SPIKE_CLAIM, spike_calibration

#: The claims this chapter shows but does not count: those the residual-condition chapter (mlp_conditions) owns
#: and judges on the same runs by the same rule (its names for them: ``nores-*``, ``linear-*``,
#: ``res-none-rise-then-collapse``, ``res-relu-above-linear``), and its Res+Radial variant, whose paper number is
#: judged there on the paper's Res+Radial (``radial-weight-v1``).
NOT_COUNTED = {
    **{
        name: "judged in mlp_conditions on the same runs"
        for name in (
            "linear-weight-v1",
            "linear-gradient-v1",
            "nores-gradient-v1",
            "nores-weight-v1",
            "linear-rise-then-fall",
            "relu-above-linear",
        )
    },
    "radial-tau-low": "a variant of Res+Radial (res-radial-tau); the paper's Res+Radial is judged in mlp_conditions",
}


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims: Condition 2 on every dataset (the headline dataset's the verdicts of record), then the
    direct tests of drift on the headline dataset and the verdict on drift."""
    builder = ClaimsBuilder(CHAPTER.name, dataset=results.settings.headline, prose=PROSE, not_counted=NOT_COUNTED)
    comparison_claims(results, builder)
    drift_claims(results, builder)
    drift_verdict_claim(results, builder)
    return builder.table()


def drift_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The direct tests of drift (headline dataset), into ``builder``: a row for each, "not tested" where its runs or
    metrics are missing. A test of drift's prediction reads "reproduced" where the test says what drift predicts."""
    headline = results.settings.headline
    motion_claim(results, builder, headline)
    subspace_claims(results, builder, headline)
    gap_turn_claim(results, builder, headline)
    step_test_claims(results, builder, headline)
    equal_distance_claim(results, builder, headline)
    batch_dose_claim(results, builder, headline)
    fork_claims(forks_found(results), builder, headline, results.baseline)
    spike_claim(results, builder, headline)


def motion_claim(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """The logits' function-preserving motion, res-none beside res-relu (the seeds whose loss rose left out)."""
    key = "function-preserving-motion"
    found = function_preserving_motion(results)
    if found is None:
        builder.not_tested(key=key, reason="motion-not-recorded", fill={"headline": headline})
        return
    none, relu = found.none, found.relu
    builder.add(
        key=key,
        ours=difference(none.log2_ratio, relu.log2_ratio),
        baseline=math.nan,
        verdict=found.verdict,
        fill={
            "headline": headline,
            "none": none.log2_ratio,
            "relu": relu.log2_ratio,
            "none_left_out": len(none.left_out),
            "relu_left_out": len(relu.left_out),
            "none_all": none.all_seeds_log2_ratio,
            "relu_all": relu.all_seeds_log2_ratio,
            "none_loss": none.test_loss_change,
            "relu_loss": relu.test_loss_change,
        },
    )


def subspace_claims(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """Whether the linear net loses its top-k subspaces as it loses v1, for each k of :data:`SUBSPACE_KS`."""
    shape = spectrum(results)
    for k in SUBSPACE_KS:
        key, fill = f"linear-subspace-k{k}-falls", {"k": k, "headline": headline}
        if shape is None:
            builder.not_tested(key=key, template="linear-subspace-falls", reason="subspace-not-recorded", fill=fill)
            continue
        subspace = next(found for found in shape.subspaces if found.k == k)
        fall = subspace.none_fall
        builder.add(
            key=key,
            template="linear-subspace-falls",
            ours=fall.drop,
            baseline=subspace.baseline,
            verdict=fall.verdict,
            fill={**fill, "peak": fall.peak, "final": fall.final, "relu": subspace.relu},
        )


def gap_turn_claim(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """Whether v1 turns more where the spectral gap is small (a rank correlation per run)."""
    key = "linear-gap-turn-correlation"
    shape = spectrum(results)
    if shape is None:
        builder.not_tested(key=key, reason="sigma2-not-recorded", fill={"headline": headline})
        return
    builder.add(
        key=key,
        ours=shape.turn_vs_gap.rho,
        baseline=math.nan,
        verdict=shape.verdict,
        std=shape.per_run.std,
        n=shape.per_run.n,
        fill={
            "headline": headline,
            "pooled": shape.turn_vs_gap,
            "per_run": shape.per_run,
            "relu": shape.relu_turn_vs_gap,
        },
    )


def step_test_claims(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """The lr step-down and step-up tests. Where the forks ran, the step-up reads "not tested": at lr 3e-4 the frame
    is still forming at its switch, and the forks test a faster rate from the formed state (its own wording,
    ``lr-step-up-not-applicable``)."""
    tests = drift_tests_found(results)
    for key, name, test in (
        ("lr-step-down", "lr step-down", tests.step_down),
        ("lr-step-up", "lr step-up", tests.step_up),
    ):
        if test is None:
            builder.not_tested(
                key=key, reason="not-run", fill={"headline": headline, "test": name}, baseline=results.baseline
            )
            continue
        not_applicable = bool(results.forks) and test.name == "lr step-up"
        builder.add(
            key=key,
            template="lr-step-up-not-applicable" if not_applicable else None,
            ours=test.change if test.name == "lr step-down" else test.rate_change,
            baseline=results.baseline,
            verdict="not tested" if not_applicable else VERDICT_OF_DRIFT[test.drift],
            fill={
                "headline": headline,
                "reading": test.reading,
                "at_switch": test.at_switch,
                "at_end": test.at_end,
                "fall_before": test.fall_before,
                "fall_after": test.fall_after,
            },
        )


def equal_distance_claim(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """lr 3e-4 run to the summed learning rate of lr 1e-3 over the horizon, against the base run."""
    key = "lr-equal-distance"
    equal = drift_tests_found(results).equal_distance
    if equal is None:
        builder.not_tested(
            key=key,
            reason="not-run",
            fill={
                "headline": headline,
                "paper": PROSE.choose("equal-distance-paper", "our-test"),
                "test": "lr 3e-4 long",
            },
            baseline=results.baseline,
        )
        return
    builder.add(
        key=key,
        ours=equal.long_final,
        baseline=results.baseline,
        verdict=equal.verdict,
        fill={
            "headline": headline,
            "paper": PROSE.choose("equal-distance-paper", "our-test"),
            "base": equal.base_final,
            "at_base_steps": equal.at_base_steps,
            "still_rising": equal.still_rising,
            "runs": equal.runs,
        },
    )


def batch_dose_claim(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """The largest batch's weight v1 above the smallest's."""
    key = "batch-dose"
    dose = drift_tests_found(results).batch
    if dose is None:
        sizes = [DRIFT_TESTS[name]["batch_size"] for name in BATCH_TESTS]
        fill = {"headline": headline, "largest": max(sizes), "smallest": min(sizes)}
        builder.not_tested(key=key, reason="batch-not-run", fill=fill, baseline=results.baseline)
        return
    largest, smallest = max(dose.finals), min(dose.finals)
    builder.add(
        key=key,
        ours=difference(dose.finals[largest], dose.finals[smallest]),
        baseline=math.nan,  # a difference of two measured conditions: no random level in the verdict
        verdict=dose.verdict,
        fill={
            "headline": headline,
            "largest": largest,
            "smallest": smallest,
            "finals": "; ".join(
                PROSE.render("batch-final", size=size, value=value) for size, value in dose.finals.items()
            ),
        },
    )


def spike_claim(results: Results, builder: ClaimsBuilder, headline: str) -> None:
    """The calibrated spike detector: res-none's spikes per run beside res-relu's."""
    key = "spike-detector"
    spikes = spike_calibration(results)
    if spikes is None or spikes.chosen is None:
        reason = "no-trace" if spikes is None else "no-spike-rule"
        builder.not_tested(key=key, reason=reason, fill={"headline": headline})
        return
    builder.add(
        key=key,
        ours=difference(spikes.none, spikes.relu),
        baseline=math.nan,
        verdict=SPIKE_CLAIM[spikes.reading],
        fill={"headline": headline, "rule": spikes.chosen.label, "none": spikes.none, "relu": spikes.relu},
    )


#: The drift explanation's verdict as a claim's.
_CLAIM_OF_EXPLANATION = {
    "supported": "reproduced",
    "not supported": "not reproduced",
    "inconclusive": "inconclusive",
    "not tested": "not tested",
}


def drift_verdict_claim(results: Results, builder: ClaimsBuilder) -> None:
    """The explanation's verdict on rotation drift (:func:`.mechanism.explanations`) as a claim: its number is how
    many tallied tests read for drift, of ``n`` tallied tests (the counts each way in its quantity, each grouping's
    verdict in its note; no coin beside it: the tests share runs and are not exchangeable); it adds no test."""
    drift = next(found for found in explanations(results) if found.name == "rotation drift")
    readings = {**drift.numbers["motions"], **drift.numbers["readings"]}
    tallied = counts(readings)
    instability, memorisation = drift.numbers["alternatives"]
    builder.add(
        key="rotation-drift",
        ours=float(tallied["for"]) if readings else math.nan,
        baseline=math.nan,
        verdict=_CLAIM_OF_EXPLANATION[drift.verdict],
        n=len(readings),
        unit="tallied tests",
        fill={
            "headline": results.settings.headline,
            "motion_vote": drift.numbers["motion_vote"],
            "tests_vote": drift.numbers["tests_vote"],
            "n_for": tallied["for"],
            "n_against": tallied["against"],
            "n_neither": tallied["neither"],
            "instability": instability,
            "memorisation": memorisation,
            "readings": "; ".join(PROSE.render("drift-vote", name=name, vote=vote) for name, vote in readings.items()),
            "groupings": "; ".join(
                PROSE.render("grouping-verdict", grouping=grouping, verdict=verdict)
                for grouping, verdict in drift.numbers["groupings"].items()
            ),
            "not_tallied": "; ".join(f"{name} ({why})" for name, why in NOT_TALLIED.items()),
        },
    )
