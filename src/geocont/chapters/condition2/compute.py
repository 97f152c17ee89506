"""condition2: what the chapter computes (settings, runs, instability events, explanations, claims);
no figures, no matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ... import recorder, instability, metrics, paper
from ...config import MLPRunConfig, OptimizerConfig, check_positive
from ...data import check_dataset_name
from ...book.chapter import Chapter, ClaimsBuilder
from ...scales import parse_seeds
from ...statistics import (DIFFERENCE_MARGIN, Estimate, Fall, RankCorrelation, at_final_step, at_step, difference,
                           change_over_last_per_run, estimate, fall_from_peak, final_estimate, final_per_run, formed,
                           peak_and_final, peaks_per_seed, per_run, random_level_sd, rank_correlation, turn_rates,
                           verdict_at_random_level, verdict_for_correlation, verdict_for_difference, verdict_for_value,
                           without_runs)
from ...sweeps import predicted_wall_seconds
from ...tables import RUN_KEYS, diverged_runs, select
from ...training import cosine_factor, run_sweep
from .. import mlp_runs
from ..mlp_runs import predicted_run_seconds
from .forks import (DRIFT_OF_VERDICT, FORK_RATES, ForkFindings, balance_readings, fork_claims, fork_configs,
                    fork_findings, fork_readings, forks_at)

#: The Condition-2 core compared on every dataset: the element-wise baseline, the linear residual
#: net, a rotation-equivariant nonlinearity that is nonlinear in practice, and no residual.
CORE_CONDITIONS = ("res-relu", "res-none", "res-radial-tau", "nores-relu")

#: The headline dataset is the one whose training set has the paper's size (the rule all MLP chapters share).
HEADLINE_RULE = mlp_runs.HEADLINE_DATASET_RULE

#: Stabilising and symmetry-removing interventions, each a change to the base run (Adam, lr 1e-3,
#: constant). Values chosen before any was run: lr 3e-4 (the issue's example, 3.3x smaller);
#: clipping at global norm 1.0 (the common default of language-model training); cosine decay to
#: zero over the horizon (no warm-up); AdamW with decoupled weight decay 0.1 (the value of
#: Llama/GPT-3 pre-training; torch's default 0.01 would shrink an unused weight by only 9% over
#: 9,360 steps at lr 1e-3, 0.1 by 61%).
INTERVENTIONS: dict[str, dict[str, Any]] = {
    "lr 3e-4": dict(optimizer=OptimizerConfig("adam", lr=3e-4)),
    "clip 1.0": dict(grad_clip=1.0),
    "cosine": dict(lr_schedule="cosine"),
    "adamw 0.1": dict(optimizer=OptimizerConfig("adamw", lr=1e-3, weight_decay=0.1)),
    #: not a stabiliser: Adam in an independent random orthogonal frame per layer, so that no two
    #: layers share Adam's per-coordinate axes (geocont.optimizers.FrameAdam)
    "adam-rotated": dict(optimizer=OptimizerConfig("adam-rotated", lr=1e-3)),
}

#: The direct tests of drift on the linear net (headline dataset, every seed of the comparison), each a change to
#: the base run, written down with what each reading predicts before any was run:
#:
#: * ``lr step-down``: lr 1e-3 to half the horizon, then x0.1. Accumulated drift predicts that weight v1 stops
#:   where it was at the switch (the frames that drifted apart stay apart); an equilibrium set by the current
#:   noise level predicts that it recovers towards a higher level after the switch.
#: * ``lr step-up``: the mirror, lr 3e-4 then x(10/3) = 1e-3. Drift predicts a faster fall after the switch;
#:   an equilibrium predicts a fall to the lr-1e-3 level.
#: * ``lr 3e-4 long``: lr 3e-4 for the same summed learning rate as lr 1e-3 over the horizon (steps x 10/3 =
#:   31,200 at ``cpu``), read against the base run on a sum-of-lr axis: if continuity is a function of the
#:   distance travelled, the two curves coincide there.
#: * ``batch 64`` and ``batch 256``: half and twice the base batch, same lr and steps. If gradient noise sets
#:   the pace of drift, the smaller batch falls faster and the larger one slower.
DRIFT_TESTS: dict[str, dict[str, Any]] = {
    "lr step-down": dict(lr_schedule="step", lr_step_factor=0.1),
    "lr step-up": dict(optimizer=OptimizerConfig("adam", lr=3e-4), lr_schedule="step", lr_step_factor=10 / 3),
    "lr 3e-4 long": dict(optimizer=OptimizerConfig("adam", lr=3e-4), steps_factor=10 / 3),
    "batch 64": dict(batch_size=64),
    "batch 256": dict(batch_size=256),
}


def switch_step(total_steps: int) -> int:
    """Where the ``step`` schedule switches its learning rate: after ``total_steps // 2`` updates (the
    training loop's rule, ``geocont.training.step_factor``); the snapshot there is the state at the switch."""
    return total_steps // 2


#: SGD (momentum 0.9): its learning rate is chosen per dataset as the largest of these with no
#: seed of any SGD condition diverging within ``sgd_probe_steps``.
SGD_LEARNING_RATES = (0.03, 0.01, 0.003)
SGD_MOMENTUM = 0.9

#: What the chapter adds to the MLP chapters' presets per scale (:data:`geocont.chapters.mlp_runs.MLP_PRESETS`,
#: whose model, horizon, snapshots and trace it keeps, so that a run it shares with the conditions chapter is
#: trained once): the datasets compared (the headline one first) and the seeds of the linear net's spread.
_CHAPTER_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(datasets=("fashion-mnist", "mnist-subset"), many_seeds=4, sgd_probe_steps=8, forks=FORK_RATES),
    "cpu": dict(datasets=("fashion-mnist", "mnist-10k", "mnist-subset"), many_seeds=8, sgd_probe_steps=500,
                forks=FORK_RATES),
    "paper": dict(datasets=("mnist", "fashion-mnist", "mnist-10k"), many_seeds=16, sgd_probe_steps=500,
                  forks=FORK_RATES),
}
_PRESETS = mlp_runs.mlp_presets(_CHAPTER_VALUES, without=("dataset",), conditions=CORE_CONDITIONS,
                                interventions=tuple(INTERVENTIONS), drift_tests=tuple(DRIFT_TESTS))

#: The notebook's parameters, in the order of its ``parameters`` cell.
PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.condition2",
    "seeds": "seeds of the comparison and the interventions: an int n (0..n-1) or a list; None keeps the preset",
    "many_seeds": "seeds of the linear net under Adam and SGD on the headline dataset (an int or a list)",
    "steps": "the horizon (optimizer steps) of every long run",
    "datasets": "the datasets compared, the headline one first (mnist-subset, mnist-10k, mnist, fashion-mnist)",
    "conditions": "the conditions compared on every dataset",
    "interventions": f"which interventions run on the headline dataset (of {', '.join(INTERVENTIONS)})",
    "drift_tests": f"which direct tests of drift run on the linear net (of {', '.join(DRIFT_TESTS)})",
    "forks": "learning rates the linear net and the baseline continue at from the formed state (an empty list: none)",
    "width": "hidden width",
    "depth": "number of hidden layers",
    "trace_every": "steps between trace points (loss and weight v1 for the instability analysis)",
}


@dataclass(frozen=True)
class Condition2Settings:
    """Everything the chapter trains."""

    scale: str
    #: the base run (Adam, lr 1e-3) on the headline dataset
    base: MLPRunConfig
    datasets: tuple[str, ...]
    conditions: tuple[str, ...]
    seeds: tuple[int, ...]
    many_seeds: tuple[int, ...]
    interventions: tuple[str, ...]
    early_steps: int
    sgd_probe_steps: int
    #: the direct tests of drift (:data:`DRIFT_TESTS`)
    drift_tests: tuple[str, ...] = ()
    #: the rates of the forks from the formed state (:mod:`.forks`)
    forks: tuple[float, ...] = ()
    #: the chapter parameters that were set (not None), as a re-run must repeat them
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        return self.datasets[0]

    def comparison_configs(self, dataset: str) -> list[MLPRunConfig]:
        """The conditions x seeds under Adam on ``dataset``."""
        return [self.base.replace(dataset=dataset, condition=c, seed=s) for c in self.conditions for s in self.seeds]

    def linear_seed_configs(self) -> list[MLPRunConfig]:
        """The linear net under Adam on the headline dataset, every one of ``many_seeds``."""
        return [self.base.replace(condition="res-none", seed=s) for s in self.many_seeds]

    def intervention_configs(self, name: str) -> list[MLPRunConfig]:
        """The linear net and the baseline under intervention ``name`` on the headline dataset."""
        return [self.base.replace(condition=c, seed=s, **INTERVENTIONS[name])
                for c in ("res-none", "res-relu") for s in self.seeds]

    def drift_test_configs(self, name: str) -> list[MLPRunConfig]:
        """The linear net under drift test ``name`` (:data:`DRIFT_TESTS`) on the headline dataset, every seed.
        A longer run (``steps_factor``) also snapshots the base horizon, so it can be read at equal steps too;
        a step schedule also snapshots its switch (:func:`switch_step`), so it can be read there."""
        changes = dict(DRIFT_TESTS[name])
        factor = changes.pop("steps_factor", None)
        steps = self.base.steps if factor is None else round(self.base.steps * factor)
        extra = () if factor is None else (self.base.steps,)
        if changes.get("lr_schedule") == "step":
            extra += (switch_step(steps),)
        if factor is not None:
            changes["steps"] = steps
        if extra:
            changes["snapshot_steps"] = (*self.base.snapshot_steps, *extra)
        return [self.base.replace(condition="res-none", seed=s, **changes) for s in self.seeds]

    def fork_configs(self) -> list[MLPRunConfig]:
        """The forks from the formed state on the headline dataset (:func:`.forks.fork_configs`)."""
        return fork_configs(self.base, self.seeds, self.forks) if self.forks else []

    def sgd_configs(self, lr: float, steps: int | None = None) -> list[MLPRunConfig]:
        """SGD at ``lr`` on the headline dataset: the linear net on ``many_seeds``, the baseline on ``seeds``;
        ``steps`` shortens them to probes (no late snapshots)."""
        optimizer = OptimizerConfig("sgd", lr=lr, momentum=SGD_MOMENTUM)
        configs = [self.base.replace(condition="res-none", seed=s, optimizer=optimizer) for s in self.many_seeds]
        configs += [self.base.replace(condition="res-relu", seed=s, optimizer=optimizer) for s in self.seeds]
        if steps is not None:
            configs = [c.replace(steps=steps, n_late_snapshots=0, snapshot_steps=(), n_snapshots=2) for c in configs]
        return configs

    def run_configs(self) -> list[MLPRunConfig]:
        """Every long run except the SGD ones (whose learning rate the probes choose), most valuable first."""
        configs = self.comparison_configs(self.headline)
        for name in self.interventions:
            configs += self.intervention_configs(name)
        configs += self.linear_seed_configs()
        for name in self.drift_tests:
            configs += self.drift_test_configs(name)
        configs += self.fork_configs()
        for dataset in self.datasets[1:]:
            configs += self.comparison_configs(dataset)
        unique: dict[str, MLPRunConfig] = {}
        for config in configs:
            unique.setdefault(repr(config.to_dict()), config)
        return list(unique.values())


