"""Continuity of any checkpoint, streamed one matrix at a time: :func:`analyze`.

Each projection's layers are walked in order, one weight matrix read at a time, its leading singular triplet
(:func:`geocont.metrics.top_singular_triplets`) compared with the previous layer's, so that memory stays bounded
by two weight matrices whatever the model's size. The result has one row per (projection, layer), columns
:data:`COLUMNS`; pair columns compare layer ``l`` with ``l + 1`` (:func:`geocont.metrics.pair_directions`) and
``flag`` says why one is NaN. What cannot be measured is refused before any weight is read (:func:`plan`).
docs/design.md ("The checkpoint analyzer") gives the rules.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import pandas as pd
import torch

from . import cache
from .checkpoints import TensorSource, open_source
from .layouts import PROJECTIONS, IncompleteLayers, Layout, MatrixRef, detect_layout, get_layout, missing_layers
from .metrics import (
    SPACES,
    Method,
    check_method,
    direction_flags,
    direction_gaps,
    pair_directions,
    random_abs_cos,
    random_matrix_baseline,
    spectral_alignment,
    top_singular_triplets,
)

#: Columns of the analyzer's table, in order.
COLUMNS = [
    "projection",
    "layer",
    "out_dim",
    "in_dim",
    "dtype",
    "sigma1",
    "sigma2",
    "gap",
    "v1_cos",
    "u1_cos",
    "align_input",
    "align_output",
    "v1_baseline",
    "u1_baseline",
    "align_baseline",
    "method",
    "flag",
]
COLUMN_DOCS = {
    "projection": "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj or down_proj (geocont.layouts.PROJECTIONS)",
    "layer": "layer index l; pair columns compare l with l + 1",
    "out_dim": "rows of W ([out, in]): the output-space dimension (u1 lives here)",
    "in_dim": "columns of W: the input-space dimension (v1 lives here)",
    "dtype": "how the checkpoint stores the tensor (e.g. Q4_1, BF16, F32)",
    "sigma1": "leading singular value of W",
    "sigma2": "second singular value of W (Rayleigh-Ritz estimate where the triplet is iterative)",
    "gap": "relative leading gap (sigma1 - sigma2) / sigma1 (NaN for a zero matrix); below "
    "metrics.DEGENERACY_TOL v1 and u1 are undefined",
    "v1_cos": "|cos| of the leading right singular vectors (input space) of layers l and l + 1",
    "u1_cos": "|cos| of the leading left singular vectors (output space) of layers l and l + 1",
    "align_input": "sigma^2-weighted alignment (centred Gram cosine) of layers l and l + 1, input space",
    "align_output": "the same in the output space",
    "v1_baseline": "E|cos| of random unit vectors in in_dim dimensions (metrics.random_abs_cos)",
    "u1_baseline": "E|cos| of random unit vectors in out_dim dimensions",
    "align_baseline": "mean sigma^2-alignment (input) of independent Gaussian matrices of this shape "
    "(metrics.random_matrix_baseline; NaN where the alignment is not computed)",
    "method": "how the singular triplet was computed: exact, gram-eigh, iterative, or exact-fallback",
    "flag": "why a pair column (v1_cos, u1_cos, align_*) is NaN for this pair although both layers exist, e.g. "
    "'layer 3: zero matrix', 'layer 4: tied sigma1/sigma2 (gap 3e-07 < 1e-03)', 'layer 5: overflow "
    "(sigma1 = inf)', 'different output-space dimensions (64 vs 48)' (with the alignment 'not computed: "
    "different shapes') or an alignment that is not computable (overflow); empty otherwise",
}

#: The vocabulary shared with the run table (:mod:`geocont.tables`): each analyzer column that
#: measures a run-table metric -> that metric's (metric, space, direction). The analyzer keeps its
#: own column names (a wide table, one row per projection and layer; the chapters and the cached
#: tables read them); :func:`as_run_table` puts a table into the run table's long format and names.
RUN_TABLE_METRICS: dict[str, tuple[str, str, int]] = {
    "v1_cos": ("weight_cos", "input", 1),
    "u1_cos": ("weight_cos", "output", 1),
    "align_input": ("weight_align", "input", 0),
    "align_output": ("weight_align", "output", 0),
    "gap": ("weight_gap", "", 1),
    "sigma1": ("sigma1", "", 1),
}

#: Bump when the meaning of the analyzer's table changes (old cache entries are ignored).
ANALYZER_VERSION = 3  # 3: flags for a sigma1 overflow and for adjacent layers of different shapes


#: ``alignment="auto"`` computes the sigma^2-weighted alignment only for matrices whose sides
#: are both at most this: it needs several Gram products per pair (in float64), which on a
#: 14336 x 4096 matrix cost ten times more than its leading singular triplet.
AUTO_ALIGNMENT_MAX_DIM = 2048


def _alignment_wanted(alignment: bool | str, shape: tuple[int, int]) -> bool:
    if alignment == "auto":
        return max(shape) <= AUTO_ALIGNMENT_MAX_DIM
    return bool(alignment)


def triplet_method(method: Method, shape: tuple[int, int]) -> str:
    """``auto``: the metric's own choice for matrices up to 2048 on both sides; larger ones
    (e.g. 1024 x 4096, which the metric would decompose exactly) go straight to its
    iterative method, which still falls back to exact SVD if it does not converge."""
    if method == "auto" and max(shape) > AUTO_ALIGNMENT_MAX_DIM:
        return "iterative"
    return method


class Plan(NamedTuple):
    """What :func:`plan` found: the opened source, its layout, and each projection's matrices by layer."""

    source: TensorSource
    layout: Layout
    matrices: dict[str, list[MatrixRef]]


