"""pretrained_continuity: what the chapter computes (settings, runs, events, claims); no figures, no matplotlib."""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import pandas as pd
import torch

from ... import cache
from ...analyzer import ANALYZER_VERSION, analyze, plan, triplet_method
from ...book.chapter import Chapter, ClaimsBuilder, claim, presets
from ...layouts import LAYOUTS, PROJECTIONS
from ...lm import lm_job, trained_lm
from ...metrics import abs_cos, random_abs_cos, top_singular_triplets, vector_name
from ...pretrained import OFFLINE_MODELS, ModelNotAvailable
from ...scales import ParameterError, check_scale, parse_seeds
from ...statistics import V_LOW_MARGIN, Estimate, difference, estimate, known, verdict_for_difference, verdict_v_low
from ...synthetic import LARGE_MODELS, LLAMA_31_8B_LAYER, layer_parameters, write_spiked_checkpoint
from ...transformer import parameter_count
from ..common import short_projection, slug
from ..lm_runs import PROJECTION_PREDICTIONS, lm_preset, reference_configs

if TYPE_CHECKING:
    from ...config import LMRunConfig


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


_PRESET_VALUES: dict[str, dict[str, Any]] = {
    "smoke": dict(models=("smollm2-135m",), max_layers=6, trained_scale="smoke", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=(), measure_cost=False),
    "cpu": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="cpu",
                quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
    "paper": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="paper", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
}
#: At ``cpu`` the trained models' seeds are the language-model presets' (``smoke`` and ``paper`` set one seed).
_PRESETS = presets(lm_preset, _PRESET_VALUES, keep=("seeds",))


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
    trained once), in fp32 and after each GGUF round trip; look for the large checkpoints. Every
    analysis is cached (``pretrained`` kind), so the results store captures them all."""
    tables = {name: analyze(name, max_layers=settings.max_layers) for name in settings.models}
    gains = {model: cached_output_gain_continuity(model, max_layers=settings.max_layers) for model in gemma(tables)}
    trained_tables, effects, trained_parameters = {}, [], 0
    for config in settings.trained_configs():
        model = trained_lm(config, progress=False)
        trained_parameters = parameter_count(model)
        effect = cached_quantization_effect(config, model, settings.quantize)
        trained_tables[config.seed] = effect[effect["format"] == "fp32"].drop(columns="format").reset_index(drop=True)
        effects.append(effect.assign(seed=config.seed))
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


def gain_estimates(gains: dict[str, pd.DataFrame]) -> dict[tuple[str, str], tuple[Estimate, Estimate]]:
    """Per (post-norm model, projection): u1 continuity of diag(g) W and of the gain-only control."""
    out = {}
    for model, table in gains.items():
        for projection, rows in table.groupby("projection", sort=False):
            pairs = rows.dropna(subset=["u1_cos"])
            out[(model, projection)] = (estimate(pairs["u1_cos_gained"]), estimate(pairs["u1_cos_gain_only"]))
    return out


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


def quantization_effect(module: torch.nn.Module, qtypes: Sequence[str] = ("Q8_0", "Q4_1"),
                        progress: bool = False) -> pd.DataFrame:
    """The analyzer's table of ``module`` in fp32 and after a GGUF round trip through each type.

    Each quantized copy is written with :func:`geocont.checkpoints.export_gguf` to a
    temporary file and analysed from it, as a downloaded GGUF would be. Returns the
    stacked tables with a ``format`` column (``fp32`` first, then each type).
    """
    import tempfile

    from ...checkpoints import export_gguf

    tables = [analyze(module, progress=progress, use_cache=False).assign(format="fp32")]
    with tempfile.TemporaryDirectory(prefix="geocont-quant-") as directory:
        for qtype in qtypes:
            path = export_gguf(module, f"{directory}/model-{qtype}.gguf", qtype)
            tables.append(analyze(path, layout="gguf", progress=progress, use_cache=False).assign(format=qtype))
    return pd.concat(tables, ignore_index=True)


#: The cache kind of the chapter's analyses (that of :func:`geocont.analyzer.analyze`): ``store`` captures them.
ANALYSIS_KIND = "pretrained"


def cached_quantization_effect(config: "LMRunConfig", model: torch.nn.Module, qtypes: Sequence[str]) -> pd.DataFrame:
    """:func:`quantization_effect` of ``config``'s trained ``model``, cached by the run's key and the types."""
    key = dict(analysis="quantization-effect", trained=cache.cache_key("lm", lm_job(config).key_config()),
               qtypes=list(qtypes), version=ANALYZER_VERSION)
    return cache.cached(ANALYSIS_KIND, key, lambda: quantization_effect(model, qtypes))


def cached_output_gain_continuity(source: Any, max_layers: int | None = None) -> pd.DataFrame:
    """:func:`output_gain_continuity` of a checkpoint, cached by its content (as :func:`~geocont.analyzer.analyze`)."""
    src, chosen, _ = plan(source, max_layers=max_layers)
    identity = src.identity()
    if identity is None:
        return output_gain_continuity(source, max_layers=max_layers)
    key = dict(analysis="output-gain-continuity", source=identity, layout=chosen.name, max_layers=max_layers,
               version=ANALYZER_VERSION)
    return cache.cached(ANALYSIS_KIND, key, lambda: output_gain_continuity(source, max_layers=max_layers))


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
    present, prefix = set(table["projection"]), slug(label)
    specs = [(f"{prefix}-{short_projection(p)}-{vector_name(s)}", f"{p} has {s}-space continuity", p, s, why)
             for p, s, why in PROJECTION_PREDICTIONS if p in present]
    if "v_proj" in present:
        specs += [(f"{prefix}-v-low-{vector_name(s)}", f"V has low {s}-space continuity", "v_proj", s, "")
                  for s in ("input", "output")]
    return specs


def _checkpoint_claims(out: ClaimsBuilder, label: str, table: pd.DataFrame) -> None:
    """The paper's projection pattern in one checkpoint (spread and n over its adjacent layer pairs).

    A projection "has continuity" by :func:`verdict_for_difference` against its space's random
    baseline; V "is low" by :func:`geocont.statistics.verdict_v_low`, on V's own numbers and the
    projections of its space whose continuity is reproduced (the V claims follow the others in
    :func:`_checkpoint_claim_specs`).
    """
    reproduced: dict[str, list[tuple[str, Estimate]]] = {"input": [], "output": []}
    for key, short, projection, space, why in _checkpoint_claim_specs(label, table):
        ours, baseline = layer_pair_estimate(table, projection, space)
        vector = vector_name(space)
        if why:
            verdict = verdict_for_difference(ours, known(baseline))
            if verdict == "reproduced":
                reproduced[space].append((projection, ours))
            out.add(key=key, claim=f"{label}: {short} ({why})",
                    quantity=f"{projection} {vector} |cos|, mean over layer pairs", paper="high", ours=ours,
                    baseline=baseline, verdict=verdict, note="spread and n over adjacent layer pairs")
            continue
        names = ", ".join(name for name, _ in reproduced[space]) or "none"
        out.add(key=key, claim=f"{label}: {short}",
                quantity=f"v_proj {vector} |cos|: within {V_LOW_MARGIN:g} of random and below the "
                         f"reproduced projections of its space",
                paper="low", ours=ours, baseline=baseline,
                verdict=verdict_v_low(ours, baseline, [e for _, e in reproduced[space]]),
                note=f"spread and n over adjacent layer pairs; projections of its space whose continuity is "
                     f"reproduced: {names}")


#: What the chapter's claims are judged on: the weights of the checkpoints (each named in its claim's key), no data.
CLAIMS_DATASET = "checkpoints"


def chapter_claims(tables: dict[str, pd.DataFrame], large_tables: dict[str, pd.DataFrame],
                   gains: dict[tuple[str, str], tuple[Estimate, Estimate]],
                   quantization: dict[str, QuantizationChange], large_status: Sequence[dict[str, str]],
                   n_trained: int) -> pd.DataFrame:
    """The chapter's claims from its measurements.

    ``tables`` / ``large_tables``: analyzer tables of the pretrained and the large checkpoints;
    ``gains``: :func:`gain_estimates`; ``quantization``: :func:`quantization_changes`;
    ``large_status``: the large checkpoints looked for; ``n_trained``: trained models quantized.
    """
    out = ClaimsBuilder(CHAPTER.name, dataset=CLAIMS_DATASET)
    for label, table in {**tables, **large_tables}.items():
        _checkpoint_claims(out, label, table)
    llama, gemma_models = llama_like(tables), gemma(tables)
    if llama and gemma_models:
        for projection in ("o_proj", "down_proj"):
            g, baseline = layer_pair_estimate(tables[gemma_models[0]], projection, "output")
            l, _ = layer_pair_estimate(tables[llama[0]], projection, "output")
            out.add(key=f"gemma-post-norm-{short_projection(projection)}-u1",
                    claim=f"(ours) Gemma-3's post-norms weaken {projection} output-space continuity",
                    quantity=f"{projection} u1: {llama[0]} minus {gemma_models[0]}",
                    paper="predicted by the mechanism (our reading)", ours=difference(l, g), baseline=baseline,
                    verdict=verdict_for_difference(l, g), note=f"{llama[0]} {l}, {gemma_models[0]} {g}")
    for (model, projection), (gained, control) in gains.items():
        out.add(key=f"{slug(model)}-{short_projection(projection)}-gain-scaled-u1",
                claim=f"(ours) {model}: {projection} writes into the stream more continuously than its gains alone "
                      "explain",
                quantity=f"{projection} u1 of diag(g) W minus the gain-only control diag(g) G",
                paper="not in the paper", ours=difference(gained, control), baseline=control.mean,
                verdict=verdict_for_difference(gained, control),
                note=f"diag(g) W {gained}, diag(g) G {control} (spread over layer pairs); baseline column: the control")
    for fmt, change in quantization.items():
        out.add(key=f"quantization-{slug(fmt)}",
                claim=f"(ours) {fmt} quantization moves v1/u1 |cos| by less than {QUANTIZATION_LIMIT:g}",
                quantity=f"largest |change| over matrices, pairs, seeds ({fmt})", paper="not in the paper",
                ours=change.worst, baseline=0.0, verdict=quantization_verdict(change.worst),
                note=f"mean change {change.typical:.4f}", n=n_trained)
    for status in large_status:
        if status["status"] != "analysed":
            out.not_tested(key=f"large-{slug(status['model'])}", claim=f"The pattern holds in {status['model']}",
                           quantity="v1/u1 |cos| per projection", paper="holds (to 70B)",
                           note="checkpoint not available here")
    return out.table()


def claims(results: Results) -> pd.DataFrame:
    """The chapter's claims table."""
    changes = quantization_changes(quantization_shifts(results.effects), results.settings.quantize)
    return chapter_claims(results.tables, results.large_tables, gain_estimates(results.gains), changes,
                          results.large_status, n_trained=len(results.trained_tables))