#: The chapter's own settings, besides those of the shared MLP builder (:func:`geocont.chapters.mlp_runs.build_settings`).
_OWN_VALUES = ("datasets", "many_seeds", "interventions", "drift_tests", "sgd_probe_steps", "forks")


def build_settings(scale: str, values: dict[str, Any]) -> Condition2Settings:
    """The chapter's settings from its preset values (any of them replaced): the base run, seeds,
    conditions and horizon are the shared MLP builder's (its checks included); a bad value raises ValueError."""
    values = dict(values)
    own = {name: values.pop(name) for name in _OWN_VALUES}
    datasets, interventions = tuple(own["datasets"]), tuple(own["interventions"])
    if not datasets:
        raise ValueError("datasets must not be empty")
    for dataset in datasets:
        check_dataset_name(dataset)
    for name in interventions:
        if name not in INTERVENTIONS:
            raise ValueError(f"unknown intervention {name!r}; valid choices: {', '.join(INTERVENTIONS)}")
    drift_tests = tuple(own["drift_tests"])
    for name in drift_tests:
        if name not in DRIFT_TESTS:
            raise ValueError(f"unknown drift test {name!r}; valid choices: {', '.join(DRIFT_TESTS)}")
    forks = tuple(sorted(check_positive("forks", rate, integer=False) for rate in (own["forks"] or ())))
    mlp = mlp_runs.build_settings(scale, {**values, "dataset": datasets[0]})
    for condition in ("res-none", "res-relu"):
        if condition not in mlp.conditions:
            raise ValueError(f"conditions must include {condition} (the comparison is between them)")
    probe_steps = min(check_positive("sgd_probe_steps", own["sgd_probe_steps"]), mlp.base.steps)
    return Condition2Settings(scale=scale, base=mlp.base, datasets=datasets, conditions=mlp.conditions, seeds=mlp.seeds,
                              many_seeds=parse_seeds(own["many_seeds"], "many_seeds"), interventions=interventions,
                              early_steps=mlp.early_steps, sgd_probe_steps=probe_steps, drift_tests=drift_tests,
                              forks=forks)


