"""What the Condition-2 chapter shows of the direct tests of drift: the motion, the spectrum, the learning-rate
and batch tests, the forks and the calibrated spike detector."""

from __future__ import annotations

import math

import pandas as pd

from ... import instability
from ...statistics import DIFFERENCE_MARGIN, per_run
from .compute import (
    CALIBRATION_EVENTS_PER_RUN,
    MOTION_LOG2_MARGIN,
    SPIKE_EXCESS,
    STILL_RISING_SHARE,
    SUBSPACE_KS,
    Results,
    cosine_course,
    cosine_lr,
    drift_tests_found,
    forks_found,
    function_preserving_motion,
    gap_per_run,
    spectrum,
    spike_calibration,
    switch_step,
)
from .formatting import PROSE, band, condition_colours, fmt, show_note, sig


def motion_figure(results: Results) -> None:
    """The weights' and the logits' relative change per snapshot over training, res-none beside res-relu."""
    found = function_preserving_motion(results)
    if found is None:
        return show_note(PROSE.choose("motion", "not-recorded"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.comparison[results.settings.headline]
    colours = condition_colours()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True, sharey=True)
    for ax, metric, title in zip(
        axes,
        ("step_change", "logit_change"),
        ("weights: ‖W(t) − W(t′)‖ / ‖W(t′)‖, layer mean", "function: the probe batch's logits"),
    ):
        for condition in ("res-none", "res-relu"):
            frame = per_run(table[table["condition"] == condition], metric)
            band(ax, frame[frame["step"] > 0], colours[condition], condition)
        ax.axvspan(results.settings.base.steps / 2, results.settings.base.steps, color="0.92", zorder=0)
        ax.set_yscale("log")
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("training step")
    linear = table[table["condition"] == "res-none"]
    if found.none.product is not None:
        product = per_run(linear, "product_change")
        band(axes[1], product[product["step"] > 0], colours["res-none"], "res-none, P = ∏(I + W_l)", linestyle="--")
    axes[0].set_ylabel("relative change since the previous snapshot")
    plotting.figure_legend(fig, axes[1], ncol=3)
    show_figure(
        fig,
        "c2-motion",
        PROSE.render(
            "motion-caption",
            headline=results.settings.headline,
            none_ratio=found.none.log2_ratio,
            relu_ratio=found.relu.log2_ratio,
        ),
    )


def motion_sentence(results: Results) -> str:
    """The motion test's numbers and verdict (:func:`.compute.function_preserving_motion`)."""
    found = function_preserving_motion(results)
    if found is None:
        return PROSE.choose("motion", "not-recorded")
    none, relu = found.none, found.relu
    product = "" if none.product is None else PROSE.render("motion-product", product=sig(none.product))
    return PROSE.choose(
        "motion",
        "read",
        headline=results.settings.headline,
        none_weights=sig(none.weights),
        none_function=sig(none.function),
        product=product,
        relu_weights=sig(relu.weights),
        relu_function=sig(relu.function),
        none_ratio=none.log2_ratio,
        relu_ratio=relu.log2_ratio,
        margin=MOTION_LOG2_MARGIN,
        verdict=found.verdict,
        none_loss=sig(none.test_loss_change),
        relu_loss=sig(relu.test_loss_change),
        none_left_out=len(none.left_out),
        relu_left_out=len(relu.left_out),
        rise_factor=instability.LOSS_RISE_FACTOR,
        none_seeds=none.all_seeds_log2_ratio.n,
        relu_seeds=relu.all_seeds_log2_ratio.n,
        none_all=none.all_seeds_log2_ratio,
        relu_all=relu.all_seeds_log2_ratio,
    )


def spectrum_figure(results: Results) -> None:
    """The layer-median spectral gap over training, and v1 beside the top-2 and top-4 subspaces per condition."""
    found = spectrum(results)
    if found is None:
        return show_note(PROSE.choose("spectrum", "not-recorded"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.comparison[results.settings.headline]
    colours = condition_colours()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    gaps = gap_per_run(table)
    for condition in ("res-none", "res-relu"):
        band(axes[0], gaps[gaps["condition"] == condition], colours[condition], condition)
    axes[0].set_yscale("log")
    axes[0].set_title("spectral gap", fontsize="medium")
    axes[0].set_ylabel("σ1 / σ2, median over layers")
    axes[0].legend(fontsize="small")
    shades = plotting.palette(["v1", *(f"top-{k}" for k in SUBSPACE_KS)])
    for ax, condition in zip(axes[1:], ("res-none", "res-relu")):
        one = table[table["condition"] == condition]
        band(ax, per_run(one, "weight_cos", "input", 1), shades["v1"], "v1")
        ax.axhline(results.baseline, color=shades["v1"], linestyle="--", linewidth=0.9)
        for sub in found.subspaces:
            band(ax, per_run(one, "subspace_cos", "input", sub.k), shades[f"top-{sub.k}"], f"top-{sub.k} subspace")
            ax.axhline(sub.baseline, color=shades[f"top-{sub.k}"], linestyle="--", linewidth=0.9)
        ax.set_ylim(0, 1)
        ax.set_title(condition, fontsize="medium")
        ax.set_ylabel("adjacent layers' cos, pair mean")
    for ax in axes:
        ax.set_xlabel("training step")
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, bbox_to_anchor=(0.6, -0.02))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    show_figure(
        fig,
        "c2-spectrum",
        PROSE.render("spectrum-caption", headline=results.settings.headline, baseline=results.baseline),
    )


def spectrum_sentence(results: Results) -> str:
    """Whether the linear net loses its top subspaces or only v1, and the turn rate against the gap."""
    found = spectrum(results)
    if found is None:
        return PROSE.choose("spectrum", "not-recorded")
    subspaces = "; ".join(
        PROSE.render(
            "spectrum-subspace",
            k=s.k,
            none=s.none,
            peak=s.none_fall.peak,
            fall=s.none_fall.verdict,
            relu=s.relu,
            baseline=s.baseline,
        )
        for s in found.subspaces
    )
    return PROSE.choose(
        "spectrum",
        "read",
        headline=results.settings.headline,
        none_gap=sig(found.gap["res-none"]),
        relu_gap=sig(found.gap["res-relu"]),
        v1_peak=found.v1_fall.peak,
        v1_final=found.v1_fall.final,
        v1_fall=found.v1_fall.verdict,
        subspaces=subspaces,
        reading=PROSE.choose("spectrum-reading", found.reading),
        correlation=found.turn_vs_gap,
        per_run=found.per_run,
        relu_correlation=found.relu_turn_vs_gap,
        verdict=found.verdict,
    )


def _drift_panels(tests) -> list[str]:
    """The names of the lr and batch tests that ran, in the figure's order."""
    return [
        name
        for name, test in (
            ("lr step-down", tests.step_down),
            ("lr step-up", tests.step_up),
            ("lr 3e-4 long", tests.equal_distance),
            ("batch dose", tests.batch),
        )
        if test is not None
    ]


def _batch_panel(ax, batch, colour) -> None:
    """The batch dose: final weight v1 (mean and sd over seeds) per batch size."""
    sizes = sorted(batch.finals)
    means = [batch.finals[s].mean for s in sizes]
    sds = [0.0 if math.isnan(batch.finals[s].std) else batch.finals[s].std for s in sizes]
    ax.errorbar(sizes, means, yerr=sds, marker="o", color=colour, capsize=3, label="test")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("batch size (same lr and steps)")
    ax.set_ylabel("weight v1 |cos| at the end")


def _summed_lr_panel(ax, *, base: pd.DataFrame, frame: pd.DataFrame, found, colours) -> None:
    """``lr 3e-4 long`` beside the base run on a summed-lr axis, the base run's end marked."""
    band(
        ax,
        base.assign(summed=base["step"] * found.base_lr),
        colours["base (lr 1e-3)"],
        "base (lr 1e-3)",
        x="summed",
    )
    band(ax, frame.assign(summed=frame["step"] * found.lr), colours["test"], "test", x="summed")
    ax.axvline(found.base_lr * found.base_steps, color="0.4", linestyle=":", linewidth=1)
    ax.set_xlabel("summed learning rate (lr × steps)")


def _step_panel(ax, *, base: pd.DataFrame, frame: pd.DataFrame, switch: int, colours) -> None:
    """A step test over steps beside the base run, the switch marked."""
    band(ax, base, colours["base (lr 1e-3)"], "base (lr 1e-3)")
    band(ax, frame, colours["test"], "test")
    ax.axvline(switch, color="0.4", linestyle=":", linewidth=1)
    ax.set_xlabel("training step")


def drift_tests_figure(results: Results) -> None:
    """Weight v1 of the linear net under each lr and batch test that ran: the step tests over steps (the switch
    marked, the base run beside them), ``lr 3e-4 long`` and the base run on a summed-lr axis, and the batch dose."""
    tests = drift_tests_found(results)
    panels = _drift_panels(tests)
    if not panels:
        return show_note(PROSE.choose("drift-tests", "none"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    base_table = results.interventions["adam"]
    base = per_run(base_table[base_table["condition"] == "res-none"], "weight_cos", "input", 1)
    colours = plotting.palette(["base (lr 1e-3)", "test"])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4), squeeze=False)
    for ax, name in zip(axes[0], panels):
        if name == "batch dose":
            _batch_panel(ax, tests.batch, colours["test"])
        else:
            frame = per_run(results.drift_tests[name], "weight_cos", "input", 1)
            if name == "lr 3e-4 long":
                _summed_lr_panel(ax, base=base, frame=frame, found=tests.equal_distance, colours=colours)
            else:
                switch = switch_step(results.settings.base.steps)
                _step_panel(ax, base=base, frame=frame, switch=switch, colours=colours)
            ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
        plotting.draw_baseline(ax, results.baseline)
        ax.set_ylim(0, 1)
        ax.set_title(name, fontsize="medium")
    plotting.figure_legend(fig, axes[0][0], ncol=3)
    show_figure(
        fig,
        "c2-drift-tests",
        PROSE.render("drift-tests-caption", headline=results.settings.headline, tests=", ".join(panels)),
    )


def cosine_figure(results: Results) -> None:
    """The cosine intervention: weight v1 over steps beside its learning rate, so that one sees when the fall slows."""
    found = cosine_course(results)
    if found is None:
        return show_note(PROSE.choose("cosine", "not-run"))
    import matplotlib.pyplot as plt

    from ... import plotting
    from ...book.figures import show_figure

    table = results.interventions["cosine"]
    colours = condition_colours()
    fig, ax = plt.subplots(figsize=(8, 4))
    for condition in ("res-none", "res-relu"):
        band(
            ax, per_run(table[table["condition"] == condition], "weight_cos", "input", 1), colours[condition], condition
        )
    plotting.draw_baseline(ax, results.baseline)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("weight v1 |cos|, mean over layer pairs")
    twin = ax.twinx()
    steps = sorted(table["step"].unique())
    twin.plot(steps, cosine_lr(results, steps), color="0.45", linestyle=":", label="learning rate (right)")
    twin.set_ylabel("learning rate")
    twin.set_ylim(bottom=0)
    twin.grid(False)
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize="small", loc="upper right")
    fig.tight_layout()
    show_figure(
        fig,
        "c2-cosine",
        PROSE.render(
            "cosine-caption",
            headline=results.settings.headline,
            half=results.settings.base.steps // 2,
            none_before=sig(found.fall_before["res-none"]),
            none_after=sig(found.fall_after["res-none"]),
            relu_before=sig(found.fall_before["res-relu"]),
            relu_after=sig(found.fall_after["res-relu"]),
        ),
    )


def _step_down_sentence(test) -> str:
    """The lr step-down: weight v1 at the switch and at the end, and its reading."""
    return PROSE.render(
        "drift-step-down",
        switch=test.switch,
        at_switch=test.at_switch,
        at_end=test.at_end,
        change=test.change,
        reading=PROSE.choose("drift-step-down-reading", test.reading),
    )


def _step_up_sentence(test) -> str:
    """The lr step-up: the fall before and after the switch, and its reading."""
    return PROSE.render(
        "drift-step-up",
        switch=test.switch,
        before=sig(test.fall_before),
        after=sig(test.fall_after),
        margin=test.margin,
        book_margin=DIFFERENCE_MARGIN,
        reading=PROSE.choose("drift-step-up-reading", test.reading),
    )


def _long_sentence(equal) -> str:
    """``lr 3e-4 long``: its final weight v1 beside the base run's at equal summed lr, and its reading."""
    return PROSE.render(
        "drift-long",
        steps=equal.steps,
        lr=equal.lr,
        base_lr=equal.base_lr,
        base_steps=equal.base_steps,
        long=equal.long_final,
        base=equal.base_final,
        verdict=equal.verdict,
        at_base=equal.at_base_steps,
        rising=equal.still_rising,
        runs=equal.runs,
        share=STILL_RISING_SHARE,
        reading=PROSE.choose("drift-long-reading", equal.drift),
    )


def _batch_sentence(dose) -> str:
    """The batch dose: final weight v1 per batch size and its verdict."""
    return PROSE.render(
        "drift-batch",
        finals="; ".join(f"batch {s}: {v}" for s, v in dose.finals.items()),
        high=max(dose.finals),
        low=min(dose.finals),
        verdict=dose.verdict,
    )


def drift_tests_sentences(results: Results) -> str:
    """One sentence per lr or batch test: its numbers and its reading (those of ``DRIFT_TESTS``)."""
    tests = drift_tests_found(results)
    if not tests.readings():
        return PROSE.choose("drift-tests", "none")
    parts = []
    for name, test, sentence in (
        ("lr step-down", tests.step_down, _step_down_sentence),
        ("lr step-up", tests.step_up, _step_up_sentence),
        ("lr 3e-4 long", tests.equal_distance, _long_sentence),
        ("batch 64 and batch 256", tests.batch, _batch_sentence),
    ):
        parts.append(PROSE.render("drift-not-run", name=name) if test is None else sentence(test))
    return "\n\n".join(parts)


def forks_figure(results: Results) -> None:
    """The forks from the formed state: weight v1 of both conditions against the summed learning rate after the
    switch (left), and the linear net's pair-balance motion against the step (right), one line per rate."""
    found = forks_found(results)
    if found is None:
        return show_note(PROSE.choose("forks", "not-run"))
    import matplotlib.pyplot as plt
    import seaborn as sns

    from ... import plotting
    from ...book.figures import show_figure
    from .forks import fork_switch

    switch, base_lr = fork_switch(found.steps), results.settings.base.optimizer.lr
    shades = dict(zip(found.rates, sns.color_palette("viridis", n_colors=len(found.rates))))
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.4))
    for rate, table in sorted(results.forks.items()):
        for condition, linestyle in (("res-none", "-"), ("res-relu", "--")):
            frame = per_run(table[table["condition"] == condition], "weight_cos", "input", 1)
            after = frame[frame["step"] >= switch].assign(distance=(frame["step"] - switch) * rate)
            band(left, after, shades[rate], f"{condition}, lr {rate:g}", x="distance", linestyle=linestyle)
        balance = per_run(table[table["condition"] == "res-none"], "pair_balance_motion")
        band(right, balance, shades[rate], f"lr {rate:g}")
    plotting.draw_baseline(left, results.baseline)
    left.set_xlabel("summed learning rate after the switch")
    left.set_ylabel("weight v1 |cos|, mean over layer pairs")
    left.set_ylim(0, 1)
    left.legend(fontsize="x-small", ncol=2)
    right.axvline(switch, color="0.5", linestyle=":")
    right.set_xlabel("training step")
    right.set_ylabel("res-none pair-balance motion")
    right.legend(fontsize="small")
    fig.tight_layout()
    show_figure(
        fig,
        "c2-forks",
        PROSE.render("forks-caption", headline=results.settings.headline, switch=switch, base_lr=base_lr),
    )


