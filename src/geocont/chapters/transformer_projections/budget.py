"""What the chapter's runs cost at ``cpu`` against the book's time budget, and what a re-run within it leaves out."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ...config import LMRunConfig
from ...sweeps import predicted_wall_seconds
from .. import lm_runs
from ..lm_runs import LM_VARIANTS, MAIN_VARIANTS, LMChapterSettings
from .settings import CHAPTER, CONTROL_CORPUS, LONG_FACTOR

#: Measured cost of one training step of the ``cpu`` shape (batch 16 x 128 tokens) at one torch
#: thread on this project's 2-core machine, by layer count, in seconds, the other core idle:
#: 4 layers 0.189 s (``python benchmarks/bench_lm_recording.py --steps 200``), 8 layers 0.338 s
#: (``--steps 120 --n-layers 8``). Recording (28 snapshots, each with the validation loss, 0.37 s
#: and 0.62 s per snapshot) adds about 1% at the ``cpu`` schedule. A 16,000-step 4-layer run with recording took
#: 3,335 s (0.21 s per step) on a worker whose neighbour trained too, and up to 6,437 s where the machine was
#: shared with more work. :func:`.page_text.budget_note` predicts the chapter's cold time from them and gives what
#: the stored runs took beside it.
CPU_SECONDS_PER_STEP = {4: 0.189, 8: 0.338}


#: The book's time budget for this chapter at ``cpu``, cold, in minutes.
CPU_BUDGET_MINUTES = 40


#: The full design at ``cpu`` (the ``cpu`` preset runs all of it; :func:`.page_text.budget_note` says what it
#: costs and what a cheaper re-run leaves out).
FULL_CPU_DESIGN = dict(
    seeds=(0, 1, 2),
    other_seeds=(0,),
    variants=tuple(LM_VARIANTS),
    depth_seeds=(0,),
    long_factor=LONG_FACTOR["cpu"],
    control_corpus=CONTROL_CORPUS["cpu"],
    control_seeds=(0,),
)


#: A re-run that fits the budget: two seeds of ``silu`` and ``none`` trained to a quarter of the horizon, no other
#: variant, no deeper or longer model and no memorisation control (its claims are judged at its own last step).
BUDGET_CPU_DESIGN = dict(
    seeds=(0, 1),
    other_seeds=(),
    variants=MAIN_VARIANTS,
    depth_seeds=(),
    long_factor=0,
    control_corpus="none",
    steps=4000,
    early_step=1000,
)


def run_seconds(config: LMRunConfig) -> float:
    """Predicted seconds of one ``cpu``-width run at one thread: :data:`CPU_SECONDS_PER_STEP`,
    interpolated linearly in the number of layers between the two measured depths."""
    (l4, t4), (l8, t8) = sorted(CPU_SECONDS_PER_STEP.items())
    return config.steps * (t4 + (t8 - t4) * (config.shape.n_layers - l4) / (l8 - l4))


def predicted_minutes(settings: LMChapterSettings, workers: int = 2) -> float:
    """Predicted cold wall time of the runs, in minutes, on ``workers`` one-thread workers: the
    longest-first schedule of the runs' predicted durations (:func:`run_seconds`), plus a minute for
    the tokenizer, the workers' start and the figures, and one for analysing the pretrained checkpoint."""
    durations = (run_seconds(c) for c in lm_runs.run_configs(settings))
    return predicted_wall_seconds(durations, workers) / 60 + 1 + (1 if settings.pretrained else 0)


@dataclass(frozen=True)
class RunCount:
    """One run label and its number of seeds."""

    label: str
    seeds: int

    @property
    def number(self) -> str:
        """ "one" seed or "several" (the variant of its wording)."""
        return "one" if self.seeds == 1 else "several"


def run_counts(settings: LMChapterSettings) -> tuple[RunCount, ...]:
    """The run labels of ``settings`` with their number of seeds, in order (the longer run last)."""
    return tuple(RunCount(label, len(configs)) for label, configs in settings.all_configs().items())


@dataclass(frozen=True)
class BudgetFinding:
    """What the chapter runs, and at ``cpu`` its predicted cold cost against the budget.

    ``costed``: the cost is predicted (the ``cpu`` scale only); ``over_budget``: the prediction is
    over :data:`CPU_BUDGET_MINUTES`, and then ``cheap_*`` and ``rerun_flags`` describe the re-run
    within it (:data:`BUDGET_CPU_DESIGN`); ``cut``: the labels of which this build leaves out seeds
    that the full design (:data:`FULL_CPU_DESIGN`, ``full_*``) runs; ``long_*``: the longer run (0 steps: none)."""

    scale: str
    steps: int
    runs: tuple[RunCount, ...]
    long_label: str = ""
    long_steps: int = 0
    long_seed: int = 0
    costed: bool = False
    minutes: float = math.nan
    n_runs: int = 0
    step_seconds_4: float = CPU_SECONDS_PER_STEP[4]
    step_seconds_8: float = CPU_SECONDS_PER_STEP[8]
    budget_minutes: int = CPU_BUDGET_MINUTES
    over_budget: bool = False
    full_runs: tuple[RunCount, ...] = ()
    full_minutes: float = math.nan
    cheap_runs: tuple[RunCount, ...] = ()
    cheap_minutes: float = math.nan
    cheap_seeds: int = 0
    cheap_steps: int = 0
    rerun_flags: str = ""
    cut: tuple[str, ...] = ()


def budget_finding(settings: LMChapterSettings) -> BudgetFinding:
    """:class:`BudgetFinding` of ``settings``."""
    long = [c for configs in settings.long_configs().values() for c in configs]
    finding = BudgetFinding(
        settings.scale,
        settings.base.steps,
        run_counts(settings),
        settings.long_label,
        long[0].steps if long else 0,
        long[0].seed if long else 0,
    )
    if settings.scale != "cpu":
        return finding
    full = CHAPTER.configure(settings.scale, **{**settings.overrides, **FULL_CPU_DESIGN})
    cheap = CHAPTER.configure(settings.scale, **{**settings.overrides, **BUDGET_CPU_DESIGN})
    minutes = predicted_minutes(settings)
    flags = " ".join(
        f'-p {name} "{list(value)!r}"'
        if name == "variants"
        else f"-p {name} {len(value) if isinstance(value, tuple) else value}"  # seed lists as counts
        for name, value in BUDGET_CPU_DESIGN.items()
    )
    cut = tuple(
        label
        for label, c in full.all_configs().items()
        if {x.seed for x in c} - {x.seed for x in settings.all_configs().get(label, [])}
    )
    return dataclasses.replace(
        finding,
        costed=True,
        minutes=minutes,
        n_runs=sum(len(c) for c in settings.all_configs().values()),
        over_budget=minutes > CPU_BUDGET_MINUTES,
        full_runs=run_counts(full),
        full_minutes=predicted_minutes(full),
        cheap_runs=run_counts(cheap),
        cheap_minutes=predicted_minutes(cheap),
        cheap_seeds=len(cheap.seeds),
        cheap_steps=cheap.base.steps,
        rerun_flags=flags,
        cut=cut,
    )