# --- Findings: what the chapter's computed sentences say, as values. present.py words them from the
# templates in prose.md; every comparison and "which case applies" is decided here. ---


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


def trained_seed_means(results: Results) -> pd.DataFrame:
    """:func:`continuity_overview` of each trained transformer (column ``seed``)."""
    label = f"trained ({results.settings.trained_scale})"
    return pd.concat([continuity_overview({label: table}).assign(seed=seed)
                      for seed, table in results.trained_tables.items()])


@dataclass(frozen=True)
class PredictedContinuity:
    """A projection's continuity in the space the paper predicts for it (mean ± sd over layer pairs)
    and that space's random baseline."""

    projection: str
    space: str
    estimate: Estimate
    baseline: float


@dataclass(frozen=True)
class CheckpointFinding:
    """One pretrained checkpoint as its depth figure describes it: the predicted-continuous
    projections present in it, and V in both spaces."""

    name: str
    slug: str
    description: str
    layout: str
    predicted: tuple[PredictedContinuity, ...]
    v_input: Estimate
    v_output: Estimate


def checkpoint_findings(results: Results) -> tuple[CheckpointFinding, ...]:
    """:class:`CheckpointFinding` of every pretrained checkpoint, in order."""
    findings = []
    for name, table in results.tables.items():
        predicted = tuple(PredictedContinuity(projection, space, *layer_pair_estimate(table, projection, space))
                          for projection, space, _ in PROJECTION_PREDICTIONS if projection in set(table.projection))
        findings.append(CheckpointFinding(
            name, slug(name), OFFLINE_MODELS[name].description if name in OFFLINE_MODELS else name,
            table.attrs["layout"], predicted, layer_pair_estimate(table, "v_proj", "input")[0],
            layer_pair_estimate(table, "v_proj", "output")[0]))
    return tuple(findings)