def plan(
    source: Any, layout: str | None = None, projections: Sequence[str] | None = None, max_layers: int | None = None
) -> Plan:
    """Open ``source``, resolve its layout and list the matrices to analyse, reading no weights.

    Every error about bad input (missing or corrupt file, unknown layout or projection, a
    projection with fewer than two layers, a gap in the layer numbering of what is to be
    analysed) is raised here, before any computation. A gap outside the requested subset
    (a projection not asked for, or layers beyond ``max_layers``) is a warning naming it.
    """
    _check_max_layers(max_layers)
    src, chosen = _open_with_layout(source, layout)
    found = chosen.find(src)
    if not found:
        raise ValueError(f"layout {chosen.name!r} matches no weight matrix of {src.description}")
    _check_projections(projections, found=found, description=src.description)
    selected = list(found) if projections is None else [p for p in found if p in projections]
    matrices, unanalysed = {}, []
    for projection, layers in found.items():
        missing = missing_layers(layers)
        if projection not in selected:
            if missing:
                unanalysed.append(f"{projection} is missing layer(s) {missing} (not analysed)")
            continue
        matrices[projection] = _analysed_layers(
            projection, layers=layers, max_layers=max_layers, src=src, chosen=chosen, unanalysed=unanalysed
        )
    for note in unanalysed:
        warnings.warn(f"{src.description}: {note}", stacklevel=2)
    return Plan(src, chosen, matrices)


def _check_max_layers(max_layers: int | None) -> None:
    """Raise ValueError unless ``max_layers`` is None or an integer >= 2."""
    if max_layers is not None and (isinstance(max_layers, bool) or not isinstance(max_layers, int) or max_layers < 2):
        raise ValueError(
            f"max_layers must be an integer >= 2 (continuity compares adjacent layers), got {max_layers!r}"
        )


def _open_with_layout(source: Any, layout: str | None) -> tuple[TensorSource, Layout]:
    """The opened ``source`` and its layout: ``layout`` by name, an offline model's own, or the one detected."""
    from .pretrained import OFFLINE_MODELS

    if layout is None and isinstance(source, str) and source in OFFLINE_MODELS:
        layout = OFFLINE_MODELS[source].layout
    src = open_source(source)
    chosen = get_layout(layout) if layout is not None else detect_layout(src.names(), src.description)
    return src, chosen


def _check_projections(projections: Sequence[str] | None, *, found: dict[str, Any], description: str) -> None:
    """Raise ValueError naming the requested ``projections`` that the source does not have."""
    if projections is not None:
        unknown = [p for p in projections if p not in found]
        if unknown:
            raise ValueError(f"projection(s) {unknown} not in {description}; valid choices: {', '.join(found)}")


