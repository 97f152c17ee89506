"""Chapter "pretrained checkpoints": the projection pattern in SmolLM2, Gemma-3 and MiniLM next to
our trained transformers; what quantization does to the metric; the cost of Llama-3.1-8B/70B
(``book/pretrained_continuity.ipynb``)."""

from __future__ import annotations

import math
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence, TYPE_CHECKING

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown, display

from ..analyzer import analyze, plan, summary, triplet_method
from ..book.chapter import Chapter, ClaimsBuilder, claim
from ..book.figures import show_figure
from ..layouts import LAYOUTS, PROJECTIONS
from ..lm import trained_lm
from ..metrics import abs_cos, random_abs_cos, top_singular_triplets, vector_name
from ..plotting import plot_depth_continuity, projection_colours
from ..pretrained import OFFLINE_MODELS, ModelNotAvailable
from ..scales import ParameterError, check_scale, parse_seeds
from ..statistics import Estimate, estimate, verdict_for_difference
from ..synthetic import LARGE_MODELS, LLAMA_31_8B_LAYER, layer_parameters, write_spiked_checkpoint
from ..transformer import parameter_count
from .lm_runs import LM_PRESETS, PROJECTION_PREDICTIONS, reference_configs

if TYPE_CHECKING:
    from ..config import LMRunConfig

#: The notebook's parameters, in the order of its ``parameters`` cell.
_PARAMETERS: dict[str, str] = {
    "scale": "smoke | cpu | paper: the whole preset, see geocont.chapters.pretrained_continuity",
    "models": "offline names (smollm2-135m, gemma3-270m, all-minilm-l6), paths or Hugging Face ids",
    "max_layers": "analyse only the first n layers of each checkpoint",
    "trained_scale": "scale of the transformer chapter whose trained models are compared",
    "seeds": "seeds of those trained models (an int n or a list)",
    "quantize": 'GGUF types of the quantization check, e.g. ["Q8_0", "Q4_1"]',
    "large_models": "large checkpoints to look for (Hugging Face ids or paths)",
    "measure_cost": "time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost",
}

#: The pretrained checkpoints each scale analyses, and the large ones it looks for.
PRETRAINED_OFFLINE = ("smollm2-135m", "gemma3-270m", "all-minilm-l6")


PRETRAINED_LARGE = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B")


_PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(models=("smollm2-135m",), max_layers=6, trained_scale="smoke", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=(), measure_cost=False),
    "cpu": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="cpu", seeds=LM_PRESETS["cpu"]["seeds"],
                quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
    "paper": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="paper", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
}

#: The quantization check's rule: a GGUF type "keeps the metric" when no v1/u1 |cos| moves by this much.
QUANTIZATION_LIMIT = 0.05


@dataclass(frozen=True)
class PretrainedChapterSettings:
    """What the pretrained-continuity chapter analyses.

    ``models``: offline model names (:data:`geocont.pretrained.OFFLINE_MODELS`), local
    paths or Hugging Face ids; ``max_layers``: only the first n layers of each;
    ``trained``: the transformer chapter's trained models (variant ``silu``) at
    ``trained_scale``, one per seed; ``quantize``: GGUF types the quantization check
    compares with fp32; ``large_models``: checkpoints looked for (analysed where present);
    ``measure_cost``: time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost;
    ``overrides``: the parameters that were set (for provenance and publishing).
    """

    scale: str
    models: tuple[str, ...]
    max_layers: int | None
    trained_scale: str
    seeds: tuple[int, ...]
    quantize: tuple[str, ...]
    large_models: tuple[str, ...]
    measure_cost: bool
    overrides: dict[str, Any] = field(default_factory=dict)

    def trained_configs(self) -> list["LMRunConfig"]:
        """The transformer chapter's reference (``silu``) models, one per seed."""
        return reference_configs(self.trained_scale, self.seeds)


def _names(value: Any, parameter: str) -> tuple[str, ...]:
    """A name or a list of names as a tuple of strings."""
    names = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(name, str) and name for name in names):
        raise ParameterError(f"{parameter} must be a name or a list of names, got {value!r}")
    return names


def build_settings(scale: str, values: dict[str, Any]) -> PretrainedChapterSettings:
    """The chapter's settings from its preset values (:data:`_PRESETS`, any of them replaced). An
    unknown scale or GGUF type, ``max_layers`` below 2 or a bad seed list raises ``ValueError``."""
    import gguf

    check_scale(values["trained_scale"])
    max_layers = values["max_layers"]
    if max_layers is not None and (isinstance(max_layers, bool) or not isinstance(max_layers, int) or max_layers < 2):
        raise ParameterError(f"max_layers must be an integer >= 2 (continuity compares adjacent layers), "
                             f"got {max_layers!r}")
    quantize = _names(values["quantize"], "quantize")
    known_types = {t.name for t in gguf.GGMLQuantizationType}
    bad = [q for q in quantize if q not in known_types]
    if bad:
        raise ParameterError(f"unknown GGUF type(s) {bad}; valid choices include F16, Q8_0, Q4_1, Q4_0, Q5_0")
    if not isinstance(values["measure_cost"], bool):
        raise ParameterError(f"measure_cost must be True or False, got {values['measure_cost']!r}")
    return PretrainedChapterSettings(
        scale=scale, models=_names(values["models"], "models"), max_layers=max_layers,
        trained_scale=values["trained_scale"], seeds=parse_seeds(values["seeds"]), quantize=quantize,
        large_models=() if not values["large_models"] else _names(values["large_models"], "large_models"),
        measure_cost=values["measure_cost"])


