"""The project's two table formats, shared by every chapter.

**Run table**: tidy, one row per seed x step x group x layer x metric x space x direction, with the columns
``step``, ``group``, ``layer``, ``metric`` (:data:`METRICS`), ``space``, ``direction`` and ``value``; a sweep adds
the run's configuration columns (``condition``, ``optimizer``, ``seed``...). **Claims table**: one row per claim
checked against the paper, columns :data:`CLAIM_COLUMNS`, published by each chapter and collected by the
closing one. docs/design.md ("The run table and the claims table") says what each column holds.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

MODEL_LAYER = -1

#: metric name -> what it is (the catalogue a reader can print)
METRICS: dict[str, str] = {
    "weight_cos": "|cos| of the i-th singular vectors of adjacent weight matrices",
    "grad_cos": "|cos| of the leading singular vectors of adjacent minibatch gradients dL/dW",
    "cumgrad_cos": "|cos| of the leading singular vectors of adjacent cumulative gradients",
    "weight_align": "sigma^2-weighted (centred Gram) alignment of adjacent weight matrices",
    "weight_cumgrad_cos": "|cos| between a layer's weight v1/u1 and its cumulative gradient's",
    "rel_update": "||W(t) - W(0)||_F / ||W(0)||_F of one layer",
    "rel_update_spectral": "||W(t) - W(0)||_2 / ||W(0)||_2 of one layer (largest singular values)",
    "turn": "degrees a layer's leading singular vector, v1 (input) / u1 (output), turned since the previous snapshot",
    "co_rotation": "signed cos between the turns of adjacent layers' v1/u1 since the previous snapshot",
    "sigma1": "leading singular value of one layer",
    "sigma2": "second singular value of one layer (direction 2; recorded where n_directions > 1)",
    "subspace_cos": "mean principal-angle cosine of adjacent layers' top-k singular subspaces (direction = k; "
    "metrics.subspace_cosines; NaN where sigma_k and sigma_{k+1} are tied; random level "
    "metrics.random_subspace_cos)",
    "step_change": "||W(t) - W(t')||_F / ||W(t')||_F of one layer since the previous snapshot t'",
    "cross_cos": "|cos| of two groups' layer-l leading singular vectors (group: the cross pair's name, e.g. "
    "up~gate, the transformer's up and gate projections)",
    "grad_norm": "Frobenius norm of one layer's minibatch gradient dL/dW",
    "weight_gap": "relative gap min(s_{i-1} - s_i, s_i - s_{i+1}) / s_1 of a layer's i-th singular direction "
    "(metrics.direction_gaps); below metrics.DEGENERACY_TOL the direction is undefined and every "
    "|cos| comparing it is NaN",
    "grad_gap": "the same for the leading direction of a layer's minibatch gradient",
    "cumgrad_gap": "the same for the leading direction of a layer's cumulative gradient",
    "mean_input_cos": "|cos| between a layer's weight v1 and the probe batch's mean of the vector it multiplies "
    "(training.MLPProbe; NaN where v1 is undefined or the mean is zero)",
    "mean_input_share": "||mean input||^2 / mean ||input||^2 of a layer on the probe batch: the share of its "
    "input's second moment that lies in the mean (training.MLPProbe)",
    "mean_input_pair_cos": "|cos| between the probe batch's mean inputs of adjacent layers: the weight v1 continuity "
    "of layers whose v1 followed their input mean (training.MLPProbe)",
    "logit_change": "||logits(t) - logits(t_prev)||_F / ||logits(t_prev)||_F on the probe batch since the previous "
    "snapshot (training.MLPProbe)",
    "product_change": "the same relative change of P = prod_l (I + W_l), the hidden map of the linear residual net "
    "(residual conditions; training.MLPProbe)",
    "near_linear_share": "share of probe examples at which a layer's radial activation is within 1% of the identity, "
    "tanh(||z|| / tau) >= 0.99 (radial conditions; training.MLPProbe)",
    "pair_balance_motion": "||C_l(t) - C_l(0)||_F / size of C_l, the balance the linear residual net's per-layer "
    "symmetry conserves under gradient flow, for the adjacent pair l, l+1 (balance.pair_balances;"
    " recorded with record_balance)",
    "unit_balance_motion": "the same for the per-unit balance of the stream's diagonal rescaling symmetry "
    "(balance.unit_balance; recorded with record_balance)",
    "train_loss": "cross-entropy of the minibatch at this step",
    "test_loss": "cross-entropy on the held-out set",
    "test_acc": "accuracy on the held-out set",
    "train_set_loss": "cross-entropy on (at most) the first 4,096 training examples",
    "train_set_acc": "accuracy on (at most) the first 4,096 training examples",
    "val_loss": "language-model cross-entropy on the held-out validation windows",
    "trace_loss": "mean minibatch cross-entropy since the previous trace point (recorder.DenseTrace)",
    "trace_weight_cos": "|cos| of adjacent layers' leading singular vectors at a trace point (recorder.DenseTrace)",
    "diverged": "the step at which the loss became NaN or infinite (training stopped there); value: the last "
    "finite minibatch loss",
    "exploded": "the step k at which the training loss exploded (validity.explosion_step); the rows from k on are "
    "cut from the table claims read; value: the run's last finite loss",
}

#: The metric of the one row a diverged run ends with: ``step`` is the step whose minibatch loss was
#: NaN or infinite (training stopped there), ``value`` the last finite minibatch loss; group
#: ``model``, layer :data:`MODEL_LAYER`, no space or direction. The rows before it are the run's
#: record up to the divergence.
DIVERGED = "diverged"
#: The metric of the one row an exploded run's table ends with as claims read it (:func:`geocont.validity.cut_exploded`):
#: ``step`` is where its final instability event began, ``value`` its last finite loss; the rows from that step on
#: are cut. Readers treat it as a :data:`DIVERGED` run whose end is that step.
EXPLODED = "exploded"
#: Former metric names -> their names now; tables recorded under a former name (in a run cache)
#: are read with :func:`current_metric_names`.
METRIC_ALIASES: dict[str, str] = {"v1_turn": "turn"}

RUN_COLUMNS = ["step", "group", "layer", "metric", "space", "direction", "value"]
#: The configuration columns a sweep adds; together they identify one run.
RUN_KEYS = ["condition", "optimizer", "init_scale", "seed"]
Row = tuple[int, str, int, str, str, int, float]

#: ``key`` is the claim's stable name within its chapter and the dataset it was judged on,
#: ``<claim>@<dataset>`` (:func:`claim_key`; prose and tests look claims up by it); ``dataset``: the
#: dataset (a corpus or model for the non-MLP chapters) the claim was judged on, "" where the chapter
#: names none (then the key is the claim's name alone). ``n_seeds`` counts the independent units the estimate
#: rests on, and ``n_unit`` names them (``seeds``, ``layer pairs``, ``depth positions``, ``tallied tests``...). ``primary``: this row is the claim's verdict of
#: record, the one on its chapter's headline dataset (the closing chapter counts only these; the
#: claim's rows on other datasets stand beside it).
#: ``early_mean``, ``early_sd``, ``early_n``, ``early_step`` and ``early_verdict``: the same claim
#: judged after ``early_step`` steps (a chapter that judges it at a longer horizon), NaN/0/None/""
#: where there is none. ``headline``: one of the book's headline claims (the closing chapter summarises them first).
CLAIM_COLUMNS = [
    "chapter",
    "key",
    "dataset",
    "claim",
    "quantity",
    "paper",
    "ours_mean",
    "ours_std",
    "n_seeds",
    "n_unit",
    "baseline",
    "verdict",
    "note",
    "early_mean",
    "early_sd",
    "early_n",
    "early_step",
    "early_verdict",
    "headline",
    "primary",
]
#: Between a claim's name and its dataset in a claims-table key (:func:`claim_key`).
CLAIM_KEY_SEPARATOR = "@"
VERDICTS = ("reproduced", "partly reproduced", "inconclusive", "not reproduced", "not settled", "not tested")


def diverged_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The runs of a run or sweep table that did not train (:mod:`geocont.validity`): one row each, with the run's
    key columns (those of :data:`RUN_KEYS` it has), ``step`` (where the loss became non-finite, or where it
    exploded), ``last_loss`` (the last finite loss) and ``status`` (``diverged`` or ``exploded``). Empty (with those
    columns) where every run trained."""
    keys = [key for key in RUN_KEYS if key in table.columns]
    rows = table[table["metric"].isin([DIVERGED, EXPLODED])] if "metric" in table.columns else table.iloc[:0]
    out = rows[keys + ["step", "value", "metric"]].rename(columns={"value": "last_loss", "metric": "status"})
    out = out.reset_index(drop=True).astype({"step": int})
    out["status"] = out["status"].astype(str)
    return out