def _analysed_layers(
    projection: str,
    *,
    layers: dict[int, MatrixRef],
    max_layers: int | None,
    src: TensorSource,
    chosen: Layout,
    unanalysed: list[str],
) -> list[MatrixRef]:
    """The matrices of ``projection`` to analyse (its first ``max_layers``). Raises
    :class:`IncompleteLayers` for a gap among them or fewer than two; a gap beyond them is noted in
    ``unanalysed``."""
    missing = missing_layers(layers)
    inside = [layer for layer in missing if max_layers is None or layer < max_layers]
    if inside:
        raise IncompleteLayers(
            f"{src.description}: {projection} is missing layer(s) {inside} (layout {chosen.name!r}; a renamed "
            f"tensor, a truncated index or an incomplete checkpoint?); continuity across the gap is not measured"
        )
    if len(inside) < len(missing):
        unanalysed.append(f"{projection} is missing layer(s) {missing} beyond the first {max_layers} analysed")
    refs = [ref for layer, ref in layers.items() if max_layers is None or layer < max_layers]
    if len(refs) < 2:
        raise IncompleteLayers(
            f"{src.description}: {projection} has {len(refs)} layer; continuity compares adjacent layers, "
            f"so at least two are needed"
        )
    return refs


def analyze(
    source: Any,
    *,
    layout: str | None = None,
    projections: Sequence[str] | None = None,
    max_layers: int | None = None,
    alignment: bool | Literal["auto"] = "auto",
    method: Method = "auto",
    progress: bool = True,
    use_cache: bool = True,
) -> pd.DataFrame:
    """Continuity table of a checkpoint: one row per (projection, layer), columns :data:`COLUMNS`.

    ``source``: a ``.gguf`` or ``.safetensors`` file, a directory of shards, a Hugging
    Face model id or directory, an offline model name (``smollm2-135m``, ...) or a
    ``torch.nn.Module``. ``layout``: a name from :data:`geocont.layouts.LAYOUTS`
    (default: detected). ``max_layers``: analyse only the first n layers.
    ``alignment``: compute the sigma^2-weighted alignment (True / False, or ``auto``: for
    matrices with both sides at most :data:`AUTO_ALIGNMENT_MAX_DIM`; it costs several Gram
    products per pair, far more than the singular triplet on large matrices).
    ``method``: passed to :func:`~geocont.metrics.top_singular_triplets`; ``auto`` sends
    matrices with a side above :data:`AUTO_ALIGNMENT_MAX_DIM` to its iterative method
    (which has a convergence check and falls back to exact SVD). File-backed sources are cached by content,
    layout and settings (docs/design.md, "The checkpoint analyzer"); the table's ``attrs`` hold the source,
    layout, architecture and the checkpoint's parameter count.
    """
    check_method(method)
    if alignment not in (True, False, "auto"):
        raise ValueError(f"alignment must be True, False or 'auto', got {alignment!r}")
    src, chosen, matrices = plan(source, layout=layout, projections=projections, max_layers=max_layers)

    def compute() -> pd.DataFrame:
        return _stream(src, matrices, alignment=alignment, method=method, progress=progress)

    identity = src.identity()
    if identity is None or not use_cache:
        table = compute()
    else:
        settings = _cache_settings(chosen, matrices=matrices, max_layers=max_layers, alignment=alignment, method=method)
        table = cache.cached("pretrained", {"source": identity, **settings}, compute)
    table.attrs.update(_source_attrs(src, chosen))
    return table


def _cache_settings(
    chosen: Layout,
    *,
    matrices: dict[str, list[MatrixRef]],
    max_layers: int | None,
    alignment: bool | str,
    method: Method,
) -> dict[str, Any]:
    """What keys an analysis in the cache besides the source: the layout and its rules, the projections and
    the settings, and the analyzer's version."""
    return {
        "layout": chosen.name,
        "rules": [repr(r) for r in chosen.rules],
        "projections": list(matrices),
        "max_layers": max_layers,
        "alignment": alignment,
        "method": method,
        "version": ANALYZER_VERSION,
        "alignment_max_dim": AUTO_ALIGNMENT_MAX_DIM,
    }


def _source_attrs(src: TensorSource, chosen: Layout) -> dict[str, Any]:
    """The table's ``attrs``: the source, its layout (name and notes), architecture and parameter count."""
    return dict(
        source=src.description,
        layout=chosen.name,
        architecture=src.metadata.get("architecture", ""),
        layout_notes=chosen.notes,
        parameters=sum(math.prod(src.shape(n)) for n in src.names()),
    )


def _nan_reasons(before: dict[str, Any], after: dict[str, Any], columns: Sequence[str]) -> list[str]:
    """A flag for each of ``columns`` that came out NaN for the pair (``before``, ``after``) although it was
    computed, naming the pair's largest sigma1 (a huge one, e.g. from a flipped exponent bit, overflows)."""
    nan = [column for column in columns if math.isnan(before[column])]
    if not nan:
        return []
    largest = max(before["sigma1"], after["sigma1"])
    return [
        f"{', '.join(nan)} NaN: not computable for layers {before['layer']}/{after['layer']} "
        f"(largest sigma1 {largest:.3g}; a corrupt tensor or an overflow?)"
    ]