def forks_sentence(results: Results) -> str:
    """What the forks say of each of drift's predictions (:mod:`.forks`)."""
    found = forks_found(results)
    if found is None:
        return PROSE.choose("forks", "not-run")
    grows, grows_verdict = found.fall_grows_with_rate()
    worst, relu_verdict = found.relu_holds()
    balance, balance_verdict = found.balance_grows_with_rate()
    baseline_fall = (
        ""
        if relu_verdict == "reproduced"
        else " "
        + PROSE.render(
            "forks-baseline-falls",
            rate=worst.rate,
            late=worst.late_change,
            linear_late=found.fork("res-none", worst.rate).late_change,
        )
    )
    return PROSE.choose(
        "forks",
        "ran",
        baseline_fall=baseline_fall,
        reference=found.reference_rate,
        equal_verdict=found.equal_distance_verdict(),
        equal="; ".join(f"lr {r:g}: {found.fork('res-none', r).at_equal_distance}" for r in found.rates),
        low=min(found.rates),
        high=max(found.rates),
        grows=grows,
        grows_verdict=grows_verdict,
        worst_rate=worst.rate,
        worst_switch=worst.at_switch,
        worst_end=worst.at_end,
        relu_verdict=relu_verdict,
        balance=balance,
        balance_verdict=balance_verdict,
        rho=str(found.balance_fall),
        rho_verdict=found.balance_fall_verdict(),
    )


