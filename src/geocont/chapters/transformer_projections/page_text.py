"""The transformer chapter's prose helpers and the page's framing: what it runs and costs, what was trained, the
closing verdicts."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from ...book.chapter import changed_verdicts_sentence, undefined_sentence, verdict_list
from ...book.provenance import measured_cost, run_sources
from ...metrics import vector_name
from ..lm_runs import LMChapterSettings
from .compute import (
    CHAPTER,
    PROSE,
    Results,
    RunCount,
    budget_finding,
    softmax_finding,
)


def runs_text(runs: tuple[RunCount, ...]) -> str:
    return "; ".join(PROSE.choose("run-count", run.number, label=run.label, seeds=run.seeds) for run in runs)


def code_list(names) -> str:
    return ", ".join(f"`{name}`" for name in names)


def budget_note(settings: LMChapterSettings) -> Markdown:
    """What the chapter runs at this scale, what it is predicted to cost cold on 2 workers against the chapter's
    budget beside what its runs took where they were trained, and (where an override left runs out) what the full
    design would add (:func:`.compute.budget_finding`)."""
    finding = budget_finding(settings)
    parts = [
        PROSE.choose(
            "budget-runs",
            "long" if finding.long_steps else "plain",
            runs=runs_text(finding.runs),
            steps=finding.steps,
            long_label=finding.long_label,
            long_steps=finding.long_steps,
            long_seed=finding.long_seed,
        )
    ]
    if finding.costed:
        parts.append(
            PROSE.render(
                "budget-cost",
                minutes=finding.minutes,
                n_runs=finding.n_runs,
                step_seconds_4=finding.step_seconds_4,
                step_seconds_8=finding.step_seconds_8,
            )
        )
        parts += measured_text(settings)
    if finding.over_budget:
        parts.append(
            PROSE.render(
                "budget-over",
                budget_minutes=finding.budget_minutes,
                full_runs=runs_text(finding.full_runs),
                steps=finding.steps,
                rerun_flags=finding.rerun_flags,
                cheap_runs=runs_text(finding.cheap_runs),
                cheap_minutes=finding.cheap_minutes,
                cheap_seeds=finding.cheap_seeds,
                cheap_steps=finding.cheap_steps,
            )
        )
    if finding.cut:
        parts.append(
            PROSE.render(
                "budget-cut",
                cut=code_list(finding.cut),
                full_runs=runs_text(finding.full_runs),
                full_minutes=finding.full_minutes,
            )
        )
    return Markdown(" ".join(parts))


def measured_text(settings: LMChapterSettings) -> list[str]:
    """The worker-minutes the chapter's runs took where they were trained (their recorded wall seconds), where
    any recorded them."""
    cost = measured_cost(run_sources(CHAPTER.run_configs(settings)))
    if not cost.measured:
        return []
    return [
        PROSE.render(
            "budget-measured",
            worker_minutes=cost.worker_minutes,
            measured=cost.measured,
            runs=cost.runs,
            two_workers=cost.worker_minutes / 2,
        )
    ]


def trained_note(results: Results) -> Markdown:
    runs = results.settings.all_configs()
    return Markdown(
        PROSE.render(
            "trained",
            n_runs=sum(len(c) for c in runs.values()),
            labels=", ".join(runs),
            undefined=undefined_sentence(results.table),
        )
    )


def space_title(space: str) -> str:
    return f"{space} space ({vector_name(space)})"


def mark_early(ax: plt.Axes, step: int) -> None:
    ax.axvline(step, color="0.5", linestyle=":", linewidth=1.2)


def symlog_steps(ax: plt.Axes) -> None:
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)


def verdicts_text(verdicts: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(PROSE.render("explanation-verdict", key=key, verdict=verdict) for key, verdict in verdicts)


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    settings = results.settings
    intro = PROSE.render(
        "verdict-intro",
        scale=settings.scale,
        seeds=len(settings.seeds),
        reference=results.reference,
        steps=settings.base.steps,
        corpus=settings.base.corpus,
        early_step=settings.early_step,
    )
    return Markdown(
        PROSE.render(
            "verdict",
            verdicts=verdict_list(claims, intro),
            changed=changed_verdicts_sentence(claims, settings.early_step),
        )
    )


def softmax_note(claims: pd.DataFrame) -> Markdown | None:
    """What the linear-attention ablation says when it does not support the softmax claim, else
    nothing (:func:`.compute.softmax_finding`)."""
    finding = softmax_finding(claims)
    if finding.case != "not-supported":
        return None
    return Markdown(PROSE.render("softmax-not-supported", evidence="; ".join(finding.evidence)))