def describe(settings: Condition2Settings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    base = settings.base
    return dict(
        seeds=settings.seeds,
        data=", ".join(f"`{d}`" for d in settings.datasets) + f" (headline: `{settings.headline}`, {HEADLINE_RULE})"
             + (f"; first {base.max_train} training examples" if base.max_train else ""),
        model=f"residual MLP, {base.depth} hidden layers of width {base.width}",
        training=(f"{base.steps:,} optimizer steps of batch {base.batch_size}, Adam (lr {base.optimizer.lr:g}); "
                  f"{base.n_snapshots} log-spaced and {base.n_late_snapshots} evenly spaced snapshots and one at step "
                  f"{settings.early_steps:,}; a trace point every {base.trace_every} steps; interventions on "
                  f"`{settings.headline}`: {', '.join(settings.interventions) or 'none'}; the linear net also with seeds "
                  f"{', '.join(map(str, settings.many_seeds))} under Adam and SGD (momentum {SGD_MOMENTUM:g}, "
                  f"learning rate chosen by probe runs of {settings.sgd_probe_steps:,} steps)"),
    )


def probe_configs(settings: Condition2Settings) -> list[MLPRunConfig]:
    """The SGD probes at every candidate rate (a build stops at the first rate with no diverged probe)."""
    return [c for lr in SGD_LEARNING_RATES for c in settings.sgd_configs(lr, steps=settings.sgd_probe_steps)]


def all_run_configs(settings: Condition2Settings) -> list[MLPRunConfig]:
    """Every run the chapter trains but the SGD runs to the horizon, whose learning rate the probes
    choose (they differ from the listed runs in the optimizer alone): the long runs, then the probes."""
    return settings.run_configs() + probe_configs(settings)


def predicted_minutes(settings: Condition2Settings, workers: int = 2) -> float:
    """Predicted cold wall minutes of the chapter run alone on ``workers`` one-thread workers
    (:func:`geocont.chapters.mlp_runs.predicted_run_seconds`): its long runs as one sweep, then the SGD
    probes at every candidate rate (an upper bound), then the SGD runs."""
    phases = (settings.run_configs(), probe_configs(settings), settings.sgd_configs(SGD_LEARNING_RATES[-1]))
    return sum(predicted_wall_seconds(map(predicted_run_seconds, phase), workers) for phase in phases) / 60


def scale_rows(settings: Condition2Settings) -> list[tuple[str, str]]:
    """The chapter's rows of the methods page's table of the scales."""
    return [
        ("Condition 2: datasets (headline first)", ", ".join(f"`{d}`" for d in settings.datasets)),
        ("Condition 2: seeds of the comparison; of the linear net under Adam and SGD",
         f"{len(settings.seeds)}; {len(settings.many_seeds)}"),
        ("Condition 2: trace point every (steps); SGD probe steps",
         f"{settings.base.trace_every}; {settings.sgd_probe_steps:,}"),
    ]


CHAPTER = Chapter(name="condition2", parameters=PARAMETERS, presets=_PRESETS, build=build_settings, describe=describe,
                  runs=all_run_configs, scale_rows=scale_rows)


#: The parameters that narrow the design (fewer runs) rather than change the runs.
_BREADTH_PARAMETERS = ("seeds", "many_seeds", "datasets", "conditions", "interventions", "drift_tests", "forks")

#: A narrower ``cpu`` re-run: the headline dataset with two of the stabilising interventions, the horizon
#: and every seed kept.
NARROW_CPU_RERUN = dict(datasets=("fashion-mnist",), interventions=("clip 1.0", "cosine"), drift_tests=("lr step-down",))


@dataclass(frozen=True)
class Budget:
    """What the chapter trains and, at ``cpu``, its predicted cold minutes (None elsewhere), what this build
    leaves out of the preset (``{setting: [left out]}``) and the preset's minutes, and a narrower re-run's
    minutes (None where it is not narrower)."""

    runs: int
    probes: int
    sgd_runs: int
    minutes: float | None = None
    left_out: dict[str, list] = field(default_factory=dict)
    preset_minutes: float | None = None
    narrow_minutes: float | None = None


def budget(settings: Condition2Settings) -> Budget:
    """The :class:`Budget` of ``settings`` (:func:`predicted_minutes`)."""
    counts = dict(runs=len(settings.run_configs()), probes=len(probe_configs(settings)),
                  sgd_runs=len(settings.sgd_configs(SGD_LEARNING_RATES[-1])))
    if settings.scale != "cpu":
        return Budget(**counts)
    minutes = predicted_minutes(settings)
    kept = {k: v for k, v in settings.overrides.items() if k not in _BREADTH_PARAMETERS}
    preset = CHAPTER.configure(settings.scale, **kept)
    left_out = {name: missing for name, missing in (
        ("datasets", [d for d in preset.datasets if d not in settings.datasets]),
        ("conditions", [c for c in preset.conditions if c not in settings.conditions]),
        ("interventions", [i for i in preset.interventions if i not in settings.interventions]),
        ("drift tests", [t for t in preset.drift_tests if t not in settings.drift_tests]),
        ("seeds", [s for s in preset.seeds if s not in settings.seeds]),
        ("linear-net seeds", [s for s in preset.many_seeds if s not in settings.many_seeds])) if missing}
    narrow = predicted_minutes(CHAPTER.configure(settings.scale, **{**kept, **NARROW_CPU_RERUN}))
    return Budget(**counts, minutes=minutes, left_out=left_out,
                  preset_minutes=predicted_minutes(preset) if left_out else None,
                  narrow_minutes=narrow if narrow < minutes else None)


def _diverged_seeds(table: pd.DataFrame) -> pd.DataFrame:
    rows = select(table, "diverged")
    return rows[["condition", "seed", "step"]]


@dataclass
class SGDChoice:
    """The SGD learning rate chosen on the headline dataset, and what each probed rate did."""

    lr: float | None
    #: per probed rate: how many probe runs diverged, of how many
    probes: dict[float, tuple[int, int]]


def choose_sgd_lr(settings: Condition2Settings, executor: str | None = None) -> tuple[SGDChoice, pd.DataFrame]:
    """Probe SGD's candidate rates from the largest down; the first with no diverged probe is chosen."""
    probes: dict[float, tuple[int, int]] = {}
    tables = []
    for lr in SGD_LEARNING_RATES:
        configs = settings.sgd_configs(lr, steps=settings.sgd_probe_steps)
        table = run_sweep(configs, executor=executor).assign(lr=lr)
        tables.append(table)
        bad = len(_diverged_seeds(table))
        probes[lr] = (bad, len(configs))
        if bad == 0:
            return SGDChoice(lr, probes), pd.concat(tables, ignore_index=True)
    return SGDChoice(None, probes), pd.concat(tables, ignore_index=True)


@dataclass
class Results:
    """The chapter's run tables."""

    settings: Condition2Settings
    #: ``{dataset: sweep table}`` of the comparison (Adam), the headline dataset first
    comparison: dict[str, pd.DataFrame]
    #: the linear net under Adam on the headline dataset, every seed
    linear_seeds: pd.DataFrame
    #: ``{intervention: sweep table}`` on the headline dataset; "adam" is the unchanged base run
    interventions: dict[str, pd.DataFrame]
    #: ``{drift test: sweep table}`` of the linear net on the headline dataset
    drift_tests: dict[str, pd.DataFrame]
    sgd_choice: SGDChoice
    #: SGD at the chosen rate (empty if none was stable)
    sgd: pd.DataFrame
    baseline: float
    #: ``{rate: sweep table}`` of the forks from the formed state (both conditions)
    forks: dict[float, pd.DataFrame] = field(default_factory=dict)


def run(settings: Condition2Settings, executor: str | None = None) -> Results:
    """Train (or load from the cache) every run: the long runs as one sweep, then the SGD probes and runs."""
    long_runs = settings.run_configs()
    run_sweep(long_runs, executor=executor)  # every long run at once: the executor keeps all workers busy
    comparison = {d: run_sweep(settings.comparison_configs(d), progress=False) for d in settings.datasets}
    interventions = {"adam": comparison[settings.headline][
        comparison[settings.headline]["condition"].isin(["res-none", "res-relu"])]}
    interventions.update({name: run_sweep(settings.intervention_configs(name), progress=False)
                          for name in settings.interventions})
    choice, _ = choose_sgd_lr(settings, executor)
    sgd = run_sweep(settings.sgd_configs(choice.lr), executor=executor) if choice.lr is not None else pd.DataFrame()
    return Results(settings=settings, comparison=comparison,
                   linear_seeds=run_sweep(settings.linear_seed_configs(), progress=False),
                   interventions=interventions, sgd_choice=choice, sgd=sgd,
                   drift_tests={name: run_sweep(settings.drift_test_configs(name), progress=False)
                                for name in settings.drift_tests},
                   forks={rate: run_sweep(forks_at(settings.fork_configs(), rate), progress=False)
                          for rate in settings.forks},
                   baseline=metrics.random_abs_cos(settings.base.width))


# ---------------------------------------------------------------------------------------------
# Numbers: every quantity the chapter reports, and its claims (no plotting here)
# ---------------------------------------------------------------------------------------------

#: Seeds' final values are called bimodal when the largest gap between consecutive sorted values
#: is at least this large, exceeds 3 x the pooled sd within the two groups it separates, and each
#: group holds at least 2 seeds (a rule stated before the seeds were run).
BIMODAL_GAP = 0.15


def weight_v1(table: pd.DataFrame, condition: str, metric: str = "weight_cos", space: str = "input",
              direction: int = 1) -> Estimate:
    """``condition``'s final value of a layer-mean metric (weight v1 by default): mean ± sd over its
    finite seeds, diverged seeds counted (:func:`geocont.statistics.final_estimate`)."""
    return final_estimate(table, metric, space, direction, condition=condition)


def weight_v1_fall(table: pd.DataFrame, condition: str) -> Fall:
    """``condition``'s weight v1 from its peak to its end (the book's fall rule, :class:`geocont.statistics.Fall`)."""
    return Fall(*peak_and_final(table, "weight_cos", "input", 1, condition=condition))


def comparison_rows(results: Results) -> pd.DataFrame:
    """Per dataset and condition, as numbers: weight v1 final / peak (mean, sd) and whether it falls (the fall
    rule), gradient v1 final, the final trace loss, test accuracy, runs with instability events, events,
    memorised and diverged runs."""
    rows = []
    for dataset, table in results.comparison.items():
        summaries = instability.run_summary(table)
        for condition in results.settings.conditions:
            one = table[table["condition"] == condition]
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(one, condition)
            gradient = weight_v1(one, condition, "grad_cos")
            rows.append(dict(
                dataset=dataset, condition=condition, seeds=one["seed"].nunique(), diverged=len(diverged_runs(one)),
                v1_final=fall.final.mean, v1_final_sd=fall.final.std, v1_peak=fall.peak.mean, v1_peak_sd=fall.peak.std,
                falls=fall.falls, gradient_v1=gradient.mean, gradient_v1_sd=gradient.std,
                train_loss=float(mine["final_loss"].mean()), test_acc=weight_v1(one, condition, "test_acc", "", 0).mean,
                runs_with_events=int((mine["events"] > 0).sum()), events=int(mine["events"].sum()),
                memorised_runs=int(mine["memorised_step"].notna().sum()),
            ))
    return pd.DataFrame(rows)


def intervention_rows(results: Results) -> pd.DataFrame:
    """Per intervention ("adam" = none) and condition, as numbers: weight v1 final and peak, its fall (and the
    fall rule's ``falls`` / ``holds``), its fall per 1,000 steps after the peak, instability events, the
    stable-window drift rate (degrees per 1,000 steps), final trace loss and test accuracy (means and sds
    over seeds)."""
    rows = []
    for name, table in results.interventions.items():
        summaries = instability.run_summary(table)
        summaries["fall_rate"] = instability.fall_rate_after_peak(summaries)
        events = instability.instability_events(table)
        drift = instability.stable_windows_turn_rate(table, events)
        for condition in ("res-none", "res-relu"):
            mine = summaries[summaries["condition"] == condition]
            fall = weight_v1_fall(table, condition)
            rate = estimate(drift.loc[drift["condition"] == condition, "turn_rate"])
            fall_rate = estimate(mine["fall_rate"])
            rows.append(dict(
                intervention=name, condition=condition, seeds=len(mine),
                v1_final=fall.final.mean, v1_final_sd=fall.final.std, v1_peak=fall.peak.mean, v1_peak_sd=fall.peak.std,
                fall=fall.amount, falls=fall.falls, holds=fall.holds,
                fall_per_1000=fall_rate.mean, fall_per_1000_sd=fall_rate.std,
                runs_with_events=int((mine["events"] > 0).sum()), events=int(mine["events"].sum()),
                drift_rate=rate.mean, drift_rate_sd=rate.std,
                train_loss=float(mine["final_loss"].mean()), test_acc=weight_v1(table, condition, "test_acc", "", 0).mean,
            ))
    return pd.DataFrame(rows)


def seed_groups(results: Results) -> list[tuple[str, str, pd.DataFrame]]:
    """The runs of every seed on the headline dataset, as (condition, optimizer, its runs): the linear net
    and the baseline under Adam, and under SGD when some SGD run trained."""
    headline = results.comparison[results.settings.headline]
    groups = [("res-none", "adam", results.linear_seeds), ("res-relu", "adam", headline)]
    if not results.sgd.empty:
        groups += [("res-none", "sgd", results.sgd), ("res-relu", "sgd", results.sgd)]
    return [(condition, optimizer, table[table["condition"] == condition]) for condition, optimizer, table in groups]


def seed_values(results: Results) -> pd.DataFrame:
    """Every seed's final weight v1 on the headline dataset: the linear net and the baseline under Adam
    and under SGD (column ``optimizer``); diverged seeds are rows with ``diverged`` True and no value."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        finals = final_per_run(table, "weight_cos", "input", 1)
        rows += [dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=float(r.value),
                      diverged=False) for r in finals.itertuples()]
        rows += [dict(condition=condition, optimizer=optimizer, seed=int(r.seed), value=math.nan, diverged=True)
                 for r in select(table, "diverged").itertuples()]
    return pd.DataFrame(rows).drop_duplicates(["condition", "optimizer", "seed"]).sort_values(
        ["condition", "optimizer", "seed"], ignore_index=True)


def formation_rows(results: Results) -> pd.DataFrame:
    """Whether continuity formed at all, per condition and optimizer on the headline dataset: every finite
    seed's peak of weight v1 (lowest, highest, mean, sd), and ``formed`` (the formation rule,
    :func:`geocont.statistics.formed`)."""
    rows = []
    for condition, optimizer, table in seed_groups(results):
        peaks = peaks_per_seed(table, "weight_cos", "input", 1, condition=condition)
        if not peaks.empty:
            peak = estimate(peaks)
            rows.append(dict(condition=condition, optimizer=optimizer, seeds=len(peaks), peak_min=float(peaks.min()),
                             peak_max=float(peaks.max()), peak_mean=peak.mean, peak_sd=peak.std,
                             formed=formed(peak, results.baseline)))
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Modality:
    """Whether one group of seeds' final values splits into two clusters (:data:`BIMODAL_GAP`)."""

    bimodal: bool
    gap: float
    low: tuple[float, ...]
    high: tuple[float, ...]


def modality(values: pd.Series) -> Modality:
    ordered = sorted(float(v) for v in values.dropna())
    if len(ordered) < 4:
        return Modality(False, math.nan, tuple(ordered), ())
    gaps = [b - a for a, b in zip(ordered, ordered[1:])]
    cut = max(range(len(gaps)), key=gaps.__getitem__)
    low, high = ordered[:cut + 1], ordered[cut + 1:]
    within = math.sqrt((sum((v - sum(low) / len(low)) ** 2 for v in low)
                        + sum((v - sum(high) / len(high)) ** 2 for v in high)) / max(1, len(ordered) - 2))
    bimodal = len(low) >= 2 and len(high) >= 2 and gaps[cut] >= BIMODAL_GAP and gaps[cut] > 3 * within
    return Modality(bimodal, gaps[cut], tuple(low), tuple(high))