def spike_table(results: Results) -> pd.DataFrame:
    """Spike counts and first spike steps per rule and condition (headline dataset), the chosen rule marked."""
    found = spike_calibration(results)
    if found is None:
        return pd.DataFrame()
    rows = found.rows
    chosen = None if found.chosen is None else found.chosen.label
    return pd.DataFrame(
        {
            "rule": [f"{r}{' (chosen)' if r == chosen else ''}" for r in rows["rule"]],
            "condition": rows["condition"],
            "runs with spikes": [f"{e} of {n}" for e, n in zip(rows["runs_with_events"], rows["runs"])],
            "spikes per run": [fmt(m, s) for m, s in zip(rows["events_mean"], rows["events_sd"])],
            "first spike (step, per run with one)": [
                ", ".join(f"{s:,}" for s in steps) or "–" for steps in rows["first_events"]
            ],
        }
    ).set_index(["rule", "condition"])


def spike_sentence(results: Results) -> str:
    """The calibrated detector's choice and its reading on res-none (:func:`.compute.spike_calibration`)."""
    found = spike_calibration(results)
    if found is None:
        return PROSE.choose("spikes", "no-trace")
    if found.chosen is None:
        return PROSE.choose("spikes", "no-rule", limit=CALIBRATION_EVENTS_PER_RUN)
    row = found.rows[(found.rows["rule"] == found.chosen.label) & (found.rows["condition"] == "res-none")].iloc[0]
    return PROSE.choose(
        "spikes",
        "chosen",
        rule=found.chosen.label,
        relu=found.relu,
        limit=CALIBRATION_EVENTS_PER_RUN,
        none=found.none,
        runs_with_events=int(row["runs_with_events"]),
        runs=int(row["runs"]),
        excess=SPIKE_EXCESS,
        reading=PROSE.choose("spikes-reading", found.reading),
    )