@dataclass(frozen=True)
class WritingContinuity:
    """One writing projection's output-space continuity in the Gemma-3 and the Llama-layout model."""

    projection: str
    gemma: Estimate
    llama: Estimate


@dataclass(frozen=True)
class GemmaFinding:
    """Gemma-3 (post-norms) next to a Llama-layout model. ``case``: "compared", or "missing-layout"
    where one of the two layouts is not analysed (``models``: those analysed)."""

    case: str
    models: tuple[str, ...]
    llama: tuple[str, ...] = ()
    gemma: tuple[str, ...] = ()
    writing: tuple[WritingContinuity, ...] = ()


def gemma_finding(results: Results) -> GemmaFinding:
    """:class:`GemmaFinding` of ``results`` (the first model of each layout is compared)."""
    llama, gemma_models, tables = results.llama_like, results.gemma, results.tables
    if not (llama and gemma_models):
        return GemmaFinding("missing-layout", tuple(results.settings.models))
    return GemmaFinding("compared", tuple(results.settings.models), tuple(llama), tuple(gemma_models), tuple(
        WritingContinuity(projection, layer_pair_estimate(tables[gemma_models[0]], projection, "output")[0],
                          layer_pair_estimate(tables[llama[0]], projection, "output")[0])
        for projection in ("o_proj", "down_proj")))