def half_verdicts(results: Results) -> pd.DataFrame:
    """The linear net's weight-v1 claims judged on two disjoint halves of its seeds (even and odd
    seeds), for each optimizer: the verdict is stable when both halves give the one of all seeds."""
    values = seed_values(results)
    rows = []
    for optimizer, group in values.groupby("optimizer"):
        linear = group[(group["condition"] == "res-none") & ~group["diverged"]]
        relu = estimate(group.loc[(group["condition"] == "res-relu") & ~group["diverged"], "value"])
        for half, seeds in (("all", linear), ("even seeds", linear[linear["seed"] % 2 == 0]),
                            ("odd seeds", linear[linear["seed"] % 2 == 1])):
            none = estimate(seeds["value"])
            rows.append(dict(optimizer=optimizer, seeds=half, n=none.n, mean=none.mean, sd=none.std,
                             low_verdict=verdict_for_value(none, PAPER_LINEAR_WEIGHT),
                             relu_above_verdict=verdict_for_difference(relu, none)))
    return pd.DataFrame(rows)


#: The paper's numbers for Condition 2 (:mod:`geocont.paper`).
PAPER_LINEAR_WEIGHT = paper.LINEAR_WEIGHT_V1
PAPER_LINEAR_GRADIENT = paper.LINEAR_GRADIENT_V1


def comparison_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The Condition-2 claims on every dataset, into ``builder`` (whose dataset, the headline one, is each claim's
    verdict of record); on the headline dataset they are the book's headline claims (``headline=True``)."""
    random_sd = random_level_sd(results.settings.base.width, results.settings.base.depth - 1)
    for dataset, table in results.comparison.items():
        headline = dataset == results.settings.headline

        def final(condition: str, metric: str = "weight_cos") -> Estimate:
            return weight_v1(table, condition, metric)

        none, relu = final("res-none"), final("res-relu")
        builder.add("linear-weight-v1", "A linear residual net has low weight continuity",
                    "Res+None weight v1 |cos|", f"{PAPER_LINEAR_WEIGHT}", none, results.baseline,
                    verdict_for_value(none, PAPER_LINEAR_WEIGHT), headline=headline, dataset=dataset)
        gradient = final("res-none", "grad_cos")
        builder.add("linear-gradient-v1", "... yet high gradient continuity",
                    "Res+None gradient v1 |cos|", f"{PAPER_LINEAR_GRADIENT}", gradient, results.baseline,
                    verdict_for_value(gradient, PAPER_LINEAR_GRADIENT), headline=headline, dataset=dataset)
        builder.add("relu-above-linear", "An element-wise activation keeps weight continuity",
                    "res-relu minus res-none weight v1", "higher (no number)", difference(relu, none),
                    results.baseline, verdict_for_difference(relu, none), note=f"res-relu {relu}; res-none {none}",
                    headline=headline, dataset=dataset)
        if "res-radial-tau" in results.settings.conditions:
            radial = final("res-radial-tau")
            builder.add("radial-tau-low", "A rotation-equivariant nonlinearity fails too",
                        "res-radial-tau weight v1 |cos|", f"~{paper.RADIAL_WEIGHT_V1}", radial, results.baseline,
                        verdict_for_value(radial, paper.RADIAL_WEIGHT_V1), headline=headline, dataset=dataset)
            builder.add("relu-above-radial-tau", "Symmetry breaking, not nonlinearity, keeps continuity",
                        "res-relu minus res-radial-tau weight v1", "higher (no number)",
                        difference(relu, radial), results.baseline, verdict_for_difference(relu, radial),
                        note=f"res-relu {relu}; res-radial-tau {radial}", headline=headline, dataset=dataset)
        if "nores-relu" in results.settings.conditions:
            nores = final("nores-relu", "grad_cos")
            nores_weight = final("nores-relu")
            builder.add("nores-gradient-v1", "Without residuals, gradient continuity is at random level",
                        "NoRes gradient v1 |cos|", f"~{paper.NORES_GRADIENT}", nores, results.baseline,
                        verdict_at_random_level(nores, results.baseline, random_sd), headline=headline, dataset=dataset)
            builder.add("nores-weight-v1", "Without residuals, weight continuity does not develop",
                        "NoRes weight v1 |cos|", "random level", nores_weight, results.baseline,
                        verdict_at_random_level(nores_weight, results.baseline, random_sd),
                        note=f"gradient v1 {nores}", headline=headline, dataset=dataset)
        fall = weight_v1_fall(table, "res-none")
        builder.add("linear-rise-then-fall", "Weight continuity first forms, then is lost",
                    "res-none weight v1: peak minus final", "rise, then collapse", fall.drop,
                    results.baseline, fall.verdict, note=f"peak {fall.peak}, final {fall.final}",
                    headline=headline, dataset=dataset)


# ---------------------------------------------------------------------------------------------
# The direct tests of drift: function-preserving motion, the spectrum beside the turn rate, the
# learning-rate and batch tests, a spike detector calibrated on the baseline
# ---------------------------------------------------------------------------------------------

def recorded(table: pd.DataFrame, *names: str) -> bool:
    """Whether ``table`` holds every metric of ``names`` (a table cached before a metric existed lacks it)."""
    present = set(table["metric"].astype(str).unique()) if len(table) else set()
    return all(name in present for name in names)


