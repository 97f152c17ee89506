"""Chapter "pretrained checkpoints": the projection pattern in SmolLM2, Gemma-3 and MiniLM next to
our trained transformers; what quantization does to the metric; the cost of Llama-3.1-8B/70B."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch

from ..analyzer import _triplet_method, analyze, plan
from ..layouts import LAYOUTS
from ..metrics import abs_cos, random_abs_cos, top_singular_triplets
from ..plotting import figure_legend

from ..scales import apply_overrides, check_scale
from ..statistics import Estimate, estimate, verdict_for_difference
from ..tables import claim_row
from .transformer_projections import PROJECTION_PREDICTIONS, lm_chapter_settings

if TYPE_CHECKING:
    from ..config import LMRunConfig


#: The pretrained checkpoints each scale analyses, and the large ones it looks for.
PRETRAINED_OFFLINE = ("smollm2-135m", "gemma3-270m", "all-minilm-l6")


PRETRAINED_LARGE = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B")


_PRETRAINED_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(models=("smollm2-135m",), max_layers=6, trained_scale="smoke", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=(), measure_cost=False),
    "cpu": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="cpu", seeds=(0, 1, 2),
                quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
    "paper": dict(models=PRETRAINED_OFFLINE, max_layers=None, trained_scale="paper", seeds=(0,),
                  quantize=("Q8_0", "Q4_1"), large_models=PRETRAINED_LARGE, measure_cost=True),
}


@dataclass(frozen=True)
class PretrainedChapterSettings:
    """What the pretrained-continuity chapter analyses.

    ``models``: offline model names (:data:`geocont.pretrained.OFFLINE_MODELS`), local
    paths or Hugging Face ids; ``max_layers``: only the first n layers of each;
    ``trained``: the transformer chapter's trained models (variant ``silu``) at
    ``trained_scale``, one per seed; ``quantize``: GGUF types the quantization check
    compares with fp32; ``large_models``: checkpoints looked for (analysed where present);
    ``measure_cost``: time two Llama-3.1-8B-shaped layers to extrapolate the large models' cost.
    """

    scale: str
    models: tuple[str, ...]
    max_layers: int | None
    trained_scale: str
    seeds: tuple[int, ...]
    quantize: tuple[str, ...]
    large_models: tuple[str, ...]
    measure_cost: bool

    def trained_configs(self) -> list["LMRunConfig"]:
        """The transformer chapter's ``silu`` models, one per seed."""
        settings = lm_chapter_settings(self.trained_scale, variants=["silu"], seeds=list(self.seeds))
        return settings.configs()["silu"]


def pretrained_chapter_settings(scale: str, **overrides: Any) -> PretrainedChapterSettings:
    """Settings of the pretrained-continuity chapter at ``scale``, with optional overrides
    (``models``, ``max_layers``, ``trained_scale``, ``seeds``, ``quantize``, ``large_models``,
    ``measure_cost``)."""
    check_scale(scale)
    valid = set(_PRETRAINED_SCALES["cpu"])
    preset, seeds = apply_overrides(_PRETRAINED_SCALES[scale], overrides, valid)
    check_scale(preset["trained_scale"])
    if preset["max_layers"] is not None and int(preset["max_layers"]) < 2:
        raise ValueError(f"max_layers must be >= 2, got {preset['max_layers']}")
    import gguf

    known_types = {t.name for t in gguf.GGMLQuantizationType}
    bad = [q for q in preset["quantize"] if q not in known_types]
    if bad:
        raise ValueError(f"unknown GGUF type(s) {bad}; valid choices include F16, Q8_0, Q4_1, Q4_0, Q5_0")
    models = (preset["models"],) if isinstance(preset["models"], str) else tuple(preset["models"])
    large = (preset["large_models"],) if isinstance(preset["large_models"], str) else tuple(preset["large_models"])
    return PretrainedChapterSettings(scale=scale, models=models, max_layers=preset["max_layers"],
                                     trained_scale=preset["trained_scale"], seeds=seeds,
                                     quantize=tuple(preset["quantize"]), large_models=large,
                                     measure_cost=bool(preset["measure_cost"]))


_SPACE_COLUMNS = {"input": ("v1_cos", "v1_baseline"), "output": ("u1_cos", "u1_baseline")}


def layer_pair_estimate(table: pd.DataFrame, projection: str, space: str) -> tuple[Estimate, float]:
    """Mean ± sd over adjacent layer pairs of an analyzer table's v1 (input) or u1 (output)
    |cos| for one projection, and that space's random baseline."""
    column, baseline = _SPACE_COLUMNS[space]
    rows = table[table["projection"] == projection]
    return estimate(rows[column]), float(rows[baseline].iloc[0]) if len(rows) else math.nan


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