def _stream(
    src: TensorSource, matrices: dict[str, list[MatrixRef]], *, alignment, method: Method, progress: bool
) -> pd.DataFrame:
    """Walk each projection's layers in order, one matrix read at a time, each compared with the layer before it
    (the module docstring): the table."""
    from tqdm.auto import tqdm

    rows: list[dict[str, Any]] = []
    baselines: dict[tuple[int, int], float] = {}
    total = sum(len(refs) for refs in matrices.values())
    bar = tqdm(total=total, desc=f"analysing {src.description}", unit="matrix", disable=not progress)
    for projection, refs in matrices.items():
        previous: _Layer | None = None
        for ref in refs:
            bar.set_postfix_str(f"{projection} layer {ref.layer}")
            W = ref.load(src)
            triplet = _leading_triplet(src, ref, W=W, method=method)
            row = _matrix_row(src, projection, ref=ref, triplet=triplet)
            aligned = _alignment_wanted(alignment, ref.shape)
            if aligned:
                row["align_baseline"] = _alignment_baseline(ref.shape, baselines)
            current = _Layer(row=row, triplet=triplet, matrix=W, flags=direction_flags(triplet))
            if previous is not None:
                _compare_pair(previous, current, aligned)
            rows.append(row)
            previous = current if aligned else current._replace(matrix=None)
            del W, current
            bar.update()
    bar.close()
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["projection"] = pd.Categorical(table["projection"], categories=[p for p in PROJECTIONS if p in matrices])
    return table


class _Layer(NamedTuple):
    """One layer of a projection as the walk holds it: its table row, leading triplet and direction flags, and
    its matrix (kept from one layer to the next only where the alignment needs it)."""

    row: dict[str, Any]
    triplet: Any
    matrix: torch.Tensor | None
    flags: Any


def _leading_triplet(src: TensorSource, ref: MatrixRef, *, W: torch.Tensor, method: Method):
    """``W``'s leading singular triplet (:func:`geocont.metrics.top_singular_triplets`); a failure names the tensor."""
    try:
        return top_singular_triplets(W, 1, method=triplet_method(method, ref.shape))
    except ValueError as error:
        raise ValueError(f"{src.description}: tensor {ref.tensor!r}: {error}") from error


def _matrix_row(src: TensorSource, projection: str, *, ref: MatrixRef, triplet) -> dict[str, Any]:
    """The row of one matrix: its own columns filled, the pair columns NaN until the next layer is compared."""
    out_dim, in_dim = ref.shape
    dtype = getattr(src, "tensor_type", lambda name: "")(ref.tensor)
    return dict(
        projection=projection,
        layer=ref.layer,
        out_dim=out_dim,
        in_dim=in_dim,
        dtype=dtype,
        sigma1=float(triplet.s[0]),
        sigma2=triplet.s_next,
        gap=float(direction_gaps(triplet)[0]),
        v1_cos=math.nan,
        u1_cos=math.nan,
        align_input=math.nan,
        align_output=math.nan,
        v1_baseline=random_abs_cos(in_dim),
        u1_baseline=random_abs_cos(out_dim),
        align_baseline=math.nan,
        method=triplet.method,
        flag="",
    )


def _alignment_baseline(shape: tuple[int, int], baselines: dict[tuple[int, int], float]) -> float:
    """The random-matrix alignment of ``shape`` (:func:`geocont.metrics.random_matrix_baseline`), computed once per
    shape."""
    if shape not in baselines:
        baselines[shape] = random_matrix_baseline(shape, n_layers=2, n_draws=3)["align_input"][0]
    return baselines[shape]


def _compare_pair(before: _Layer, current: _Layer, aligned: bool) -> None:
    """Fill ``before``'s pair columns from the pair (``before``, ``current``) and its ``flag`` with why any is NaN."""
    pairs = {
        space: pair_directions(
            before.triplet,
            current.triplet,
            space,
            1,
            flags=(before.flags, current.flags),
            labels=(f"layer {before.row['layer']}", f"layer {current.row['layer']}"),
        )
        for space in SPACES
    }
    before.row["v1_cos"], before.row["u1_cos"] = (float(pairs[space].cos[0]) for space in SPACES)
    reasons = list(dict.fromkeys(why for pair in pairs.values() for why in pair.reasons[0]))
    reasons += _align_pair(before, current, aligned=aligned, reasons=reasons)
    reasons += _nan_reasons(
        before.row,
        current.row,
        [column for column, space in (("v1_cos", "input"), ("u1_cos", "output")) if not pairs[space].reasons[0]],
    )
    before.row["flag"] = "; ".join(reasons)