def describe(settings: PretrainedChapterSettings) -> dict[str, Any]:
    """The provenance rows of the chapter."""
    trained_shape = settings.trained_configs()[0].shape
    return dict(
        seeds=settings.seeds,
        data="pretrained checkpoints: " + ", ".join(f"`{m}`" for m in settings.models)
             + (f" (first {settings.max_layers} layers)" if settings.max_layers else " (all layers)")
             + f"; trained models: the transformer chapter's `silu` variant at its `{settings.trained_scale}` scale",
        model=f"see the table below; trained: {trained_shape.n_layers} layers, d = {trained_shape.d_model}",
        training="none for the pretrained checkpoints (weights as published); trained models from the cache of the "
                 "transformer chapter (trained once if missing)",
    )


CHAPTER = Chapter(name="pretrained_continuity", parameters=_PARAMETERS, presets=_PRESETS, build=build_settings,
                  describe=describe, runs=PretrainedChapterSettings.trained_configs)


_SPACE_COLUMNS = {"input": ("v1_cos", "v1_baseline"), "output": ("u1_cos", "u1_baseline")}


class PairEstimate(NamedTuple):
    """A projection's continuity over adjacent layer pairs (mean ± sd over pairs) and its space's random baseline."""

    estimate: Estimate
    baseline: float


def layer_pair_estimate(table: pd.DataFrame, projection: str, space: str) -> PairEstimate:
    """Mean ± sd over adjacent layer pairs of an analyzer table's v1 (input) or u1 (output)
    |cos| for one projection, and that space's random baseline."""
    column, baseline = _SPACE_COLUMNS[space]
    rows = table[table["projection"] == projection]
    return PairEstimate(estimate(rows[column]), float(rows[baseline].iloc[0]) if len(rows) else math.nan)