def pretrained_claims(tables: dict[str, pd.DataFrame], chapter: str = "pretrained_continuity") -> pd.DataFrame:
    """Claims of the pretrained chapter: the paper's projection pattern in each checkpoint.

    Here the spread is over adjacent layer pairs of one checkpoint (there are no seeds),
    and ``n_seeds`` holds the number of pairs. A projection "has continuity" by
    :func:`verdict_for_difference` against its space's random baseline; V "is low" when
    the lowest of the other projections of that space exceeds it by the same rule.
    """
    rows = []
    for label, table in tables.items():
        present = set(table["projection"])
        for projection, space, why in PROJECTION_PREDICTIONS:
            if projection not in present:
                continue
            ours, baseline = layer_pair_estimate(table, projection, space)
            vector = "v1" if space == "input" else "u1"
            rows.append(claim_row(chapter, f"{label}: {projection} has {space}-space continuity ({why})",
                                  f"{projection} {vector} |cos|, mean over layer pairs", "high", ours.mean, ours.std,
                                  ours.n, baseline, verdict_for_difference(ours, Estimate(baseline, 0.0, 1)),
                                  note="spread and n over adjacent layer pairs"))
        if "v_proj" in present:
            for space in ("input", "output"):
                v, baseline = layer_pair_estimate(table, "v_proj", space)
                others = [p for p, s, _ in PROJECTION_PREDICTIONS if s == space and p in present]
                lowest_name, lowest = min(((p, layer_pair_estimate(table, p, space)[0]) for p in others),
                                          key=lambda item: item[1].mean)
                vector = "v1" if space == "input" else "u1"
                rows.append(claim_row(chapter, f"{label}: V has low {space}-space continuity",
                                      f"v_proj {vector} |cos| below the lowest of {', '.join(others)}", "low",
                                      v.mean, v.std, v.n, baseline, verdict_for_difference(lowest, v),
                                      note=f"lowest other: {lowest_name} {lowest}"))
    return pd.DataFrame(rows)


def projection_colours() -> dict[str, tuple]:
    """A fixed colour per projection (q_proj ... down_proj), the same in every figure."""
    from ..layouts import PROJECTIONS

    return dict(zip(PROJECTIONS, sns.color_palette("colorblind", n_colors=len(PROJECTIONS))))


def plot_depth_continuity(table: pd.DataFrame, *, axes: Sequence[plt.Axes] | None = None, title: str = "") -> plt.Figure:
    """An analyzer table (:func:`geocont.analyzer.analyze`) across depth: v1 |cos| (left) and
    u1 |cos| (right) per adjacent layer pair, one line per projection, and each projection's
    random baseline E|cos| as a dotted line of its colour (it depends on the dimension)."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    else:
        fig = axes[0].figure
    colours = projection_colours()
    pairs = table.dropna(subset=["v1_cos"])
    projections = [p for p in colours if p in set(pairs["projection"])]
    for ax, (column, baseline, label) in zip(axes, [("v1_cos", "v1_baseline", "input space: v1 |cos|"),
                                                    ("u1_cos", "u1_baseline", "output space: u1 |cos|")]):
        for projection in projections:
            rows = pairs[pairs["projection"] == projection]
            ax.plot(rows["layer"], rows[column], marker="o", markersize=3, color=colours[projection],
                    label=projection.replace("_proj", ""))
            ax.axhline(rows[baseline].iloc[0], color=colours[projection], linestyle=":", linewidth=1, alpha=0.8)
        ax.set(xlabel="adjacent layer pair (l, l+1), labelled by l", ylabel="|cos| with the next layer",
               ylim=(0, 1.02), title=label)
    axes[0].plot([], [], color="0.35", linestyle=":", label="random baseline (per projection)")
    if title:
        fig.suptitle(title, fontsize="medium")
    figure_legend(fig, axes[0], ncol=len(projections) + 1)
    return fig


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
            plain = top_singular_triplets(W, 1, method=_triplet_method("auto", ref.shape))
            gained = top_singular_triplets(gain[:, None] * W, 1, method=_triplet_method("auto", ref.shape))
            noise = torch.randn(ref.shape, generator=torch.Generator().manual_seed(ref.layer))
            gain_only = top_singular_triplets(gain[:, None] * noise, 1, method=_triplet_method("auto", ref.shape))
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