def _align_pair(before: _Layer, current: _Layer, *, aligned: bool, reasons: list[str]) -> list[str]:
    """Fill ``before``'s alignment columns where both matrices are at hand and of one shape; the flags to add (the
    ``reasons`` already found are not repeated: a zero matrix explains a NaN alignment)."""
    shapes = (before.row["out_dim"], before.row["in_dim"]), (current.row["out_dim"], current.row["in_dim"])
    if before.matrix is not None and before.matrix.shape == current.matrix.shape:
        before.row["align_input"] = spectral_alignment(before.matrix, current.matrix, "input")
        before.row["align_output"] = spectral_alignment(before.matrix, current.matrix, "output")
        if any("zero matrix" in reason for reason in reasons):
            return []
        return _nan_reasons(before.row, current.row, ("align_input", "align_output"))
    if shapes[0] != shapes[1] and (before.matrix is not None or aligned):
        return [
            f"align_input, align_output not computed: different shapes "
            f"({'x'.join(map(str, shapes[0]))} vs {'x'.join(map(str, shapes[1]))})"
        ]
    return []


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per projection: mean (and sd over layer pairs) of v1/u1 |cos| and alignment, with baselines.

    Flagged pairs (an undefined leading pair in either layer; see :data:`COLUMN_DOCS`)
    are left out of the v1/u1 means, and ``flagged`` counts them; the alignment means
    include them. ``pairs`` is the number of adjacent-layer pairs.
    """
    last = table.groupby("projection", observed=True)["layer"].transform("max")
    pairs = table[table["layer"] < last]
    grouped = pairs.groupby("projection", observed=True)
    out = pd.DataFrame(
        {
            "layers": table.groupby("projection", observed=True)["layer"].count(),
            "shape": table.groupby("projection", observed=True).apply(
                lambda g: f"{g['out_dim'].iloc[0]}×{g['in_dim'].iloc[0]}", include_groups=False
            ),
            "pairs": grouped["layer"].count(),
            "flagged": grouped["flag"].apply(lambda flags: int((flags.fillna("") != "").sum())),
            "v1_cos": grouped["v1_cos"].mean(),
            "v1_cos_sd": grouped["v1_cos"].std(),
            "v1_baseline": grouped["v1_baseline"].mean(),
            "u1_cos": grouped["u1_cos"].mean(),
            "u1_cos_sd": grouped["u1_cos"].std(),
            "u1_baseline": grouped["u1_baseline"].mean(),
            "align_input": grouped["align_input"].mean(),
            "align_output": grouped["align_output"].mean(),
            "align_baseline": grouped["align_baseline"].mean(),
        }
    )
    return out


def as_run_table(table: pd.DataFrame, step: int = 0) -> pd.DataFrame:
    """The analyzer's table in the run table's format (:data:`geocont.tables.RUN_COLUMNS`): one row
    per projection (``group``), layer and measured column, under its run-table name
    (:data:`RUN_TABLE_METRICS`), at ``step``; the pair values of the last layer (NaN) are left out."""
    from .tables import RUN_COLUMNS

    rows = []
    for column, (metric, space, direction) in RUN_TABLE_METRICS.items():
        values = table[["projection", "layer", column]].dropna(subset=[column])
        rows.append(
            pd.DataFrame(
                {
                    "step": step,
                    "group": values["projection"],
                    "layer": values["layer"],
                    "metric": metric,
                    "space": space,
                    "direction": direction,
                    "value": values[column].astype(float),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)[RUN_COLUMNS]


def format_table(table: pd.DataFrame, max_rows: int | None = None) -> str:
    """The table as aligned text for the terminal: numbers to 3 decimals, those of 1e6 or more in magnitude in
    scientific notation (a sigma1 of 1e37 is not 38 digits)."""
    with pd.option_context("display.max_rows", max_rows, "display.width", 200, "display.max_columns", None):
        return table.to_string(
            index=False, float_format=lambda x: f"{x:.3f}" if abs(x) < 1e6 else f"{x:.3e}", na_rep="–"
        )