def continuity_overview(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (model, projection, space) of several analyzer tables: layer-pair mean and
    sd, number of pairs, and the random baseline. ``tables`` maps a label to a table."""
    rows = []
    for label, table in tables.items():
        for projection in table["projection"].cat.categories if hasattr(table["projection"], "cat") \
                else table["projection"].unique():
            for space in ("input", "output"):
                ours, baseline = layer_pair_estimate(table, projection, space)
                rows.append(dict(model=label, projection=projection, space=space, mean=ours.mean, sd=ours.std,
                                 pairs=ours.n, baseline=baseline))
    return pd.DataFrame(rows)


@dataclass
class Results:
    """Everything the chapter measured.

    ``tables``: the analyzer's table per pretrained checkpoint; ``large_tables``: those of the
    large checkpoints found here; ``large_status``: one row per large checkpoint looked for;
    ``trained_tables``: per seed, the table of a trained transformer; ``gains``: per post-norm
    checkpoint, :func:`output_gain_continuity`; ``effects``: :func:`quantization_effect` of
    every trained model (column ``seed``).
    """

    settings: PretrainedChapterSettings
    tables: dict[str, pd.DataFrame]
    large_tables: dict[str, pd.DataFrame]
    large_status: list[dict[str, str]]
    trained_tables: dict[int, pd.DataFrame]
    trained_parameters: int
    gains: dict[str, pd.DataFrame]
    effects: pd.DataFrame

    @property
    def llama_like(self) -> list[str]:
        """The pretrained checkpoints with a Llama (or GGUF Llama) layout."""
        return llama_like(self.tables)

    @property
    def gemma(self) -> list[str]:
        """The pretrained checkpoints with a Gemma-3 layout (post-norms)."""
        return gemma(self.tables)


def llama_like(tables: dict[str, pd.DataFrame]) -> list[str]:
    return [m for m, t in tables.items() if t.attrs["layout"] in ("gguf", "llama")]


def gemma(tables: dict[str, pd.DataFrame]) -> list[str]:
    return [m for m, t in tables.items() if t.attrs["layout"].startswith("gemma3")]


def run(settings: PretrainedChapterSettings) -> Results:
    """Analyse every checkpoint of the chapter, and the trained transformers (from the cache, or
    trained once), in fp32 and after each GGUF round trip; look for the large checkpoints."""
    tables = {name: analyze(name, max_layers=settings.max_layers) for name in settings.models}
    gains = {model: output_gain_continuity(model, max_layers=settings.max_layers) for model in gemma(tables)}
    trained_tables, effects, trained_parameters = {}, [], 0
    for config in settings.trained_configs():
        model = trained_lm(config, progress=False)
        trained_parameters = parameter_count(model)
        trained_tables[config.seed] = analyze(model, progress=False)
        effects.append(quantization_effect(model, settings.quantize).assign(seed=config.seed))
    large_tables, large_status = {}, []
    for model_id in settings.large_models:
        try:
            src, _, _ = plan(model_id)
        except (ModelNotAvailable, FileNotFoundError) as error:
            large_status.append(dict(model=model_id, status="not available", detail=str(error).split(". ")[0]))
            continue
        large_tables[model_id] = analyze(model_id)
        large_status.append(dict(model=model_id, status="analysed", detail=src.description))
    return Results(settings=settings, tables=tables, large_tables=large_tables, large_status=large_status,
                   trained_tables=trained_tables, trained_parameters=trained_parameters, gains=gains,
                   effects=pd.concat(effects, ignore_index=True))


def _describe(name: str, table: pd.DataFrame) -> dict[str, Any]:
    first = table[table.layer == table.layer.min()].set_index("projection")
    return dict(model=name, architecture=table.attrs["architecture"], layout=table.attrs["layout"],
                layers=int(table.layer.max()) + 1, d_model=int(first.loc["q_proj", "in_dim"]),
                ffn=int(first.loc["up_proj", "out_dim"]), parameters=f"{table.attrs['parameters'] / 1e6:.1f}M",
                stored_as=", ".join(sorted(set(table["dtype"]))), source=table.attrs["source"])


def overview_table(results: Results):
    """One row per pretrained checkpoint: architecture, layout, size, storage type, source."""
    return pd.DataFrame([_describe(name, table) for name, table in results.tables.items()]).style.hide(axis="index")


def _slug(name: str) -> str:
    """``name`` in lower-case letters, digits and '-' (figure names and claim keys)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def depth_figures(results: Results) -> None:
    """Per pretrained checkpoint: its per-projection summary table and its depth figure."""
    names = list(results.tables)
    display(Markdown("One table and one figure per model: "
                     + ", ".join(f"{{numref}}`pretrained-depth-{_slug(n)}` ({n})" for n in names) + "."))
    for name, table in results.tables.items():
        description = OFFLINE_MODELS[name].description if name in OFFLINE_MODELS else name
        display(Markdown(f"**{name}** ({description}; layout `{table.attrs['layout']}`). "
                         "Mean over adjacent layer pairs, sd over pairs:"))
        display(summary(table).reset_index().style.format(precision=3, na_rep="–").hide(axis="index"))
        fig = plot_depth_continuity(table, title=name)
        predicted = []
        for projection, space, _ in PROJECTION_PREDICTIONS:
            if projection in set(table.projection):
                ours, baseline = layer_pair_estimate(table, projection, space)
                predicted.append(f"{projection.replace('_proj', '')} {vector_name(space)} {ours} (random {baseline:.3f})")
        v_in, _ = layer_pair_estimate(table, "v_proj", "input")
        v_out, _ = layer_pair_estimate(table, "v_proj", "output")
        show_figure(fig, f"pretrained-depth-{_slug(name)}", (
            f"{name}: |cos| of each projection's leading singular vectors between adjacent layers (dotted: each "
            "projection's random baseline). Predicted-continuous: " + "; ".join(predicted)
            + f". V: v1 {v_in}, u1 {v_out}."))


#: The projections of the Gemma-3 / Llama comparison, with the space each is compared in.
_GEMMA_COMPARED = [("o_proj", "output"), ("down_proj", "output"), ("q_proj", "input"), ("k_proj", "input"),
                   ("gate_proj", "input"), ("up_proj", "input")]


def gemma_comparison(results: Results) -> list:
    """Gemma-3 (post-norms) next to a Llama-layout model: a table and a sentence, or why not."""
    llama, gemma_models, tables = results.llama_like, results.gemma, results.tables
    if not (llama and gemma_models):
        return [Markdown("This comparison needs a Llama-layout model and Gemma-3 (the `cpu` scale analyses both); "
                         f"analysed here: {', '.join(results.settings.models)}.")]
    rows = []
    for projection, space in _GEMMA_COMPARED:
        row = dict(projection=projection, space=space)
        for model in llama + gemma_models:
            ours, baseline = layer_pair_estimate(tables[model], projection, space)
            row[model] = str(ours)
            row[f"{model} baseline"] = round(baseline, 3)
        rows.append(row)
    lines = []
    for projection in ("o_proj", "down_proj"):
        g, _ = layer_pair_estimate(tables[gemma_models[0]], projection, "output")
        l, _ = layer_pair_estimate(tables[llama[0]], projection, "output")
        lines.append(f"{projection} u1: {gemma_models[0]} {g} vs {llama[0]} {l}")
    return [pd.DataFrame(rows).style.hide(axis="index"),
            Markdown("Output-space continuity of the writing projections: " + "; ".join(lines) + ".")]


def gain_estimates(gains: dict[str, pd.DataFrame]) -> dict[tuple[str, str], tuple[Estimate, Estimate]]:
    """Per (post-norm model, projection): u1 continuity of diag(g) W and of the gain-only control."""
    out = {}
    for model, table in gains.items():
        for projection, rows in table.groupby("projection", sort=False):
            pairs = rows.dropna(subset=["u1_cos"])
            out[(model, projection)] = (estimate(pairs["u1_cos_gained"]), estimate(pairs["u1_cos_gain_only"]))
    return out


def gain_tables(results: Results) -> list:
    """The gain-scaled output continuity of each post-norm checkpoint, with its controls."""
    rows = []
    for model, table in results.gains.items():
        for projection, group in table.groupby("projection", sort=False):
            pairs = group.dropna(subset=["u1_cos"])
            rows.append(dict(model=model, projection=projection, pairs=len(pairs),
                             u1_cos=str(estimate(pairs["u1_cos"])),
                             u1_cos_gain_scaled=str(estimate(pairs["u1_cos_gained"])),
                             gain_only_control=str(estimate(pairs["u1_cos_gain_only"])),
                             adjacent_gain_cos=str(estimate(pairs["gain_cos"])),
                             top_coordinate_share=str(estimate(pairs["gain_top1_share"])),
                             baseline=round(float(group["u1_baseline"].iloc[0]), 3)))
    if not rows:
        return [Markdown("No checkpoint with post-norms is analysed at this scale.")]
    return [pd.DataFrame(rows).style.hide(axis="index"),
            Markdown("Mean ± sd over adjacent layer pairs. `u1_cos`: the projection's own weights; "
                     "`u1_cos_gain_scaled`: diag(g_l) W_l, what it writes into the stream; `gain_only_control`: "
                     "diag(g_l) times a Gaussian matrix.")]


def trained_seed_means(results: Results) -> pd.DataFrame:
    """:func:`continuity_overview` of each trained transformer (column ``seed``)."""
    label = f"trained ({results.settings.trained_scale})"
    return pd.concat([continuity_overview({label: table}).assign(seed=seed)
                      for seed, table in results.trained_tables.items()])


def size_overview(results: Results) -> pd.DataFrame:
    """Mean continuity per (model, projection, space) with the model's parameter count: the trained
    transformers (mean ± sd over seeds of the per-seed layer-pair mean) first, then each checkpoint."""
    params = {name: table.attrs["parameters"] for name, table in results.tables.items()}
    overview = continuity_overview(results.tables).assign(parameters=lambda f: f["model"].map(params))
    trained = (trained_seed_means(results).groupby(["model", "projection", "space"], sort=False)
               .agg(mean=("mean", "mean"), sd=("mean", "std"), pairs=("pairs", "first"),
                    baseline=("baseline", "first"))
               .reset_index().assign(parameters=results.trained_parameters))
    return pd.concat([trained, overview], ignore_index=True)


def size_figure(results: Results) -> None:
    """Every model's mean continuity per projection against its size: a wide table, then the figure."""
    combined = size_overview(results)
    fig = plot_continuity_vs_size(combined)
    wide = combined.assign(vector=lambda f: f["space"].map({"input": "v1", "output": "u1"}))
    wide["value"] = [f"{m:.2f} ± {s:.2f}" if not math.isnan(s) else f"{m:.2f}" for m, s in zip(wide["mean"], wide["sd"])]
    wide = wide.pivot_table(index=["model", "parameters"], columns=["projection", "vector"], values="value",
                            aggfunc="first", sort=False)
    display(wide[[c for p in PROJECTIONS for c in wide.columns if c[0] == p]])
    show_figure(fig, "pretrained-vs-size", (
        f"Mean adjacent-layer continuity per projection against model size. The "
        f"trained transformers ({len(results.trained_tables)} seed(s), {results.trained_parameters / 1e6:.2f}M "
        "parameters) show mean ± sd over seeds of the per-seed layer-pair mean; each pretrained checkpoint shows its "
        "mean ± sd over layer pairs. Black ticks: random baselines (they differ by dimension). V is drawn faded: it is "
        "predicted low."))


def quantization_shifts(effects: pd.DataFrame) -> pd.DataFrame:
    """:func:`quantization_shift` of each seed of ``effects`` (column ``seed``)."""
    return pd.concat([quantization_shift(effects[effects.seed == s]).assign(seed=s) for s in effects.seed.unique()])


@dataclass(frozen=True)
class QuantizationChange:
    """One GGUF type's effect on the metric: the largest and the mean |change| of v1/u1 |cos| over
    the quantized matrices (those stored as F16 excluded), layer pairs and seeds."""

    worst: float
    typical: float


def quantization_changes(shifts: pd.DataFrame, formats: Sequence[str]) -> dict[str, QuantizationChange]:
    """Per GGUF type of :func:`quantization_shifts`: its :class:`QuantizationChange`."""
    quantized = shifts[shifts.stored_as != "F16"]
    return {fmt: QuantizationChange(
        worst=quantized.loc[quantized.format == fmt, ["v1_shift_max", "u1_shift_max"]].max().max(),
        typical=quantized.loc[quantized.format == fmt, ["v1_shift_mean", "u1_shift_mean"]].mean().mean())
        for fmt in formats}


def quantization_verdict(worst: float, limit: float = QUANTIZATION_LIMIT) -> str:
    """"reproduced" when the largest |change| of v1/u1 |cos| stays below ``limit``, "not reproduced"
    when it reaches it, "not tested" when nothing was quantized (NaN)."""
    if math.isnan(worst):
        return "not tested"
    return "reproduced" if worst < limit else "not reproduced"


def quantization_check(results: Results) -> list:
    """The quantization check: the shift table per type and projection, and how it compares."""
    formats = results.settings.quantize
    shifts = quantization_shifts(results.effects)
    table = (shifts.groupby(["format", "projection", "stored_as"], sort=False)
             .agg(v1_shift_max=("v1_shift_max", "max"), v1_shift_mean=("v1_shift_mean", "mean"),
                  u1_shift_max=("u1_shift_max", "max"), u1_shift_mean=("u1_shift_mean", "mean"),
                  sigma1_rel_change_max=("sigma1_rel_change_max", "max")).reset_index())
    changes = quantization_changes(shifts, formats)
    seed_means = trained_seed_means(results)
    predicted_space = {p: s for p, s, _ in PROJECTION_PREDICTIONS} | {"v_proj": "input"}
    spread = {p: seed_means[(seed_means.projection == p) & (seed_means.space == predicted_space[p])]["mean"].std()
              for p in PROJECTIONS}
    return [table.style.format(precision=4, na_rep="–").hide(axis="index"), Markdown(
        "Largest change of any v1/u1 |cos| over all quantized matrices, layer pairs and seeds: "
        + "; ".join(f"{fmt} {changes[fmt].worst:.4f} (mean change {changes[fmt].typical:.4f})" for fmt in formats)
        + ". For scale: the differences between projections that the paper's pattern is about are tenths of |cos|, "
        "and the seed-to-seed sd of the trained models' layer means (v1 for Q/K/V/Gate/Up, u1 for O/Down) is "
        + ", ".join(f"{p.replace('_proj', '')} {s:.3f}" for p, s in spread.items() if not math.isnan(s)) + ".")]


def large_model_status(results: Results) -> list:
    """Which large checkpoints were found here, and what to do where they were not."""
    settings, out = results.settings, []
    if results.large_status:
        out.append(pd.DataFrame(results.large_status).style.hide(axis="index"))
    missing = [s["model"] for s in results.large_status if s["status"] != "analysed"]
    if not settings.large_models:
        out.append(Markdown(f"The `{settings.scale}` scale looks for no large checkpoint; `cpu` and `paper` look for "
                            "meta-llama/Llama-3.1-8B and meta-llama/Llama-3.1-70B."))
    elif missing:
        out.append(Markdown(
            f"**Not available here:** {', '.join(missing)}. This machine has no network to Hugging Face and no local "
            "copy, so the paper's large-model check is not reproduced in this rendering. Where they exist, run "
            "`geocont analyze meta-llama/Llama-3.1-8B` or this chapter with `-p scale paper` (after "
            "`huggingface-cli download`)."))
    return out


@dataclass(frozen=True)
class LargeModelCost:
    """The measured analysis time of one Llama-3.1-8B-shaped layer, and per large model
    (:data:`geocont.synthetic.LARGE_MODELS`) its extrapolated cost."""

    seconds_per_layer: float
    table: pd.DataFrame


def large_model_cost(settings: PretrainedChapterSettings) -> LargeModelCost | None:
    """Time the analyzer on two Llama-3.1-8B-shaped layers (random bf16 weights with a planted
    leading direction) and extrapolate by parameters per layer; ``None`` unless ``measure_cost``."""
    if not settings.measure_cost:
        return None
    with tempfile.TemporaryDirectory(prefix="geocont-cost-") as directory:
        path = write_spiked_checkpoint(directory, LLAMA_31_8B_LAYER, n_layers=2)
        start = time.perf_counter()
        analyze(path, use_cache=False, progress=False)
        per_layer = (time.perf_counter() - start) / 2
    rows = []
    for name, (shapes, count) in LARGE_MODELS.items():
        seconds = per_layer * layer_parameters(shapes) / layer_parameters(LLAMA_31_8B_LAYER)
        largest = max(o * i for o, i in shapes.values())
        rows.append(dict(model=name, layers=count, parameters_per_layer=f"{layer_parameters(shapes) / 1e6:.0f}M",
                         seconds_per_layer=round(seconds, 1), total_minutes=round(seconds * count / 60, 1),
                         largest_matrix=f"{largest / 1e6:.0f}M values = {largest * 4 / 2**20:.0f} MiB fp32"))
    return LargeModelCost(per_layer, pd.DataFrame(rows))


def cost_display(settings: PretrainedChapterSettings, cost: LargeModelCost | None) -> list:
    """The cost table and how it was measured, or where it is measured instead."""
    if cost is None:
        return [Markdown(f"The cost of the large models is measured at the `cpu` scale and by "
                         f"`benchmarks/bench_analyzer.py` (not at `{settings.scale}`, to keep it short).")]
    return [cost.table.style.hide(axis="index"), Markdown(
        f"Measured in this run: two layers with Llama-3.1-8B's shapes (random weights with a planted leading "
        f"direction, bf16 safetensors) took {cost.seconds_per_layer:.1f} s per layer on this machine; the 70B figure "
        "scales that by parameters per layer. Memory stays bounded by two matrices of one projection (the analyzer "
        "streams); `benchmarks/bench_analyzer.py` measures the peak resident memory and compares with exact SVD.")]


def plot_continuity_vs_size(overview: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None) -> plt.Figure:
    """Mean adjacent-layer continuity per projection against parameter count, one point per
    model (``overview``: columns model, parameters, projection, space, mean, sd; error bars
    are ``sd``), the predicted-continuous projections of each space in full colour.

    Left: input space (v1) of Q, K, Gate, Up and V; right: output space (u1) of O, Down and V.
    Each point's random baseline is drawn as a short black tick at the same x."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    else:
        fig = axes[0].figure
    colours = projection_colours()
    panels = [("input", ["q_proj", "k_proj", "gate_proj", "up_proj", "v_proj"], "input space: v1 |cos|"),
              ("output", ["o_proj", "down_proj", "v_proj"], "output space: u1 |cos|")]
    models = list(dict.fromkeys(overview["model"]))
    offsets = {p: 1.0 + 0.06 * (i - 3) for i, p in enumerate(colours)}  # spread projections sideways (log x)
    for ax, (space, projections, title) in zip(axes, panels):
        frame = overview[(overview["space"] == space) & overview["projection"].isin(projections)]
        for projection in projections:
            rows = frame[frame["projection"] == projection]
            if rows.empty:
                continue
            x = rows["parameters"] * offsets[projection]
            ax.errorbar(x, rows["mean"], yerr=rows["sd"].fillna(0), fmt="o", color=colours[projection], capsize=2,
                        alpha=0.45 if projection == "v_proj" else 1.0, label=projection.replace("_proj", ""))
            ax.scatter(x, rows["baseline"], marker="_", color="black", s=60, zorder=3)
        ax.set_xscale("log")
        ax.set(xlabel="parameters (log scale)", ylabel="|cos| with the next layer, mean over pairs", ylim=(0, 1.02),
               title=title)
        for model in models:
            rows = overview[overview["model"] == model]
            ax.annotate(model, (rows["parameters"].iloc[0], 0.97), rotation=90, fontsize="x-small", ha="center",
                        va="top", color="0.3")
    axes[0].scatter([], [], marker="_", color="black", label="random baseline")
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def quantization_effect(module: torch.nn.Module, qtypes: Sequence[str] = ("Q8_0", "Q4_1"),
                        progress: bool = False) -> pd.DataFrame:
    """The analyzer's table of ``module`` in fp32 and after a GGUF round trip through each type.

    Each quantized copy is written with :func:`geocont.checkpoints.export_gguf` to a
    temporary file and analysed from it, as a downloaded GGUF would be. Returns the
    stacked tables with a ``format`` column (``fp32`` first, then each type).
    """
    import tempfile

    from ..checkpoints import export_gguf

    tables = [analyze(module, progress=progress, use_cache=False).assign(format="fp32")]
    with tempfile.TemporaryDirectory(prefix="geocont-quant-") as directory:
        for qtype in qtypes:
            path = export_gguf(module, f"{directory}/model-{qtype}.gguf", qtype)
            tables.append(analyze(path, layout="gguf", progress=progress, use_cache=False).assign(format=qtype))
    return pd.concat(tables, ignore_index=True)


def quantization_shift(effect: pd.DataFrame) -> pd.DataFrame:
    """Per quantized format and projection: largest and mean |change| of v1/u1 |cos| and the
    relative change of sigma1, against the fp32 rows of :func:`quantization_effect`."""
    keys = ["projection", "layer"]
    reference = effect[effect["format"] == "fp32"].set_index(keys)
    rows = []
    for fmt, table in effect[effect["format"] != "fp32"].groupby("format", sort=False):
        table = table.set_index(keys)
        for projection in reference.index.get_level_values(0).unique():
            ref, quant = reference.loc[projection], table.loc[projection]
            dv = (quant["v1_cos"] - ref["v1_cos"]).abs().dropna()
            du = (quant["u1_cos"] - ref["u1_cos"]).abs().dropna()
            ds = ((quant["sigma1"] - ref["sigma1"]) / ref["sigma1"]).abs()
            rows.append(dict(format=fmt, projection=projection, stored_as=", ".join(sorted(set(quant["dtype"]))),
                             v1_shift_max=dv.max(), v1_shift_mean=dv.mean(), u1_shift_max=du.max(),
                             u1_shift_mean=du.mean(), sigma1_rel_change_max=ds.max()))
    return pd.DataFrame(rows)


def output_gain_continuity(source: Any, layout: str | None = None, max_layers: int | None = None,
                           progress: bool = False) -> pd.DataFrame:
    """For layouts with post-norms (Gemma-3): u1 continuity of ``W`` and of ``diag(g_l) W``.

    ``g_l`` is the gain of the RMSNorm that layer l applies to the projection's output
    before the residual add, so ``diag(g_l) W`` is (up to the per-token RMS scalar) what
    the projection actually writes into the stream. One row per (projection, layer) with
    ``u1_cos`` (W) and ``u1_cos_gained`` (diag(g) W), pair columns as in :func:`analyze`,
    Controls, since similar gains alone pull ``diag(g) W`` towards the same large-gain
    coordinates: ``u1_cos_gain_only``, the same |cos| for ``diag(g_l) G_l`` with ``G_l`` an
    independent Gaussian matrix (what the gains would give with no learned structure in W);
    ``gain_cos``, |cos| of g_l and g_l+1; ``gain_top1_share``, the share of ||g||^2 held by
    the largest coordinate.
    """
    src, chosen, matrices = plan(source, layout, max_layers=max_layers)
    if not chosen.output_gains:
        raise ValueError(f"layout {chosen.name!r} has no output norms; layouts with them: "
                         + ", ".join(name for name, known in LAYOUTS.items() if known.output_gains))
    rows = []
    for projection, template in chosen.output_gains:
        previous = None
        for ref in matrices.get(projection, []):
            W = ref.load(src)
            gain = src.read(template.format(layer=ref.layer)) + chosen.gain_offset
            plain = top_singular_triplets(W, 1, method=triplet_method("auto", ref.shape))
            gained = top_singular_triplets(gain[:, None] * W, 1, method=triplet_method("auto", ref.shape))
            noise = torch.randn(ref.shape, generator=torch.Generator().manual_seed(ref.layer))
            gain_only = top_singular_triplets(gain[:, None] * noise, 1, method=triplet_method("auto", ref.shape))
            row = dict(projection=projection, layer=ref.layer, u1_cos=math.nan, u1_cos_gained=math.nan, u1_cos_gain_only=math.nan,
                       gain_cos=math.nan,
                       u1_baseline=random_abs_cos(ref.shape[0]),
                       gain_top1_share=float(gain.square().max() / gain.square().sum()))
            if previous is not None:
                before, before_plain, before_gained, before_gain, before_gain_only = previous
                before["gain_cos"] = float(abs_cos(before_gain, gain))
                before["u1_cos_gain_only"] = float(abs_cos(before_gain_only.u[:, 0], gain_only.u[:, 0]))
                before["u1_cos"] = float(abs_cos(before_plain.u[:, 0], plain.u[:, 0]))
                before["u1_cos_gained"] = float(abs_cos(before_gained.u[:, 0], gained.u[:, 0]))
            rows.append(row)
            previous = (row, plain, gained, gain, gain_only)
    return pd.DataFrame(rows)


def _checkpoint_claim_specs(label: str, table: pd.DataFrame) -> list[tuple[str, str, str, str, str]]:
    """The claims one checkpoint supports, in order: (key, short claim, projection, space, why);
    ``why`` is empty for the "V is low" claims."""
    present, slug = set(table["projection"]), _slug(label)
    specs = [(f"{slug}-{p.replace('_proj', '')}-{vector_name(s)}", f"{p} has {s}-space continuity", p, s, why)
             for p, s, why in PROJECTION_PREDICTIONS if p in present]
    if "v_proj" in present:
        specs += [(f"{slug}-v-low-{vector_name(s)}", f"V has low {s}-space continuity", "v_proj", s, "")
                  for s in ("input", "output")]
    return specs


def _checkpoint_claims(out: ClaimsBuilder, label: str, table: pd.DataFrame) -> None:
    """The paper's projection pattern in one checkpoint (spread and n over its adjacent layer pairs).

    A projection "has continuity" by :func:`verdict_for_difference` against its space's random
    baseline; V "is low" when the lowest of the other projections of that space exceeds it by
    the same rule.
    """
    present = set(table["projection"])
    for key, short, projection, space, why in _checkpoint_claim_specs(label, table):
        ours, baseline = layer_pair_estimate(table, projection, space)
        vector = vector_name(space)
        if why:
            out.add(key, f"{label}: {short} ({why})", f"{projection} {vector} |cos|, mean over layer pairs", "high",
                    ours, baseline, verdict_for_difference(ours, Estimate(baseline, 0.0, 1)),
                    note="spread and n over adjacent layer pairs")
            continue
        others = [p for p, s, _ in PROJECTION_PREDICTIONS if s == space and p in present]
        lowest_name, lowest = min(((p, layer_pair_estimate(table, p, space)[0]) for p in others),
                                  key=lambda item: item[1].mean)
        out.add(key, f"{label}: {short}", f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low",
                ours, baseline, verdict_for_difference(lowest, ours), note=f"lowest other: {lowest_name} {lowest}")


def chapter_claims(tables: dict[str, pd.DataFrame], large_tables: dict[str, pd.DataFrame],
                   gains: dict[tuple[str, str], tuple[Estimate, Estimate]],
                   quantization: dict[str, QuantizationChange], large_status: Sequence[dict[str, str]],
                   n_trained: int) -> pd.DataFrame:
    """The chapter's claims from its measurements.

    ``tables`` / ``large_tables``: analyzer tables of the pretrained and the large checkpoints;
    ``gains``: :func:`gain_estimates`; ``quantization``: :func:`quantization_changes`;
    ``large_status``: the large checkpoints looked for; ``n_trained``: trained models quantized.
    """
    out = ClaimsBuilder(CHAPTER.name)
    for label, table in {**tables, **large_tables}.items():
        _checkpoint_claims(out, label, table)
    llama, gemma_models = llama_like(tables), gemma(tables)
    if llama and gemma_models:
        for projection in ("o_proj", "down_proj"):
            g, baseline = layer_pair_estimate(tables[gemma_models[0]], projection, "output")
            l, _ = layer_pair_estimate(tables[llama[0]], projection, "output")
            out.add(f"gemma-post-norm-{projection.replace('_proj', '')}-u1",
                    f"(ours) Gemma-3's post-norms weaken {projection} output-space continuity",
                    f"{projection} u1: {llama[0]} minus {gemma_models[0]}", "predicted by the mechanism (our reading)",
                    l.mean - g.mean, baseline, verdict_for_difference(l, g),
                    note=f"{llama[0]} {l}, {gemma_models[0]} {g}", n=min(l.n, g.n))
    for (model, projection), (gained, control) in gains.items():
        out.add(f"{_slug(model)}-{projection.replace('_proj', '')}-gain-scaled-u1",
                f"(ours) {model}: {projection} writes into the stream more continuously than its gains alone explain",
                f"{projection} u1 of diag(g) W minus the gain-only control diag(g) G", "not in the paper",
                gained.mean - control.mean, control.mean, verdict_for_difference(gained, control),
                note=f"diag(g) W {gained}, diag(g) G {control} (spread over layer pairs); baseline column: the control",
                n=gained.n)
    for fmt, change in quantization.items():
        out.add(f"quantization-{_slug(fmt)}",
                f"(ours) {fmt} quantization moves v1/u1 |cos| by less than {QUANTIZATION_LIMIT:g}",
                f"largest |change| over matrices, pairs, seeds ({fmt})", "not in the paper", change.worst, 0.0,
                quantization_verdict(change.worst), note=f"mean change {change.typical:.4f}", n=n_trained)
    for status in large_status:
        if status["status"] != "analysed":
            out.add(f"large-{_slug(status['model'])}", f"The pattern holds in {status['model']}",
                    "v1/u1 |cos| per projection", "holds (to 70B)", math.nan, math.nan, "not tested",
                    note="checkpoint not available here")
    return out.table()


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    changes = quantization_changes(quantization_shifts(results.effects), results.settings.quantize)
    return chapter_claims(results.tables, results.large_tables, gain_estimates(results.gains), changes,
                          results.large_status, n_trained=len(results.trained_tables))


def verdict_counts(settings: PretrainedChapterSettings, claims: pd.DataFrame) -> Markdown:
    """How many claims got each verdict."""
    counts = claims["verdict"].value_counts().to_dict()
    return Markdown(f"At the `{settings.scale}` scale: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ".")


def verdict(results: Results, claims: pd.DataFrame) -> Markdown:
    """Per checkpoint, which of its claims were reproduced, partly, or not; and, per post-norm
    projection, its own, gain-scaled and gain-only output continuity."""
    lines = []
    for label, table in {**results.tables, **results.large_tables}.items():
        verdicts = [(claim(claims, key)["verdict"], short) for key, short, *_ in _checkpoint_claim_specs(label, table)]
        by_verdict = {v: [short for got, short in verdicts if got == v]
                      for v in ("reproduced", "partly reproduced", "not reproduced")}
        lines.append(f"- **{label}**: " + "; ".join(f"{v}: {', '.join(c) if c else 'none'}"
                                                   for v, c in by_verdict.items()))
    for (model, projection), (gained, control) in gain_estimates(results.gains).items():
        own, baseline = layer_pair_estimate(results.tables[model], projection, "output")
        lines.append(f"- **{model} {projection}**: u1 continuity of the weights themselves {own}, of what they write "
                     f"into the stream (diag(g) W) {gained}, of the gains alone (diag(g) G) {control}; "
                     f"random {baseline:.3f}.")
    return Markdown("What the checkpoints analysed here show:\n\n" + "\n".join(lines))

