"""compression: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from ... import sweeps
from ...book.chapter import Chapter, ClaimsBuilder, claim, presets
from ...config import DEVICES, LMRunConfig
from ...layouts import PROJECTIONS
from ...scales import parse_seeds
from ...lm import lm_job
from ...sharing import (Subject, base_job, continuity_job, grouping_job, pretrained_subject, pruning_job, sharing_job,
                        trained_subject)
from ...statistics import (Estimate, RankCorrelation, estimate, known, rank_correlation, verdict_for_difference,
                           verdict_for_interval, verdict_for_value)
from ...transformer import build_llama, parameter_count
from .. import lm_runs
from ..common import short_projection
from ..lm_runs import LMChapterSettings


#: The notebook's parameters, in the order of its ``parameters`` cell.
_PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.compression",
    "seeds": "seeds of our trained transformers: an int n (0..n-1) or a list; None keeps the preset",
    "pretrained": '"smollm2-135m" (offline), a Hugging Face id / local dir, or "none" to skip; None keeps it',
    "budgets": "a list of parameter budgets, fractions of the dense matrices, e.g. [0.125, 0.25, 0.5]",
    "group_size": "adjacent layers per shared basis",
    "n_windows": "held-out windows per evaluation of the pretrained model",
    "window_length": "tokens per window (pretrained model)",
    "sharing_layers": "pretrained blocks whose weights are shared, e.g. [9, 10, ..., 20]; None keeps the preset",
    "projections": "a list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
}


#: The paper's guideline: the space each projection should share its basis in (None: neither).
GUIDELINE: dict[str, str | None] = {
    "q_proj": "input", "k_proj": "input", "gate_proj": "input", "up_proj": "input",
    "o_proj": "output", "down_proj": "output", "v_proj": None,
}


#: Label of our trained transformers in the results (their seeds are in the ``seed`` column).
OURS = "ours (silu)"


#: Below this total (nats/token), both spaces' costs are negligible and their ratio is noise
#: (it is the order of the paired window standard error of our small models' loss increases).
NEGLIGIBLE_LOSS = 0.001


#: The chapter's presets: a pretrained model (SmolLM2-135M offline; a Llama-3.1-8B id at
#: ``paper``) and the transformer chapter's ``silu`` models (its seeds and its long, settled runs). ``budgets`` are fractions of
#: the dense parameters of the replaced matrices. ``sharing_layers`` are the pretrained
#: model's blocks whose weights are shared (None: all); at ``cpu`` the middle 12 of 30, as
#: compressing every block without fine-tuning breaks the model (V or Gate of all 30 blocks
#: at a 50% budget: +6 nats/token). ``pruning_layers``: the blocks dropped in turn (None: all).
#: Sized from SmolLM2's measured CPU throughput (benchmarks/bench_compression.py: 160-430
#: tokens/s on the 2-core machine, depending on the other load): at ``cpu`` one evaluation is
#: 12 x 128 tokens (4-10 s), and the chapter runs 7 x 3 x 3 sharing + 30 pruning evaluations
#: of it, 10-20 minutes in all with our models.
_PRESET_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(pretrained="smollm2-135m", sharing_layers=(12, 13, 14, 15), pruning_layers=(12, 13, 14, 15),
                  budgets=(0.25,), group_size=2,
                  projections=("q_proj", "v_proj", "o_proj"),
                  n_windows=4, window_length=64, batch_size=4, seeds=(0, 1), n_boot=500, device="cpu"),
    "cpu": dict(pretrained="smollm2-135m", sharing_layers=tuple(range(9, 21)), pruning_layers=None,
                budgets=(0.25, 0.5, 0.75), group_size=2,
                n_windows=12, window_length=128, batch_size=4, n_boot=2000,
                device="cpu"),
    "paper": dict(pretrained="meta-llama/Llama-3.1-8B", sharing_layers=tuple(range(10, 22)), pruning_layers=None,
                  budgets=(0.25, 0.5, 0.75),
                  group_size=2, n_windows=64, window_length=512, batch_size=4, n_boot=2000,
                  device="auto"),
}
#: The seeds (of the transformer chapter's models) come from the language-model presets, except at ``smoke``.
_PRESETS = presets(lm_runs.lm_preset, _PRESET_VALUES, keep=("seeds",))


@dataclass(frozen=True)
class CompressionSettings:
    """What the compression chapter runs (see :data:`_PRESETS`)."""

    scale: str
    pretrained: str | None
    sharing_layers: tuple[int, ...] | None
    pruning_layers: tuple[int, ...] | None
    budgets: tuple[float, ...]
    group_size: int
    n_windows: int
    window_length: int
    batch_size: int
    n_boot: int
    projections: tuple[str, ...]
    lm: LMChapterSettings
    device: str = "cpu"
    overrides: dict[str, Any] = field(default_factory=dict)

    def lm_configs(self) -> list[LMRunConfig]:
        """The transformer chapter's reference (``silu``) model, one config per seed."""
        return self.lm.configs()[self.lm.reference]

    @property
    def middle_budget(self) -> float:
        return sorted(self.budgets)[len(self.budgets) // 2]


def build_settings(scale: str, values: dict[str, Any]) -> CompressionSettings:
    """The chapter's settings from its preset values (:data:`_PRESETS`, any of them replaced).

    ``pretrained`` may be "none" to skip the pretrained model, an offline short name, or a
    Hugging Face id / local directory; ``projections`` is a list of :data:`PROJECTIONS`;
    ``seeds`` are those of our trained models. A bad value raises ``ValueError``.
    """
    preset = dict(values)
    seeds = parse_seeds(preset.pop("seeds"))
    projections = tuple(preset.pop("projections", PROJECTIONS))
    unknown = [p for p in projections if p not in PROJECTIONS]
    if unknown or not projections:
        raise ValueError(f"unknown projection(s) {unknown}; valid choices: {', '.join(PROJECTIONS)}")
    budgets = tuple(float(b) for b in preset.pop("budgets"))
    if not budgets or any(not 0 < b < 2 for b in budgets):
        raise ValueError(f"budgets must be fractions of the dense parameters in (0, 2), got {budgets}")
    for name in ("group_size", "n_windows", "window_length", "batch_size", "n_boot"):
        if int(preset[name]) < 1:
            raise ValueError(f"{name} must be a positive integer, got {preset[name]!r}")
    if int(preset["group_size"]) < 2:
        raise ValueError("group_size must be >= 2: sharing needs at least two layers per group")
    layers = {}
    for name in ("sharing_layers", "pruning_layers"):
        value = preset.pop(name)
        layers[name] = None if value is None else tuple(int(l) for l in value)
        if layers[name] is not None and (len(layers[name]) < 3 or any(l < 0 for l in layers[name])):
            raise ValueError(f"{name} needs at least 3 non-negative block indices (or None for all), got {value}")
    device = preset.pop("device")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    lm = lm_runs.reference_settings(scale, seeds)
    pretrained = preset.pop("pretrained")
    pretrained = None if pretrained in (None, "none") else str(pretrained)
    return CompressionSettings(scale=scale, pretrained=pretrained, **layers, budgets=budgets, projections=projections,
                               lm=lm, device=device, **{k: int(v) for k, v in preset.items()})


def _blocks(layers: Sequence[int] | None) -> str:
    if layers is None:
        return "all blocks"
    if list(layers) == list(range(layers[0], layers[-1] + 1)):
        return f"blocks {layers[0]}–{layers[-1]}"
    return f"blocks {list(layers)}"


def describe(settings: CompressionSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    lm = settings.lm.base
    if settings.pretrained is None:
        pretrained = "none"
    elif settings.pretrained == "smollm2-135m":
        pretrained = (f"`{settings.pretrained}` (the offline SmolLM2-135M-Instruct GGUF, Q4_1, dequantized to float32 "
                      "by transformers)")
    else:
        pretrained = f"`{settings.pretrained}`"
    layers = f"shares the weights of {_blocks(settings.sharing_layers)}, prunes {_blocks(settings.pruning_layers)}"
    return dict(
        seeds=settings.lm.seeds,
        data=f"held-out split of `{lm.corpus}` (every tenth chapter); the pretrained model reads it with its own "
             f"tokenizer ({settings.n_windows} windows × {settings.window_length} tokens), our models with their BPE "
             f"tokenizer ({lm.eval_windows} windows × {lm.shape.max_seq_len} tokens, the windows of their validation "
             "loss)",
        model=f"pretrained: {pretrained}, {layers}; ours: the `silu` transformer of the projections chapter "
              f"({lm.shape.n_layers} layers, d = {lm.shape.d_model}, "
              f"{parameter_count(build_llama(lm.shape)) / 1e6:.2f}M parameters), one per seed",
        training=f"ours: {lm.steps} steps of {lm.batch_size} × {lm.shape.max_seq_len} tokens, {lm.optimizer.label}; "
                 f"compression: budgets {list(settings.budgets)} of the dense parameters, groups of "
                 f"{settings.group_size} adjacent layers; no fine-tuning after compression",
    )


CHAPTER = Chapter(name="compression", parameters=_PARAMETERS, presets=_PRESETS, build=build_settings, describe=describe,
                  runs=CompressionSettings.lm_configs)


def sharing_summary(table: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Mean over windows per configuration: loss increase (and its window standard error),
    reconstruction error and parameter counts."""
    keys = [*by, "projection", "budget", "sharing"]
    grouped = table.groupby(keys, observed=True)
    summary = grouped.agg(loss_increase=("loss_increase", "mean"), nll=("nll", "mean"), base_nll=("base_nll", "mean"),
                          relative_error=("relative_error", "first"), parameters=("parameters", "first"),
                          dense_parameters=("dense_parameters", "first"), rank=("rank", "first"))
    summary["loss_increase_se"] = grouped["loss_increase"].sem()
    summary["budget_used"] = summary["parameters"] / summary["dense_parameters"]
    return summary.reset_index()


def input_advantage(summary: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per projection and budget: ``(dL_output - dL_input) / (|dL_output| + |dL_input|)``.

    +1: input-space sharing costs nothing next to output-space sharing; -1: the reverse;
    NaN where both loss increases together stay under :data:`NEGLIGIBLE_LOSS`. Also reports
    both increases and parameter counts.
    """
    keys = [*by, "projection", "budget"]
    wide = summary.pivot_table(index=keys, columns="sharing", values=["loss_increase", "parameters", "relative_error"],
                               observed=True)
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    d_in, d_out = wide["loss_increase_input"], wide["loss_increase_output"]
    total = d_in.abs() + d_out.abs()
    wide["advantage"] = ((d_out - d_in) / total).where(total >= NEGLIGIBLE_LOSS)
    return wide


def paired_difference(table: pd.DataFrame, by: Sequence[str] = ("model", "seed")) -> pd.DataFrame:
    """Per projection and budget: ``dL_output - dL_input`` with its standard error over windows.

    Both schemes are evaluated on the same windows, so the per-window difference is paired;
    its standard error says whether the gap at one budget exceeds the text's sampling noise.
    """
    keys = [*by, "projection", "budget"]
    wide = table.pivot_table(index=[*keys, "window"], columns="sharing", values="nll", observed=True)
    difference = (wide["output"] - wide["input"]).rename("difference")
    grouped = difference.groupby(level=keys)
    return pd.DataFrame({"difference": grouped.mean(), "difference_se": grouped.sem()}).reset_index()


def grouping_penalty(grouping: pd.DataFrame) -> pd.DataFrame:
    """Per seed, projection and space: how much larger the reconstruction error is with
    distant instead of adjacent groups, relative to the adjacent error (0.05 = 5% larger)."""
    wide = grouping.pivot_table(index=["seed", "projection", "sharing"], columns="grouping",
                                values="relative_error").reset_index()
    wide["penalty"] = wide["distant"] / wide["adjacent"] - 1
    return wide


def block_correlations(pruning: pd.DataFrame, n_boot: int) -> dict[str, RankCorrelation]:
    """Per model: Spearman's rho between a block's pruning cost and its continuity (blocks of
    every seed pooled), and the same without block 0 where at least 3 other blocks remain."""
    correlations = {}
    for model, frame in pruning.groupby("model", sort=False):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean()
        correlations[model] = rank_correlation(per_layer["loss_increase"], per_layer["continuity"], n_boot)
        interior = per_layer[per_layer.index.get_level_values("layer") > 0]
        if len(interior) >= 3:
            correlations[f"{model}, without block 0"] = rank_correlation(interior["loss_increase"],
                                                                         interior["continuity"], n_boot)
    return correlations


@dataclass
class Results:
    """Everything the chapter shows: per-window tables, their summaries and the correlations."""

    settings: CompressionSettings
    sharing: pd.DataFrame  # per configuration x window (columns model, seed, projection, sharing, budget, ...)
    pruning: pd.DataFrame  # per layer x window (columns model, seed, layer, loss_increase, continuity)
    grouping: pd.DataFrame  # grouping_control (adjacent vs distant groups), with model and seed
    summary: pd.DataFrame  # sharing_summary over windows, by model and seed
    advantage: pd.DataFrame  # input_advantage, by model and seed
    paired: pd.DataFrame  # paired_difference, by model and seed
    correlations: dict[str, RankCorrelation]

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(self.sharing["model"]))

    @property
    def projections(self) -> list[str]:
        return list(self.settings.projections)


def _subjects(settings: CompressionSettings) -> list[tuple[Subject, int, Sequence[int] | None, Sequence[int] | None, int]]:
    """(subject, seed (-1: pretrained), sharing layers, pruning layers, windows) of every model."""
    subjects = []
    if settings.pretrained is not None:
        subjects.append((pretrained_subject(settings.pretrained, settings.lm.base.corpus, settings.window_length,
                                            settings.device), -1, settings.sharing_layers, settings.pruning_layers,
                         settings.n_windows))
    for config in settings.lm_configs():
        subjects.append((trained_subject(config), config.seed, None, None, config.eval_windows))
    return subjects


def run(settings: CompressionSettings, progress: bool = True, executor: str | None = None) -> Results:
    """Run (or load from the cache) every experiment of the chapter, independent ones in parallel.

    Three sweeps (:func:`geocont.sweeps.run_jobs`, ``executor`` as there): our models'
    training; each model's base loss and layer continuity (which every later experiment
    reads); then per model the sharing of each projection (all schemes and budgets), the
    pruning of every block and the grouping control. Each job loads its model in the worker
    that runs it, so the tables are the same under every executor.
    """
    warnings.filterwarnings("ignore", message=".*torch_dtype.*")  # transformers' GGUF loading
    subjects = _subjects(settings)
    sweeps.run_jobs([lm_job(config, lm_runs.REFERENCE) for config in settings.lm_configs()], executor, progress)
    sweeps.run_jobs([job for subject, _, _, _, n_windows in subjects
                     for job in (base_job(subject, n_windows, settings.batch_size), continuity_job(subject))],
                    executor, progress)
    jobs, placed = [], []  # placed: (kind, model, seed) of each job
    for subject, seed, sharing_layers, pruning_layers, n_windows in subjects:
        model = OURS if seed >= 0 else subject.label
        jobs += [sharing_job(subject, projection, settings.budgets, settings.group_size, n_windows, sharing_layers,
                             settings.batch_size) for projection in settings.projections]
        jobs += [pruning_job(subject, n_windows, pruning_layers, settings.batch_size),
                 grouping_job(subject, settings.projections, settings.middle_budget, settings.group_size,
                              sharing_layers)]
        placed += [("sharing", model, seed)] * len(settings.projections) + [("pruning", model, seed),
                                                                           ("grouping", model, seed)]
    tables: dict[str, list[pd.DataFrame]] = {"sharing": [], "pruning": [], "grouping": []}
    for (kind, model, seed), table in zip(placed, sweeps.run_jobs(jobs, executor, progress)):
        tables[kind].append(table.assign(model=model, seed=seed))
    sharing_table, pruning_table = (pd.concat(tables[kind], ignore_index=True) for kind in ("sharing", "pruning"))
    summary = sharing_summary(sharing_table, by=("model", "seed"))
    return Results(settings, sharing_table, pruning_table, pd.concat(tables["grouping"], ignore_index=True), summary,
                   input_advantage(summary, by=("model", "seed")), paired_difference(sharing_table),
                   block_correlations(pruning_table, settings.n_boot))


def model_key(model: str) -> str:
    """The claim-key prefix of a model: ``ours`` for our trained transformers, else ``pretrained``."""
    return "ours" if model == OURS else "pretrained"


def sharing_key(model: str, projection: str) -> str:
    return f"{model_key(model)}-share-{short_projection(projection)}"


def _guideline_sign(projection: str) -> int:
    """+1 where the guideline's space is the input space (or none: V is scored as input), -1 for output."""
    return -1 if GUIDELINE[projection] == "output" else 1


#: The sharing claims' margin: an advantage of one space over the other (in nats/token) counts when it is larger.
SHARING_MARGIN = 0.10

#: The grouping claim's margin: distant groups must raise the reconstruction error by more than this share (10%).
GROUPING_MARGIN = 0.10


def add_sharing_claims(out: ClaimsBuilder, advantage: pd.DataFrame, model: str, spread: str,
                       paired: pd.DataFrame | None = None) -> None:
    """One claim per projection: is the guideline's space the cheaper one to share?

    The quantity is the advantage of the guideline's space over the other one
    (:func:`input_advantage`, sign flipped for output-space projections; plain input-space
    advantage for V). The spread is over ``spread``: "seeds" (our trained models: per-seed
    mean over budgets) or "budgets" (a single pretrained model: one value per budget).
    ``paired`` (:func:`paired_difference`), if given, adds each budget's gap in nats with
    its window standard error to the note.
    """
    if spread not in ("seeds", "budgets"):
        raise ValueError(f"unknown spread {spread!r}; valid choices: seeds, budgets")
    zero = known(0.0)
    for projection in [p for p in PROJECTIONS if p in set(advantage["projection"])]:
        frame = advantage[advantage["projection"] == projection]
        signed = frame["advantage"] * _guideline_sign(projection)
        per_budget = signed.groupby(frame["budget"]).mean()
        value = estimate(signed.groupby(frame["seed"]).mean() if spread == "seeds" else per_budget)
        details = (f"spread over {spread}; per budget" + (" (seed mean)" if spread == "seeds" else "") + ": "
                   + ", ".join(f"{b:g}: {v:+.2f}" for b, v in per_budget.items()))
        if paired is not None:
            gaps = paired[paired["projection"] == projection].groupby("budget")[["difference", "difference_se"]].mean()
            sign = _guideline_sign(projection) if GUIDELINE[projection] else 1
            other, space = ("output", "input") if sign > 0 else ("input", "output")
            details += (f"; ΔL({other}) − ΔL({space}) in nats/token ± window s.e.: "
                        + ", ".join(f"{b:g}: {sign * r.difference:+.2g} ± {r.difference_se:.1g}"
                                    for b, r in gaps.iterrows()))
        space = GUIDELINE[projection]
        key = sharing_key(model, projection)
        if space is None:
            out.add(key=key, claim=f"{model}: V has no clearly better sharing space",
                    quantity="v_proj advantage of input- over output-space sharing", paper="neither (no number)",
                    ours=value, baseline=0.0, verdict=verdict_for_value(value, 0.0, SHARING_MARGIN), note=details)
            continue
        other = "output" if space == "input" else "input"
        out.add(key=key, claim=f"{model}: {projection} is cheaper to share in the {space} space",
                quantity=f"{projection} advantage of {space}- over {other}-space sharing, equal parameters",
                paper=f"{space} space cheaper", ours=value, baseline=0.0,
                verdict=verdict_for_difference(value, zero, margin=SHARING_MARGIN), note=details)


def add_grouping_claim(out: ClaimsBuilder, grouping: pd.DataFrame, model: str, spread: str) -> None:
    """Do adjacent layers share a basis better than distant ones (same parameters)?

    The value is the relative increase in reconstruction error from adjacent to distant
    groups, averaged over projections and both spaces; spread over seeds (our models) or over
    the projection x space cases (a single pretrained model). Margin: 10%.
    """
    penalty = grouping_penalty(grouping)
    value = estimate(penalty.groupby("seed")["penalty"].mean() if spread == "seeds" else penalty["penalty"])
    worse = int((penalty.groupby(["projection", "sharing"])["penalty"].mean() > 0).sum())
    cases = penalty.groupby(["projection", "sharing"]).ngroups
    out.add(key=f"{model_key(model)}-adjacent-sharing",
            claim=f"{model}: continuity grounds sharing: adjacent layers share a basis better than distant ones",
            quantity="relative increase in reconstruction error, distant vs adjacent groups",
            paper="adjacent better (implied)", ours=value, baseline=0.0,
            verdict=verdict_for_difference(value, known(0.0), GROUPING_MARGIN),
            note=f"spread over {'seeds' if spread == 'seeds' else 'projections x spaces'}; distant worse in "
                 f"{worse} of {cases} projection x space cases; margin 10%")


def add_pruning_claim(out: ClaimsBuilder, key: str, correlation: RankCorrelation, model: str, note: str = "") -> None:
    """Is pruning a block cheaper where adjacent-layer continuity is higher?"""
    out.add(key=key, claim=f"{model}: pruning costs less where continuity is higher",
            quantity="Spearman ρ(loss increase, block continuity)", paper="negative (implied)", ours=correlation.rho,
            baseline=0.0, verdict=verdict_for_interval(correlation.low, correlation.high, expected_sign=-1),
            note=f"{correlation}; ours_std = 95% bootstrap CI width / 3.92" + (f"; {note}" if note else ""),
            std=(correlation.high - correlation.low) / (2 * 1.96), n=correlation.n)


def compression_claims(advantage: pd.DataFrame, paired: pd.DataFrame, pruning: pd.DataFrame, grouping: pd.DataFrame,
                       correlations: dict[str, RankCorrelation], *, dataset: str) -> pd.DataFrame:
    """The chapter's claims, per model (in the order of ``pruning``): the sharing guideline per
    projection, pruning against continuity (also without block 0), adjacent against distant groups; ``dataset``:
    the held-out text every loss is measured on."""
    out = ClaimsBuilder(CHAPTER.name, dataset=dataset)
    for model, frame in pruning.groupby("model", sort=False):
        spread = "seeds" if model == OURS else "budgets"
        add_sharing_claims(out, advantage[advantage["model"] == model], model, spread,
                           paired=paired[paired["model"] == model])
        pooled = (f"pooled over {frame['seed'].nunique()} seeds x {frame['layer'].nunique()} blocks" if model == OURS
                  else f"{frame['layer'].nunique()} blocks")
        add_pruning_claim(out, f"{model_key(model)}-pruning", correlations[model], model, note=pooled)
        if f"{model}, without block 0" in correlations:
            add_pruning_claim(out, f"{model_key(model)}-pruning-without-block-0",
                              correlations[f"{model}, without block 0"], model + " (without block 0)",
                              note="block 0 left out: it has one neighbour and the largest pruning cost")
        add_grouping_claim(out, grouping[grouping["model"] == model], model, spread)
    return out.table()


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    return compression_claims(results.advantage, results.paired, results.pruning, results.grouping,
                              results.correlations, dataset=results.settings.lm.base.corpus)


# --- Findings: what the chapter's computed sentences say, as values. present.py words them from the
# templates in prose.md; every comparison and "which case applies" is decided here. ---


@dataclass(frozen=True)
class EvaluationCounts:
    """What was evaluated: the models, the compressed configurations and the pruned models."""

    models: tuple[str, ...]
    configurations: int
    pruned: int


def evaluation_counts(results: Results) -> EvaluationCounts:
    """:class:`EvaluationCounts` of ``results``."""
    return EvaluationCounts(tuple(results.models), len(results.summary),
                            results.pruning.groupby(["model", "seed", "layer"]).ngroups)


def scheme_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """Per model, projection, budget and sharing scheme: the rank, the stored parameters and the dense ones."""
    keys = ["model", "projection", "budget"]
    return (summary.groupby([*keys, "sharing"], observed=True)
            .agg(rank=("rank", "first"), parameters=("parameters", "first"), dense=("dense_parameters", "first"))
            .reset_index())


@dataclass(frozen=True)
class BudgetEquality:
    """In how many (model, projection, budget) cases input- and output-space sharing store exactly
    as many parameters. ``case``: "all-equal" or "some-differ"."""

    case: str
    equal: int
    cases: int


def budget_equality(results: Results) -> BudgetEquality:
    """:class:`BudgetEquality` of ``results``."""
    counts = scheme_counts(results.summary)
    equal = counts.pivot_table(index=["model", "projection", "budget"], columns="sharing",
                               values="parameters").eval("input == output")
    return BudgetEquality("all-equal" if equal.all() else "some-differ", int(equal.sum()), len(equal))


def mean_loss_by_scheme(results: Results) -> pd.DataFrame:
    """Mean loss increase (over seeds) per model, projection and budget (rows) and sharing (columns)."""
    means = results.summary.groupby(["model", "projection", "budget", "sharing"], observed=True)["loss_increase"].mean()
    return means.unstack("sharing")


@dataclass(frozen=True)
class CheapestFinding:
    """The cheapest scheme (smallest mean loss increase) per model and projection (rows) and budget
    (columns), and how often each scheme is the cheapest over all rows, the most frequent first."""

    table: pd.DataFrame
    wins: tuple[tuple[str, int], ...]


def cheapest_finding(results: Results) -> CheapestFinding:
    """:class:`CheapestFinding` of ``results``."""
    best = mean_loss_by_scheme(results)
    choice = best.idxmin(axis=1).unstack("budget")
    choice = choice.loc[[(m, p) for m in results.models for p in results.projections if (m, p) in choice.index]]
    return CheapestFinding(choice, tuple(best.idxmin(axis=1).value_counts().items()))


@dataclass(frozen=True)
class ErrorLossFinding:
    """At the middle budget: reconstruction error and loss increase per model, projection (rows) and
    scheme (columns), and in how many rows the space with the smaller error also costs less loss."""

    budget: float
    table: pd.DataFrame
    agree: int
    rows: int


def error_loss_finding(results: Results) -> ErrorLossFinding:
    """:class:`ErrorLossFinding` of ``results``."""
    middle = results.settings.middle_budget
    table = results.summary[results.summary["budget"] == middle]
    errors = table.pivot_table(index=["model", "projection"], columns="sharing", values="relative_error", aggfunc="mean")
    losses = table.pivot_table(index=["model", "projection"], columns="sharing", values="loss_increase", aggfunc="mean")
    both = pd.concat({"relative reconstruction error": errors, "loss increase (nats/token)": losses}, axis=1)
    agree = (errors["input"] < errors["output"]) == (losses["input"] < losses["output"])
    return ErrorLossFinding(middle, both, int(agree.sum()), len(agree))


def spread_case(summary: pd.DataFrame) -> str:
    """How a model's trade-off curves spread: "seeds" (several seeds: ±1 sd) or "one-model" (the dots are budgets)."""
    return "seeds" if summary["seed"].nunique() > 1 else "one-model"


@dataclass(frozen=True)
class ModelAdvantage:
    """One model's input-space advantage per projection (mean ± sd over budgets and seeds)."""

    model: str
    advantages: tuple[tuple[str, Estimate], ...]


def advantage_findings(results: Results) -> tuple[ModelAdvantage, ...]:
    """:class:`ModelAdvantage` of every model, for the chapter's projections."""
    out = []
    for model in results.models:
        adv = results.advantage[results.advantage["model"] == model]
        out.append(ModelAdvantage(model, tuple((p, estimate(adv.loc[adv.projection == p, "advantage"]))
                                               for p in results.projections)))
    return tuple(out)


@dataclass(frozen=True)
class GroupingFinding:
    """One model's grouping control: in how many projection × space cases distant groups reconstruct
    worse than adjacent ones, by how much on average and at most (% of the error), and for which of
    the projections with a guideline (``guided``) adjacency helps more in the paper's space."""

    model: str
    worse: int
    cases: int
    mean_percent: float
    max_percent: float
    agree: tuple[str, ...]
    guided: int


def grouping_findings(results: Results) -> tuple[GroupingFinding, ...]:
    """:class:`GroupingFinding` of every model."""
    out = []
    for model in results.models:
        frame = grouping_penalty(results.grouping[results.grouping["model"] == model])
        by_space = frame.groupby(["projection", "sharing"])["penalty"].mean()
        worse = int((by_space > 0).sum())
        by_space = by_space.unstack("sharing")
        guided = [p for p in by_space.index if GUIDELINE[p]]
        agree = tuple(p for p in guided if by_space.loc[p, GUIDELINE[p]] > by_space.loc[p].drop(GUIDELINE[p]).max())
        out.append(GroupingFinding(model, worse, frame.groupby(["projection", "sharing"]).ngroups,
                                   100 * frame["penalty"].mean(), 100 * frame["penalty"].max(), agree, len(guided)))
    return tuple(out)


@dataclass(frozen=True)
class GuidelineFinding:
    """One model, in short: the projections for which the paper's space was on average the cheaper
    one to share (``cheaper``) and the more expensive one (``dearer``), and how often each scheme was
    the cheapest over projections × budgets, the most frequent first."""

    model: str
    cheaper: tuple[str, ...]
    dearer: tuple[str, ...]
    cheapest: tuple[tuple[str, int], ...]


def guideline_findings(results: Results, claims: pd.DataFrame) -> tuple[GuidelineFinding, ...]:
    """:class:`GuidelineFinding` of every model, from its sharing claims' values (the signed advantage)."""
    best = mean_loss_by_scheme(results)
    guided = [p for p in PROJECTIONS if GUIDELINE[p] and p in results.projections]
    out = []
    for model in results.models:
        signed = {p: claim(claims, sharing_key(model, p))["ours_mean"] for p in guided}
        out.append(GuidelineFinding(model, tuple(p for p, v in signed.items() if v > 0),
                                    tuple(p for p, v in signed.items() if v < 0),
                                    tuple(best.loc[model].idxmin(axis=1).value_counts().items())))
    return tuple(out)