def _finite_runs(frame: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (one row per run and step, :func:`geocont.statistics.per_run`) without the runs that diverged."""
    return without_runs(frame, diverged_runs(table)).sort_values(RUN_KEYS + ["step"])


def _second_half_mean(table: pd.DataFrame, metric: str) -> pd.Series:
    """Per seed, the mean over the snapshots after half of the run's last step of a layer-mean metric."""
    frame = _finite_runs(per_run(table, metric), table)
    last = frame.groupby(RUN_KEYS, observed=True)["step"].transform("max")
    return frame[frame["step"] > last / 2].groupby("seed")["value"].mean()


#: Function-preserving motion (drift along flat directions moves the W_l and leaves the function alone): per run
#: R = (mean over the second half's snapshots of the layer-mean ``step_change``) / (the same mean of ``logit_change``).
#: The rule, fixed before any run recorded the motion: res-none's log2 R exceeds res-relu's by more than this margin,
#: a factor of two, and two pooled seed sds (:func:`geocont.statistics.verdict_for_difference` with this margin).
#: The test reads the seeds whose training-set loss did not rise (:func:`loss_rose_seeds`): a run whose loss rises
#: moves its function with it, and its R measures the loss event, not the motion.
MOTION_LOG2_MARGIN = 1.0


def loss_rose_seeds(table: pd.DataFrame) -> list[int]:
    """The seeds in ``table`` (one condition) whose training-set loss ends above
    :data:`geocont.instability.LOSS_RISE_FACTOR` x its minimum over training and is not memorised there (the book's
    rule for a loss that "rose again", :class:`geocont.instability.LossCourse`, read run by run)."""
    if not recorded(table, "train_set_loss"):
        return []
    loss = per_run(table, "train_set_loss").groupby("seed")["value"].agg(["min", "last"])
    rose = (loss["last"] > instability.LOSS_RISE_FACTOR * loss["min"]) & (loss["last"] >= instability.MEMORISED_LOSS)
    return sorted(int(seed) for seed in loss.index[rose])


@dataclass(frozen=True)
class Motion:
    """One condition's motion over the second half of training (headline dataset, mean ± sd over the seeds whose
    loss did not rise): the layer-mean relative weight change per snapshot (``weights``), the logits'
    (``function``), log2 of their ratio R, the end-to-end map's (``product``, res-none only; None elsewhere), and the
    test loss's change (end minus half). ``left_out``: the seeds whose loss rose (:func:`loss_rose_seeds`);
    ``all_seeds_log2_ratio``: log2 R over every seed."""

    condition: str
    weights: Estimate
    function: Estimate
    log2_ratio: Estimate
    product: Estimate | None
    test_loss_change: Estimate
    left_out: tuple[int, ...] = ()
    all_seeds_log2_ratio: Estimate | None = None


@dataclass(frozen=True)
class FunctionPreservingMotion:
    """res-none's and res-relu's :class:`Motion`, and the verdict of :data:`MOTION_LOG2_MARGIN`'s rule."""

    none: Motion
    relu: Motion
    verdict: str


def motion(table: pd.DataFrame, condition: str) -> Motion:
    """:class:`Motion` of ``condition``'s runs in ``table``, the seeds whose loss rose left out."""
    runs = table[table["condition"] == condition]
    all_ratio = _log2_motion_ratio(runs)
    left_out = loss_rose_seeds(runs)
    runs = runs[~runs["seed"].isin(left_out)]
    weights, function = _second_half_mean(runs, "step_change"), _second_half_mean(runs, "logit_change")
    product = (estimate(_second_half_mean(runs, "product_change"))
               if condition == "res-none" and recorded(runs, "product_change") else None)
    loss_change = (change_over_last_per_run(_finite_runs(per_run(runs, "test_loss"), runs), fraction=0.5)["value"]
                   if recorded(runs, "test_loss") else pd.Series(dtype=float))
    return Motion(condition, estimate(weights), estimate(function), estimate(_log2_motion_ratio(runs)), product,
                  estimate(loss_change), left_out=tuple(left_out), all_seeds_log2_ratio=estimate(all_ratio))


def _log2_motion_ratio(runs: pd.DataFrame) -> pd.Series:
    """Per seed, log2 R (:data:`MOTION_LOG2_MARGIN`)."""
    weights, function = _second_half_mean(runs, "step_change"), _second_half_mean(runs, "logit_change")
    return np.log2(weights / function).replace([np.inf, -np.inf], np.nan)


def function_preserving_motion(results: Results) -> FunctionPreservingMotion | None:
    """The motion test on the headline comparison (None where its runs did not record the motion metrics)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "step_change", "logit_change"):
        return None
    none, relu = motion(table, "res-none"), motion(table, "res-relu")
    return FunctionPreservingMotion(none, relu, verdict_for_difference(none.log2_ratio, relu.log2_ratio,
                                                                       margin=MOTION_LOG2_MARGIN))


#: The sizes k of the top singular subspaces compared beside v1 (``subspace_cos``, direction = k): the recorder's.
SUBSPACE_KS = recorder.SUBSPACE_KS


def spectral_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, layer and snapshot, a layer's spectral gap sigma1 / sigma2 (column ``value``)."""
    keys = RUN_KEYS + ["step", "layer"]
    s1 = select(table, "sigma1", "", 1).set_index(keys)["value"]
    s2 = select(table, "sigma2", "", 2).set_index(keys)["value"]
    return (s1 / s2).rename("value").dropna().reset_index()


def gap_per_run(table: pd.DataFrame) -> pd.DataFrame:
    """Per run and snapshot, the median over layers of the spectral gap sigma1 / sigma2."""
    return spectral_gaps(table).groupby(RUN_KEYS + ["step"], observed=True)["value"].median().reset_index()


def gap_and_turn(table: pd.DataFrame) -> pd.DataFrame:
    """Per run, layer and snapshot interval: the rate at which the layer's v1 turned (degrees per 1,000 steps,
    :func:`geocont.statistics.turn_rates`) and its spectral gap at the interval's start (``gap``)."""
    rates = turn_rates(table).dropna(subset=["value", "previous"])
    gaps = spectral_gaps(table).rename(columns={"value": "gap", "step": "previous"})
    rates = rates.astype({"previous": int}).merge(gaps, on=RUN_KEYS + ["previous", "layer"])
    return rates[["condition", "seed", "layer", "step", "value", "gap"]].rename(columns={"value": "turn_rate"})


@dataclass(frozen=True)
class Subspace:
    """The top-``k`` singular subspaces' continuity (input space) at the end, for res-none and res-relu, with its
    random level, and res-none's fall from its peak (the book's fall rule)."""

    k: int
    baseline: float
    none: Estimate
    relu: Estimate
    none_fall: Fall


@dataclass(frozen=True)
class Spectrum:
    """What the linear net loses: v1 alone or its top subspaces. ``reading`` is "only-v1" (v1 falls and every top-k
    subspace holds: v1 is ill-defined inside a subspace that stays), "subspace-lost" (every top-k subspace falls too),
    "no-v1-fall" (res-none's v1 does not fall) or "mixed". ``gap`` is the layer-median sigma1 / sigma2 at the end per
    condition; ``turn_vs_gap``: the rank correlation over (run, layer, interval) of res-none's turn rate against its
    gap (expected negative), ``per_run``: the same per run (mean ± sd over seeds), ``relu_turn_vs_gap`` res-relu's."""

    v1_fall: Fall
    subspaces: tuple[Subspace, ...]
    reading: str
    gap: dict[str, Estimate]
    turn_vs_gap: RankCorrelation
    per_run: Estimate
    relu_turn_vs_gap: RankCorrelation
    verdict: str


#: The expected sign of the correlation of the turn rate with the gap: v1 turns more where sigma1 / sigma2 is small;
#: and the bootstrap draws of its interval (:func:`geocont.statistics.rank_correlation`'s default).
GAP_TURN_SIGN = -1
GAP_TURN_DRAWS = 2000


def _per_run_rank_correlation(frame: pd.DataFrame) -> Estimate:
    rhos = frame.groupby("seed").apply(lambda run: run["turn_rate"].corr(run["gap"], method="spearman"),
                                       include_groups=False)
    return estimate(rhos)


def spectrum(results: Results) -> Spectrum | None:
    """The spectrum finding on the headline comparison (None where its runs did not record sigma2 and subspace_cos)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "sigma1", "sigma2", "subspace_cos"):
        return None
    width = results.settings.base.width
    subspaces = tuple(Subspace(k, metrics.random_subspace_cos(width, k), weight_v1(table, "res-none", "subspace_cos", "input", k),
                               weight_v1(table, "res-relu", "subspace_cos", "input", k),
                               fall_from_peak(table, "subspace_cos", "input", k, condition="res-none"))
                      for k in SUBSPACE_KS)
    v1_fall = weight_v1_fall(table, "res-none")
    if not v1_fall.falls:
        reading = "no-v1-fall"
    elif all(s.none_fall.holds for s in subspaces):
        reading = "only-v1"
    elif all(s.none_fall.falls for s in subspaces):
        reading = "subspace-lost"
    else:
        reading = "mixed"
    gaps = at_final_step(_finite_runs(gap_per_run(table), table))
    pairs = gap_and_turn(table)
    none, relu = pairs[pairs["condition"] == "res-none"], pairs[pairs["condition"] == "res-relu"]
    correlation = rank_correlation(none["turn_rate"], none["gap"], n_boot=GAP_TURN_DRAWS)
    return Spectrum(v1_fall, subspaces, reading,
                    {c: estimate(gaps.loc[gaps["condition"] == c, "value"]) for c in ("res-none", "res-relu")},
                    correlation, _per_run_rank_correlation(none),
                    rank_correlation(relu["turn_rate"], relu["gap"], n_boot=GAP_TURN_DRAWS),
                    verdict_for_correlation(correlation, GAP_TURN_SIGN))


# The learning-rate and batch tests (results.drift_tests; the readings are those of DRIFT_TESTS, written down before
# any was run). Each gives "for" (what accumulated drift predicts), "against" (what it does not), or "neither".

def _v1_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Per finite run and snapshot, weight v1 (the layer-pair mean)."""
    return _finite_runs(per_run(table, "weight_cos", "input", 1), table)


def fall_rates(table: pd.DataFrame, step: int) -> pd.DataFrame:
    """Per finite run (``seed``), weight v1 lost per 1,000 steps ``before`` ``step`` (from the run's peak over the
    snapshots up to ``step``, to its snapshot at or before ``step``; 0 where the peak is that snapshot) and ``after``
    it (from there to the run's end), and weight v1 at that snapshot (``at_step``)."""
    rows = []
    for seed, run in _v1_runs(table).groupby("seed"):
        upto = run[run["step"] <= step]
        at, end = upto.iloc[-1], run.iloc[-1]
        peak = upto.loc[upto["value"].idxmax()]
        before = 1000 * (peak["value"] - at["value"]) / (at["step"] - peak["step"]) if at["step"] > peak["step"] else 0.0
        after = 1000 * (at["value"] - end["value"]) / (end["step"] - at["step"]) if end["step"] > at["step"] else math.nan
        rows.append(dict(seed=seed, at_step=float(at["value"]), before=before, after=after))
    return pd.DataFrame(rows, columns=["seed", "at_step", "before", "after"])


def rate_margin(total_steps: int, step: int) -> float:
    """The margin of a difference of fall rates (per 1,000 steps): the book's margin lost over the steps after ``step``."""
    return 1000 * DIFFERENCE_MARGIN / max(1, total_steps - step)


@dataclass(frozen=True)
class StepTest:
    """An lr step test: weight v1 at the switch and at the end, the fall per 1,000 steps before and after the switch,
    the rate margin, ``reading`` and what it says of drift (``drift``: "for", "against", "neither").

    ``lr step-down``: "recovers" (end above switch by the difference rule: an equilibrium set by the noise level,
    against), "partly-recovers" (neither), "keeps-falling" (switch above end by the rule) or "stays" (both for:
    accumulated drift). ``lr step-up``: "falls-faster" (the fall after the switch faster than before by the rule with
    :func:`rate_margin`: for), "partly-faster" (neither), "not-faster" (against)."""

    name: str
    switch: int
    at_switch: Estimate
    at_end: Estimate
    #: per run, v1 at the end minus at the switch; the fall per 1,000 steps after minus before it
    change: Estimate
    rate_change: Estimate
    fall_before: Estimate
    fall_after: Estimate
    margin: float
    reading: str
    drift: str


def step_test(results: Results, name: str) -> StepTest | None:
    """The :class:`StepTest` of drift test ``name`` (None where it was not run)."""
    table = results.drift_tests.get(name)
    if table is None or table.empty:
        return None
    total = results.settings.base.steps
    switch = switch_step(total)
    rates = fall_rates(table, switch)
    at_switch, at_end = estimate(rates["at_step"]), weight_v1(table, "res-none")
    change = estimate(at_final_step(_v1_runs(table)).set_index("seed")["value"] - rates.set_index("seed")["at_step"])
    before, after = estimate(rates["before"]), estimate(rates["after"])
    rate_change = estimate(rates["after"] - rates["before"])
    margin = rate_margin(total, switch)
    if DRIFT_TESTS[name]["lr_step_factor"] < 1:
        recovery = verdict_for_difference(at_end, at_switch)
        if recovery == "reproduced":
            reading, drift = "recovers", "against"
        elif recovery == "partly reproduced":
            reading, drift = "partly-recovers", "neither"
        else:
            reading, drift = ("keeps-falling" if verdict_for_difference(at_switch, at_end) == "reproduced" else "stays"), "for"
    else:
        faster = verdict_for_difference(after, before, margin=margin)
        reading, drift = {"reproduced": ("falls-faster", "for"), "partly reproduced": ("partly-faster", "neither")}.get(
            faster, ("not-faster", "against"))
    return StepTest(name, switch, at_switch, at_end, change, rate_change, before, after, margin, reading, drift)


#: A run is still rising at its end when its peak of weight v1 lies in the last this share of its steps.
STILL_RISING_SHARE = 0.1


@dataclass(frozen=True)
class EqualDistance:
    """``lr 3e-4 long`` against the base run (res-none, lr 1e-3) at equal summed learning rate (the long run's end,
    ``long_final``, against the base run's, ``base_final``) and at equal steps (``at_base_steps``); runs of the long test
    still rising at their end (:data:`STILL_RISING_SHARE`). ``verdict``: :func:`verdict_for_value` of ``long_final``
    against ``base_final``'s mean (the curves coincide on the summed-lr axis). ``drift``: "for" where they coincide,
    else "neither": a long run that ends higher is what both an equilibrium set by the noise and a diffusive drift
    (a net turn growing as lr x sqrt(steps)) predict."""

    lr: float
    base_lr: float
    steps: int
    base_steps: int
    long_final: Estimate
    base_final: Estimate
    at_base_steps: Estimate
    still_rising: int
    runs: int
    verdict: str
    drift: str


def equal_distance(results: Results) -> EqualDistance | None:
    """The :class:`EqualDistance` reading of ``lr 3e-4 long`` (None where it was not run)."""
    table = results.drift_tests.get("lr 3e-4 long")
    if table is None or table.empty:
        return None
    base = results.settings.base
    runs = _v1_runs(table)
    steps = int(runs["step"].max())
    peaks = runs.loc[runs.groupby("seed")["value"].idxmax()]
    last = runs.groupby("seed")["step"].max()
    rising = int((peaks.set_index("seed")["step"] >= (1 - STILL_RISING_SHARE) * last).sum())
    long_final, base_final = weight_v1(table, "res-none"), weight_v1(results.interventions["adam"], "res-none")
    verdict = verdict_for_value(long_final, base_final.mean)
    return EqualDistance(DRIFT_TESTS["lr 3e-4 long"]["optimizer"].lr, base.optimizer.lr, steps, base.steps, long_final,
                         base_final, estimate(at_step(runs, base.steps)["value"]), rising, runs["seed"].nunique(),
                         verdict, "for" if verdict == "reproduced" else "neither")


#: What a verdict of drift's prediction says of drift; and the verdict of a claim that states drift's prediction, from what its test says.
_VERDICT_OF_DRIFT = {"for": "reproduced", "neither": "inconclusive", "against": "not reproduced"}


#: The batch tests and their batch sizes (the base run, :attr:`Condition2Settings.base`, is the middle dose).
BATCH_TESTS = ("batch 64", "batch 256")


@dataclass(frozen=True)
class BatchDose:
    """res-none's final weight v1 per batch size (the base run's included); ``verdict``: the largest batch above the
    smallest by the difference rule (gradient noise sets the pace of drift); ``drift`` "for" / "against" / "neither"
    for reproduced / not / partly."""

    finals: dict[int, Estimate]
    verdict: str
    drift: str


def batch_dose(results: Results) -> BatchDose | None:
    """The :class:`BatchDose` (None unless both batch tests ran)."""
    tables = {DRIFT_TESTS[name]["batch_size"]: results.drift_tests.get(name) for name in BATCH_TESTS}
    if any(t is None or t.empty for t in tables.values()):
        return None
    tables[results.settings.base.batch_size] = results.interventions["adam"]
    finals = {size: weight_v1(tables[size], "res-none") for size in sorted(tables)}
    verdict = verdict_for_difference(finals[max(finals)], finals[min(finals)])
    return BatchDose(finals, verdict, DRIFT_OF_VERDICT[verdict])


@dataclass(frozen=True)
class CosineCourse:
    """The cosine intervention: per condition, weight v1 lost per 1,000 steps before and after half the horizon
    (:func:`fall_rates`), where the learning rate has fallen to half."""

    fall_before: dict[str, Estimate]
    fall_after: dict[str, Estimate]


def cosine_course(results: Results) -> CosineCourse | None:
    """The :class:`CosineCourse` (None where the cosine intervention was not run)."""
    table = results.interventions.get("cosine")
    if table is None:
        return None
    half = results.settings.base.steps // 2
    rates = {c: fall_rates(table[table["condition"] == c], half) for c in ("res-none", "res-relu")}
    return CosineCourse({c: estimate(r["before"]) for c, r in rates.items()},
                        {c: estimate(r["after"]) for c, r in rates.items()})


def cosine_lr(results: Results, steps) -> np.ndarray:
    """The cosine intervention's learning rate at ``steps`` (:func:`geocont.training.cosine_factor`)."""
    factor = cosine_factor(results.settings.base.steps)
    return np.array([results.settings.base.optimizer.lr * factor(int(s)) for s in steps])


@dataclass(frozen=True)
class DriftTests:
    """The learning-rate and batch tests that ran (None where one did not)."""

    step_down: StepTest | None
    step_up: StepTest | None
    equal_distance: EqualDistance | None
    batch: BatchDose | None

    def readings(self) -> dict[str, str]:
        """``{test: "for" | "against" | "neither"}`` of the tests that ran."""
        found = {"lr step-down": self.step_down, "lr step-up": self.step_up, "lr 3e-4 long": self.equal_distance,
                 "batch dose": self.batch}
        return {name: test.drift for name, test in found.items() if test is not None}


def forks_found(results: Results) -> ForkFindings | None:
    """The forks from the formed state (:func:`.forks.fork_findings`; None where none ran)."""
    return fork_findings(results.forks, results.settings.base.steps)


def motion_readings(results: Results) -> dict[str, str]:
    """The tests of motion along the symmetry that ran, with what they say: the function-preserving motion of the
    logits (:func:`function_preserving_motion`, the seeds whose loss rose left out) and the conserved balance
    (:func:`.forks.balance_readings`)."""
    moving = function_preserving_motion(results)
    readings = {} if moving is None else {"function-preserving motion": DRIFT_OF_VERDICT[moving.verdict]}
    return {**readings, **balance_readings(forks_found(results))}


def tally(readings: dict[str, str]) -> str:
    """A group of readings' vote: "for" where more say "for" than "against", "against" for the reverse, else
    "neither"."""
    votes = list(readings.values())
    return ("for" if votes.count("for") > votes.count("against") else
            "against" if votes.count("against") > votes.count("for") else "neither")


def drift_readings(results: Results) -> dict[str, str]:
    """Every learning-rate and batch test of drift that ran and applies, with what it says: the step tests, the
    equal-distance and batch tests, and the forks. Where the forks ran, the lr step-up does not count: at lr 3e-4 the linear net is still forming its
    frame at the switch, so there is no formed frame to lose faster (the forks test that from a formed state)."""
    readings = drift_tests_found(results).readings()
    forks = fork_readings(forks_found(results))
    if forks:
        readings.pop("lr step-up", None)
    return {**readings, **forks}


def drift_tests_found(results: Results) -> DriftTests:
    return DriftTests(step_test(results, "lr step-down"), step_test(results, "lr step-up"), equal_distance(results),
                      batch_dose(results))


# A spike detector calibrated on the data it judges. The rules compared: a trace point is a spike when its loss
# exceeds f x the running minimum of the earlier trace points (f in SPIKE_FACTORS), or RECENT_MEDIAN_FACTOR x the
# median of the previous RECENT_MEDIAN_WINDOW trace points, and the memorisation floor in both.
# The choice, fixed before any count was read: the rules are tried in the order of spike_rules() (the running
# minimum from its most sensitive factor up, then the recent median); the chosen rule is the first whose mean number
# of events per res-relu run (headline dataset, Adam: runs the paper does not expect to spike) is at most
# CALIBRATION_EVENTS_PER_RUN. It is then read on res-none: res-none spikes when its events per run exceed
# res-relu's by more than SPIKE_EXCESS and two pooled seed sds (the difference rule with that margin).
SPIKE_FACTORS = (2.0, 3.0, 10.0)
RECENT_MEDIAN_FACTOR, RECENT_MEDIAN_WINDOW = 3.0, 10
CALIBRATION_EVENTS_PER_RUN = 1.0
SPIKE_EXCESS = 1.0


@dataclass(frozen=True)
class SpikeRule:
    """A spike rule: loss above ``factor`` x the running minimum (``window`` None) or x the median of the previous
    ``window`` trace points (:func:`geocont.instability.instability_events`)."""

    factor: float
    window: int | None = None

    @property
    def label(self) -> str:
        reference = "running minimum" if self.window is None else f"median of the previous {self.window}"
        return f"{self.factor:g}× {reference}"


def spike_rules() -> tuple[SpikeRule, ...]:
    """The rules in the order the calibration tries them."""
    return (*(SpikeRule(f) for f in SPIKE_FACTORS), SpikeRule(RECENT_MEDIAN_FACTOR, RECENT_MEDIAN_WINDOW))


def spike_counts(table: pd.DataFrame, rule: SpikeRule) -> pd.DataFrame:
    """Per run with a trace: its events under ``rule`` and the step of the first (NaN where none)."""
    runs = select(table, "trace_loss")[RUN_KEYS].drop_duplicates()
    events = instability.instability_events(table, factor=rule.factor, window=rule.window)
    counts = events.groupby(RUN_KEYS, observed=True).agg(events=("event", "size"), first_event=("start", "min"))
    out = runs.merge(counts.reset_index(), on=RUN_KEYS, how="left")
    return out.assign(events=out["events"].fillna(0).astype(int))


@dataclass(frozen=True)
class SpikeCalibration:
    """Per rule and condition (``rows``: runs, runs with events, events per run, first spike steps), the chosen rule
    (None where none passes the calibration), its events per run on res-relu and res-none, and ``reading``: "spikes",
    "unclear" (partly by the rule), "no-spikes", or "no-rule"."""

    rows: pd.DataFrame
    chosen: SpikeRule | None
    relu: Estimate
    none: Estimate
    verdict: str
    reading: str


#: The verdict of the claim "res-none spikes no more than res-relu" from the calibrated detector's reading.
_SPIKE_CLAIM = {"spikes": "not reproduced", "unclear": "inconclusive", "no-spikes": "reproduced"}


def spike_calibration(results: Results) -> SpikeCalibration | None:
    """The calibrated spike detector on the headline comparison (None where its runs have no trace)."""
    table = results.comparison[results.settings.headline]
    if not recorded(table, "trace_loss"):
        return None
    rows, per_rule = [], {}
    for rule in spike_rules():
        counts = spike_counts(table, rule)
        for condition in ("res-relu", "res-none"):
            mine = counts[counts["condition"] == condition]
            per_rule[(rule, condition)] = estimate(mine["events"].astype(float))
            rows.append(dict(rule=rule.label, condition=condition, runs=len(mine),
                             runs_with_events=int((mine["events"] > 0).sum()), events_mean=per_rule[(rule, condition)].mean,
                             events_sd=per_rule[(rule, condition)].std,
                             first_events=tuple(int(s) for s in mine["first_event"].dropna().sort_values())))
    chosen = next((rule for rule in spike_rules()
                   if per_rule[(rule, "res-relu")].mean <= CALIBRATION_EVENTS_PER_RUN), None)
    if chosen is None:
        nothing = Estimate(math.nan, math.nan, 0)
        return SpikeCalibration(pd.DataFrame(rows), None, nothing, nothing, "not tested", "no-rule")
    relu, none = per_rule[(chosen, "res-relu")], per_rule[(chosen, "res-none")]
    verdict = verdict_for_difference(none, relu, margin=SPIKE_EXCESS)
    reading = {"reproduced": "spikes", "partly reproduced": "unclear"}.get(verdict, "no-spikes")
    return SpikeCalibration(pd.DataFrame(rows), chosen, relu, none, verdict, reading)


def drift_claims(results: Results, builder: ClaimsBuilder) -> None:
    """The direct tests of drift (headline dataset), into ``builder``: a row for each, "not tested" where its runs or
    metrics are missing. A test of drift's prediction reads "reproduced" where the test says what drift predicts."""
    tag = f"({results.settings.headline})"
    missing = Estimate(math.nan, math.nan, 0)

    found = function_preserving_motion(results)
    if found is None:
        builder.add("function-preserving-motion", "The linear net's layers move while its function stands still",
                    f"log2(weight / function motion), res-none minus res-relu {tag}", "drift (our test)", missing,
                    math.nan, "not tested", note="motion not recorded in these runs")
    else:
        none, relu = found.none.log2_ratio, found.relu.log2_ratio
        builder.add("function-preserving-motion", "The linear net's layers move while its function stands still",
                    f"log2(weight / function motion), res-none minus res-relu {tag}", "drift (our test)",
                    difference(none, relu), math.nan, found.verdict,
                    note=f"res-none {none}; res-relu {relu}; seeds whose loss rose, left out: res-none "
                         f"{len(found.none.left_out)}, res-relu {len(found.relu.left_out)}; every seed: res-none "
                         f"{found.none.all_seeds_log2_ratio}, res-relu {found.relu.all_seeds_log2_ratio}; test loss "
                         f"change over the second half: res-none {found.none.test_loss_change}, res-relu "
                         f"{found.relu.test_loss_change}")

    shape = spectrum(results)
    for k in SUBSPACE_KS:
        key, claim = f"linear-subspace-k{k}-falls", f"The linear net loses the continuity of its top-{k} subspace"
        quantity = f"res-none top-{k} subspace cos: peak minus final {tag}"
        sub = None if shape is None else next(s for s in shape.subspaces if s.k == k)
        if sub is None:
            builder.add(key, claim, quantity, "drift (our test)", missing, math.nan, "not tested",
                        note="subspace_cos not recorded in these runs")
        else:
            fall = sub.none_fall
            builder.add(key, claim, quantity, "drift (our test)", fall.drop, sub.baseline, fall.verdict,
                        note=f"peak {fall.peak}, final {fall.final}; res-relu final {sub.relu}")
    claim, quantity = "v1 turns more where the spectral gap is small", f"ρ(turn rate, σ1/σ2), res-none {tag}"
    if shape is None:
        builder.add("linear-gap-turn-correlation", claim, quantity, "negative (our test)", missing, math.nan,
                    "not tested", note="sigma2 not recorded in these runs")
    else:
        builder.add("linear-gap-turn-correlation", claim, quantity, "negative (our test)", shape.turn_vs_gap.rho,
                    math.nan, shape.verdict, std=shape.per_run.std, n=shape.per_run.n,
                    note=f"pooled {shape.turn_vs_gap}; per run {shape.per_run}; res-relu {shape.relu_turn_vs_gap}")

    tests = drift_tests_found(results)
    superseded = bool(results.forks) and tests.step_up is not None  # drift_readings: the forks test it from a formed state
    for key, name, claim, quantity, test in (
            ("lr-step-down", "lr step-down", "After an lr step-down the linear net does not recover its continuity",
             "res-none weight v1: end minus switch", tests.step_down),
            ("lr-step-up", "lr step-up", "After an lr step-up the linear net's continuity falls faster",
             "res-none weight v1 lost per 1,000 steps: after minus before the switch", tests.step_up)):
        if test is None:
            builder.add(key, claim, f"{quantity} {tag}", "accumulated drift (our test)", missing, results.baseline,
                        "not tested", note=f"{name} not run in this build")
            continue
        not_applicable = superseded and test.name == "lr step-up"
        builder.add(key, claim, f"{quantity} {tag}", "accumulated drift (our test)",
                    test.change if test.name == "lr step-down" else test.rate_change, results.baseline,
                    "not tested" if not_applicable else _VERDICT_OF_DRIFT[test.drift],
                    note=("not applicable: at lr 3e-4 the frame is still forming at the switch (the forks test a faster "
                          "rate from the formed state); " if not_applicable else "")
                    + f"{test.reading}; at the switch {test.at_switch}, at the end {test.at_end}; fall per 1,000 "
                    f"steps before {test.fall_before}, after {test.fall_after}")
    equal = tests.equal_distance
    claim = "At equal summed learning rate, lr 3e-4 ends where lr 1e-3 ends"
    quantity = f"res-none weight v1 at the end, lr 3e-4 over 10/3 x the steps {tag}"
    if equal is None:
        builder.add("lr-equal-distance", claim, quantity, "drift (our test)", missing, results.baseline, "not tested",
                    note="lr 3e-4 long not run in this build")
    else:
        builder.add("lr-equal-distance", claim, quantity, f"{equal.base_final.mean:.2f} (the base run)", equal.long_final,
                    results.baseline, equal.verdict,
                    note=f"base {equal.base_final}; at equal steps {equal.at_base_steps}; "
                         f"{equal.still_rising} of {equal.runs} runs still rising at the end")
    dose = tests.batch
    claim = "A larger batch keeps more of the linear net's continuity"
    if dose is None:
        builder.add("batch-dose", claim, f"res-none weight v1, batch 256 minus batch 64 {tag}", "drift (our test)",
                    missing, results.baseline, "not tested", note="batch tests not run in this build")
    else:
        high, low = dose.finals[max(dose.finals)], dose.finals[min(dose.finals)]
        builder.add("batch-dose", claim, f"res-none weight v1, batch {max(dose.finals)} minus batch {min(dose.finals)} {tag}",
                    "drift (our test)", difference(high, low), results.baseline, dose.verdict,
                    note="; ".join(f"batch {size}: {value}" for size, value in dose.finals.items()))

    fork_claims(forks_found(results), builder, tag, results.baseline)

    spikes = spike_calibration(results)
    claim = "The linear net spikes no more than the baseline (a spike detector calibrated on res-relu)"
    quantity = f"loss spikes per run, res-none minus res-relu {tag}"
    if spikes is None or spikes.chosen is None:
        builder.add("spike-detector", claim, quantity, "drift, not instability (our test)", missing, math.nan,
                    "not tested", note="no trace in these runs" if spikes is None else "no rule passed the calibration")
    else:
        builder.add("spike-detector", claim, quantity, "drift, not instability (our test)",
                    difference(spikes.none, spikes.relu), math.nan, _SPIKE_CLAIM[spikes.reading],
                    note=f"rule: {spikes.chosen.label}; res-none {spikes.none}, res-relu {spikes.relu} events per run")


@dataclass(frozen=True)
class Explanation:
    """One candidate explanation of the linear net's fall: its computed verdict ("supported", "not supported"
    or "inconclusive") and the numbers it rests on (the chapter's prose words them)."""

    name: str
    verdict: str
    numbers: dict[str, Any]


def explanations(results: Results) -> list[Explanation]:
    """Instability, drift and memorisation judged by the rules stated in the chapter (module docstrings
    of :mod:`geocont.instability` and the rules below), each with its numbers. A fall is the book's
    fall rule (:class:`geocont.statistics.Fall`: ``falls``, a clear fall; ``holds``, less than the margin).

    * instability is supported when at least half of res-none's fall (peak to final, headline, Adam)
      happens across instability events and no intervention without events makes res-none fall;
      not supported when an intervention whose runs had no event still makes it fall while less
      than half the Adam fall happened across events;
    * memorisation is supported when every dataset on which res-none falls has every run memorised
      and most of the headline fall comes after the memorised step; not supported when res-none
      falls on a dataset where no run memorised its training set;
    * rotation drift rests on two groups of positive tests, each group a vote "for", "against" or "neither"
      (:func:`tally`: more "for" than "against", the reverse, else neither): motion along the symmetry
      (:func:`motion_readings`: the logits' function-preserving motion and the conserved balance) and how
      continuity follows the learning rate and batch (:func:`drift_readings`). It is supported when both vote
      "for" and neither instability nor memorisation is supported (the exclusion, supporting evidence); not
      supported when one votes "against" and none "for"; not tested when no test of either group could be
      read; inconclusive otherwise.
    """
    rows = intervention_rows(results).set_index(["intervention", "condition"])
    base = rows.loc[("adam", "res-none")]
    headline = results.comparison[results.settings.headline]
    summaries = instability.run_summary(headline[headline["condition"] == "res-none"])
    # the split of the fall is read off the trace, run by run: the fall from each run's peak to its end,
    # and the part of it that happened across instability events
    fall = float(summaries["fall_from_peak"].mean())
    across = float(summaries["fall_across_events"].mean())
    share = across / fall if fall > 0 else math.nan
    stable = [name for name in rows.index.get_level_values(0).unique()
              if rows.loc[(name, "res-none"), "runs_with_events"] == 0]
    falls_without_events = [name for name in stable if rows.loc[(name, "res-none"), "falls"]]
    if not math.isnan(share) and share >= 0.5 and not falls_without_events:
        instability_verdict = "supported"
    elif falls_without_events and (math.isnan(share) or share < 0.5):
        instability_verdict = "not supported"
    else:
        instability_verdict = "inconclusive"
    out = [Explanation("instability", instability_verdict, dict(
        headline=results.settings.headline, runs_with_events=int(base["runs_with_events"]), runs=int(base["seeds"]),
        events=int(base["events"]), fall=fall, across=across, share=share,
        without_events=[(name, float(rows.loc[(name, "res-none"), "fall"]), float(rows.loc[(name, "res-relu"), "fall"]))
                        for name in stable]))]

    comparison = comparison_rows(results)
    linear = comparison[comparison["condition"] == "res-none"].set_index("dataset")
    falling = linear[linear["falls"].astype(bool)]
    unmemorised_falls = [d for d, r in falling.iterrows() if r["memorised_runs"] == 0]
    after = -float(summaries["change_after_memorised"].mean())
    if unmemorised_falls:
        memorisation_verdict = "not supported"
    elif len(falling) and (falling["memorised_runs"] == falling["seeds"]).all() and fall > 0 and after >= 0.5 * fall:
        memorisation_verdict = "supported"
    else:
        memorisation_verdict = "inconclusive"
    memorisation = Explanation("memorisation", memorisation_verdict, dict(
        datasets=[(d, float(r["v1_peak"] - r["v1_final"]), int(r["memorised_runs"]), int(r["seeds"]))
                  for d, r in linear.iterrows()]))

    moving = function_preserving_motion(results)
    motions, readings = motion_readings(results), drift_readings(results)
    motion_vote, tests_vote = tally(motions), tally(readings)
    votes = (motion_vote, tests_vote)
    if not motions and not readings:
        drift_verdict = "not tested"
    elif votes == ("for", "for") and "supported" not in (instability_verdict, memorisation_verdict):
        drift_verdict = "supported"
    elif "against" in votes and "for" not in votes:
        drift_verdict = "not supported"
    else:
        drift_verdict = "inconclusive"
    kept = [name for name in falls_without_events if rows.loc[(name, "res-relu"), "holds"]]
    out.append(Explanation("rotation drift", drift_verdict, dict(
        motion=moving, motion_vote=motion_vote, motions=motions, readings=readings, tests_vote=tests_vote,
        alternatives=(instability_verdict, memorisation_verdict), none_rate=float(base["drift_rate"]),
        none_rate_sd=float(base["drift_rate_sd"]), relu_rate=float(rows.loc[("adam", "res-relu"), "drift_rate"]),
        relu_rate_sd=float(rows.loc[("adam", "res-relu"), "drift_rate_sd"]), kept=kept)))
    out.append(memorisation)
    return out


@dataclass(frozen=True)
class SharedAxes:
    """res-relu's final weight v1 under Adam and under Adam in random per-layer frames, and the share of its
    continuity above the random level that Adam's shared axes supply (NaN where Adam's is not above it)."""

    adam: Estimate
    rotated: Estimate
    share: float


def shared_axes(results: Results) -> SharedAxes | None:
    """What Adam's per-coordinate axes, shared by all layers, supply of res-relu's continuity (None if not run)."""
    if "adam-rotated" not in results.interventions:
        return None
    adam = weight_v1(results.interventions["adam"], "res-relu")
    rotated = weight_v1(results.interventions["adam-rotated"], "res-relu")
    share = (adam.mean - rotated.mean) / (adam.mean - results.baseline) if adam.mean > results.baseline else math.nan
    return SharedAxes(adam, rotated, share)


def weight_decay_prediction(results: Results) -> tuple[str, Estimate, Estimate]:
    """Our prediction (not the paper's): weight decay keeps more of res-none's continuity than Adam."""
    if "adamw 0.1" not in results.interventions:
        return "not tested", Estimate(math.nan, math.nan, 0), Estimate(math.nan, math.nan, 0)
    with_decay = weight_v1(results.interventions["adamw 0.1"], "res-none")
    without = weight_v1(results.interventions["adam"], "res-none")
    return verdict_for_difference(with_decay, without), with_decay, without


@dataclass(frozen=True)
class Formation:
    """Whether continuity formed at all under SGD, beside Adam (what the SGD rows can say).

    ``linear``: "no-sgd" (no SGD run trained), "all-diverged", "never-formed" or "formed"
    (:func:`geocont.statistics.formed`); ``baseline``: how res-relu's peaks compare across the optimizers,
    "not-comparable", "lower-under-sgd" / "higher-under-sgd" (a difference by the book's rule) or "alike".
    """

    lr: float | None
    rows: pd.DataFrame
    linear: str
    baseline: str
    relu_gap: float


def formation(results: Results) -> Formation:
    """The :class:`Formation` finding from :func:`formation_rows`."""
    rows = formation_rows(results)
    if rows.empty or "sgd" not in set(rows["optimizer"]):
        return Formation(results.sgd_choice.lr, rows, "no-sgd", "not-comparable", math.nan)
    by = rows.set_index(["condition", "optimizer"])

    def peak(condition: str, optimizer: str) -> Estimate | None:
        if (condition, optimizer) not in by.index:
            return None
        one = by.loc[(condition, optimizer)]
        return Estimate(one.peak_mean, one.peak_sd, int(one.seeds))

    if ("res-none", "sgd") not in by.index:
        linear = "all-diverged"
    else:
        linear = "formed" if by.loc[("res-none", "sgd"), "formed"] else "never-formed"
    adam, sgd = peak("res-relu", "adam"), peak("res-relu", "sgd")
    if adam is None or sgd is None:
        return Formation(results.sgd_choice.lr, rows, linear, "not-comparable", math.nan)
    if verdict_for_difference(adam, sgd) == "reproduced":
        baseline = "lower-under-sgd"
    elif verdict_for_difference(sgd, adam) == "reproduced":
        baseline = "higher-under-sgd"
    else:
        baseline = "alike"
    return Formation(results.sgd_choice.lr, rows, linear, baseline, adam.mean - sgd.mean)


@dataclass(frozen=True)
class SeedGroup:
    """One group of seeds' final weight v1 (headline dataset): its estimate, diverged seeds, and its shape."""

    condition: str
    optimizer: str
    value: Estimate
    diverged: int
    shape: Modality


def seed_groups_found(results: Results) -> list[SeedGroup]:
    """Every group of :func:`seed_values`, with whether it is bimodal (:func:`modality`)."""
    out = []
    for (condition, optimizer), group in seed_values(results).groupby(["condition", "optimizer"]):
        finite = group.loc[~group["diverged"], "value"]
        out.append(SeedGroup(condition, optimizer, estimate(finite), int(group["diverged"].sum()), modality(finite)))
    return out


def halves_agree(results: Results) -> dict[str, bool]:
    """Per optimizer: whether both halves of the linear net's seeds give the verdicts of all its seeds."""
    return {optimizer: group["low_verdict"].nunique() == 1 and group["relu_above_verdict"].nunique() == 1
            for optimizer, group in half_verdicts(results).groupby("optimizer")}


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims: Condition 2 on every dataset (the headline dataset's the verdicts of record), then the
    direct tests of drift on the headline dataset."""
    builder = ClaimsBuilder(CHAPTER.name, dataset=results.settings.headline)
    comparison_claims(results, builder)
    drift_claims(results, builder)
    drift_verdict_claim(results, builder)
    return builder.table()


#: The drift explanation's verdict as a claim's.
_CLAIM_OF_EXPLANATION = {"supported": "reproduced", "not supported": "not reproduced", "inconclusive": "inconclusive",
                         "not tested": "not tested"}


def drift_verdict_claim(results: Results, builder: ClaimsBuilder) -> None:
    """The explanation's verdict on rotation drift (:func:`explanations`) as a claim: its number is the share of the
    tests that read for drift among those that read for or against it (a coin's 0.5 beside it); it adds no test."""
    drift = next(found for found in explanations(results) if found.name == "rotation drift")
    readings = {**drift.numbers["motions"], **drift.numbers["readings"]}
    votes = list(readings.values())
    decisive = votes.count("for") + votes.count("against")
    builder.add("rotation-drift", claim="The linear net loses its continuity by rotation drift",
                quantity=f"share of the direct tests for drift among those for or against ({results.settings.headline})",
                paper="the mechanism of Condition 2", ours=votes.count("for") / decisive if decisive else math.nan,
                baseline=0.5, verdict=_CLAIM_OF_EXPLANATION[drift.verdict], n=len(results.settings.seeds),
                note=f"motion along the symmetry votes {drift.numbers['motion_vote']}, the learning-rate and batch "
                     f"tests vote {drift.numbers['tests_vote']}; instability {drift.numbers['alternatives'][0]}, "
                     f"memorisation {drift.numbers['alternatives'][1]}; "
                     + "; ".join(f"{name}: {vote}" for name, vote in readings.items()))