def make_row(step: int, group: str, layer: int, metric: str, space: str, direction: int, value: float) -> Row:
    """One run-table row, in :data:`RUN_COLUMNS` order."""
    return (int(step), group, int(layer), metric, space, int(direction), float(value))


def rows_to_frame(rows: list[Row]) -> pd.DataFrame:
    """A run table from recorder rows, with compact dtypes."""
    frame = pd.DataFrame(rows, columns=RUN_COLUMNS)
    for column in ("group", "metric", "space"):
        frame[column] = frame[column].astype("category")
    return frame


def current_metric_names(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every metric recorded under a former name (:data:`METRIC_ALIASES`) renamed."""
    former = set(METRIC_ALIASES) & set(table["metric"].unique())
    if not former:
        return table
    metric = table["metric"].astype(str).replace({name: METRIC_ALIASES[name] for name in former})
    return table.assign(metric=metric.astype("category") if table["metric"].dtype == "category" else metric)


def select(
    table: pd.DataFrame, metric: str, space: str = "", direction: int | None = None, **equal: Any
) -> pd.DataFrame:
    """Rows of one metric (and space, direction, and any ``column=value`` filters)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; valid choices: {', '.join(METRICS)}")
    mask = (table["metric"] == metric) & (table["space"] == space)
    if direction is not None:
        mask &= table["direction"] == direction
    for column, value in equal.items():
        mask &= table[column] == value
    return table[mask]


def _check_base_key(key: str) -> None:
    if not isinstance(key, str) or not key or not key.replace("-", "").isalnum() or key != key.lower():
        raise ValueError(f"claim key {key!r} must be lower-case letters, digits and '-'")


def _check_dataset(dataset: str) -> None:
    if not isinstance(dataset, str) or CLAIM_KEY_SEPARATOR in dataset or any(c.isspace() for c in dataset):
        raise ValueError(
            f"claim dataset {dataset!r} must be a name without {CLAIM_KEY_SEPARATOR!r} or spaces "
            "('' where the chapter names none)"
        )


def claim_key(key: str, dataset: str) -> str:
    """A claims-table key: the claim's name ``key`` (lower-case letters, digits, ``-``) and the dataset it
    was judged on, ``linear-weight-v1@mnist-10k``; the name alone where the dataset is "" (not named).
    The inverse is :func:`split_claim_key`."""
    _check_base_key(key)
    _check_dataset(dataset)
    return f"{key}{CLAIM_KEY_SEPARATOR}{dataset}" if dataset else key


def split_claim_key(full_key: str) -> tuple[str, str]:
    """``(name, dataset)`` of a claims-table key (:func:`claim_key`); dataset "" for a key without one."""
    key, _, dataset = str(full_key).partition(CLAIM_KEY_SEPARATOR)
    try:
        if claim_key(key, dataset) == full_key:
            return key, dataset
    except ValueError:
        pass
    raise ValueError(f"{full_key!r} is not a claim key (name{CLAIM_KEY_SEPARATOR}dataset, tables.claim_key)")


def claim_row(
    *,
    chapter: str,
    claim: str,
    quantity: str,
    paper: str,
    ours_mean: float,
    ours_std: float,
    n_seeds: int,
    baseline: float,
    verdict: str,
    note: str = "",
    key: str,
    dataset: str = "",
    primary: bool = True,
    early_mean: float = math.nan,
    early_sd: float = math.nan,
    early_n: int = 0,
    early_step: int | None = None,
    early_verdict: str = "",
    headline: bool = False,
    n_unit: str = "seeds",
) -> dict[str, Any]:
    """One claims-table row; ``verdict`` must be one of :data:`VERDICTS`, ``key`` a stable
    lower-case name (letters, digits, ``-``), with ``dataset`` unique within the chapter (the row's
    key is :func:`claim_key` of the two). ``primary``: the claim's verdict of record (on its chapter's
    headline dataset). ``early_*``: the same claim judged after ``early_step`` steps, where the chapter
    judges it at a longer horizon (mean, sd and n of our estimate there, and its verdict, one of
    :data:`VERDICTS`)."""
    _check_verdicts(verdict, early_verdict or verdict)
    return dict(
        chapter=chapter,
        key=claim_key(key, dataset),
        dataset=dataset,
        claim=claim,
        quantity=quantity,
        paper=paper,
        ours_mean=ours_mean,
        ours_std=ours_std,
        n_seeds=n_seeds,
        n_unit=n_unit,
        baseline=baseline,
        verdict=verdict,
        note=note,
        early_mean=early_mean,
        early_sd=early_sd,
        early_n=early_n,
        early_step=early_step,
        early_verdict=early_verdict,
        headline=bool(headline),
        primary=bool(primary),
    )


def _check_verdicts(*verdicts: str) -> None:
    """Raise ValueError for the first of ``verdicts`` that is not one of :data:`VERDICTS`."""
    for value in verdicts:
        if value not in VERDICTS:
            raise ValueError(f"unknown verdict {value!r}; valid choices: {', '.join(VERDICTS)}")