@dataclass(frozen=True)
class QuantizationFinding:
    """Per GGUF type its :class:`QuantizationChange`, and for scale the seed-to-seed sd of the trained
    models' layer means per projection (in its predicted space; V in the input space), where defined."""

    changes: tuple[tuple[str, QuantizationChange], ...]
    seed_spread: tuple[tuple[str, float], ...]


def quantization_finding(results: Results) -> QuantizationFinding:
    """:class:`QuantizationFinding` of ``results``."""
    changes = quantization_changes(quantization_shifts(results.effects), results.settings.quantize)
    seed_means = trained_seed_means(results)
    predicted_space = {p: s for p, s, _ in PROJECTION_PREDICTIONS} | {"v_proj": "input"}
    spread = {p: seed_means[(seed_means.projection == p) & (seed_means.space == predicted_space[p])]["mean"].std()
              for p in PROJECTIONS}
    return QuantizationFinding(tuple((fmt, changes[fmt]) for fmt in results.settings.quantize),
                               tuple((p, s) for p, s in spread.items() if not math.isnan(s)))


@dataclass(frozen=True)
class LargeModelFinding:
    """The large checkpoints looked for. ``case``: "none-looked-for", "missing" (``missing`` lists
    those not found here) or "all-analysed"."""

    case: str
    scale: str
    missing: tuple[str, ...] = ()


def large_model_finding(results: Results) -> LargeModelFinding:
    """:class:`LargeModelFinding` of ``results``."""
    missing = tuple(s["model"] for s in results.large_status if s["status"] != "analysed")
    if not results.settings.large_models:
        return LargeModelFinding("none-looked-for", results.settings.scale)
    return LargeModelFinding("missing" if missing else "all-analysed", results.settings.scale, missing)


def verdict_tally(claims: pd.DataFrame) -> tuple[tuple[str, int], ...]:
    """How many claims got each verdict, the most frequent first."""
    return tuple(claims["verdict"].value_counts().to_dict().items())


#: The verdicts :func:`verdict_finding` groups each checkpoint's claims by, in order.
VERDICT_GROUPS = ("reproduced", "partly reproduced", "not reproduced", "not tested")


@dataclass(frozen=True)
class CheckpointVerdicts:
    """One checkpoint's claims (their short names), grouped by :data:`VERDICT_GROUPS`."""

    label: str
    groups: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class GainFinding:
    """A post-norm projection's u1 continuity: of its weights, of what it writes into the stream
    (diag(g) W), of the gains alone (diag(g) G), and the random baseline."""

    model: str
    projection: str
    own: Estimate
    gained: Estimate
    control: Estimate
    baseline: float


@dataclass(frozen=True)
class VerdictFinding:
    """Per checkpoint, its claims by verdict; per post-norm projection, its :class:`GainFinding`."""

    checkpoints: tuple[CheckpointVerdicts, ...]
    gains: tuple[GainFinding, ...]


def verdict_finding(results: Results, claims: pd.DataFrame) -> VerdictFinding:
    """:class:`VerdictFinding` of ``results`` and its claims table."""
    checkpoints = []
    for label, table in {**results.tables, **results.large_tables}.items():
        verdicts = [(claim(claims, key)["verdict"], short) for key, short, *_ in _checkpoint_claim_specs(label, table)]
        checkpoints.append(CheckpointVerdicts(label, tuple(
            (v, tuple(short for got, short in verdicts if got == v)) for v in VERDICT_GROUPS)))
    gains = []
    for (model, projection), (gained, control) in gain_estimates(results.gains).items():
        own, baseline = layer_pair_estimate(results.tables[model], projection, "output")
        gains.append(GainFinding(model, projection, own, gained, control, baseline))
    return VerdictFinding(tuple(checkpoints), tuple(gains))
