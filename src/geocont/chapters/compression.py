"""From continuity to compression: cross-layer basis sharing and layer pruning.

Conventions follow :mod:`geocont.metrics`: a weight ``W`` is ``[out, in]``; the *input*
space is spanned by right singular vectors, the *output* space by left ones.

**Sharing.** A group of ``G`` adjacent layers' weights ``W_1 .. W_G`` is replaced by

* ``input``: one shared right basis ``V`` (``[in, k]``, orthonormal: the top-``k`` right
  singular vectors of the stacked ``[W_1; ...; W_G]``) and per-layer coefficients
  ``W_l V``, so ``W_l ~ (W_l V) V^T``; ``k (in + G out)`` parameters;
* ``output``: one shared left basis ``U`` (``[out, k]``, top-``k`` left singular vectors of
  ``[W_1, ..., W_G]``) and coefficients ``U^T W_l``; ``k (out + G in)`` parameters;
* ``none``: the reference without sharing, each layer truncated to rank ``k`` on its own;
  ``G k (out + in)`` parameters.

Each basis is the least-squares optimum for its structure. Budgets are fractions of the
group's dense parameters ``G out in``; :func:`matched_ranks` picks each space's rank so
that input- and output-space sharing cost the same (exactly where the two per-rank costs
allow it, otherwise within one rank's cost) and every count is reported.

**Pruning.** :func:`without_layer` drops one decoder block of a Llama-style model.

**Evaluation.** :func:`window_nll` is the mean next-token NLL on fixed windows of the
held-out text; the experiments cache one small table per configuration, keyed by the
model's identity and the settings, and load a model only when something is missing.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np
import matplotlib.pyplot as plt
import pandas as pd
import matplotlib.ticker as mticker
import seaborn as sns
import torch

from .. import cache
from ..layouts import PROJECTIONS
from ..metrics import adjacent_direction_cosines, stacked_singular_triplets
from ..plotting import BASELINE_STYLE, palette
from ..scales import apply_overrides, check_scale
from ..statistics import (Estimate, RankCorrelation, estimate, rank_correlation, verdict_for_difference,
                          verdict_for_interval, verdict_for_value)
from ..tables import claim_row
from ..transformer import projection_groups
from .transformer_projections import LMChapterSettings, lm_chapter_settings

if TYPE_CHECKING:
    from ..config import LMRunConfig

SHARINGS: tuple[str, ...] = ("input", "output", "none")

#: The paper's guideline: the space each projection should share its basis in (None: neither).
GUIDELINE: dict[str, str | None] = {
    "q_proj": "input", "k_proj": "input", "gate_proj": "input", "up_proj": "input",
    "o_proj": "output", "down_proj": "output", "v_proj": None,
}


def check_sharing(sharing: str) -> None:
    if sharing not in SHARINGS:
        raise ValueError(f"unknown sharing {sharing!r}; valid choices: {', '.join(SHARINGS)}")


def check_projections(projections: Sequence[str]) -> None:
    unknown = [p for p in projections if p not in PROJECTIONS]
    if unknown:
        raise ValueError(f"unknown projection(s) {unknown}; valid choices: {', '.join(PROJECTIONS)}")


# --------------------------------------------------------------------------- sharing


def rank_cost(n_out: int, n_in: int, group_size: int, sharing: str) -> int:
    """Parameters per unit of rank for one group of ``group_size`` ``[n_out, n_in]`` matrices."""
    check_sharing(sharing)
    if sharing == "input":
        return n_in + group_size * n_out
    if sharing == "output":
        return n_out + group_size * n_in
    return group_size * (n_out + n_in)


def max_rank(n_out: int, n_in: int, group_size: int, sharing: str) -> int:
    """Largest useful rank: beyond it the approximation is already exact."""
    check_sharing(sharing)
    if sharing == "input":
        return min(n_in, group_size * n_out)
    if sharing == "output":
        return min(n_out, group_size * n_in)
    return min(n_out, n_in)


def sharing_parameters(n_out: int, n_in: int, group_size: int, sharing: str, rank: int) -> int:
    """Parameters stored by one group at this rank (shared basis + per-layer coefficients)."""
    return rank * rank_cost(n_out, n_in, group_size, sharing)


def matched_ranks(n_out: int, n_in: int, group_size: int, budget: float) -> dict[str, int]:
    """Rank per sharing for a parameter ``budget`` (a fraction of the dense ``G out in``).

    Input- and output-space ranks are taken from the exact-match grid (both spaces cost
    ``m * lcm(cost_in, cost_out)``) when a point of it lies within 10% of the budget;
    otherwise each is the largest rank within the budget, so the two differ by less than
    one rank's cost. ``none`` is the largest per-layer rank within the budget. Ranks are
    at least 1 and at most :func:`max_rank`.
    """
    if not 0 < budget:
        raise ValueError(f"budget must be a positive fraction of the dense parameters, got {budget}")
    target = budget * group_size * n_out * n_in
    cost_in, cost_out = (rank_cost(n_out, n_in, group_size, s) for s in ("input", "output"))
    lcm = math.lcm(cost_in, cost_out)
    m = round(target / lcm)
    ranks = {}
    if m >= 1 and abs(m * lcm - target) <= 0.1 * target:
        ranks = {"input": m * lcm // cost_in, "output": m * lcm // cost_out}
    if not ranks or any(ranks[s] > max_rank(n_out, n_in, group_size, s) for s in ranks):
        ranks = {s: int(target // rank_cost(n_out, n_in, group_size, s)) for s in ("input", "output")}
    ranks["none"] = int(target // rank_cost(n_out, n_in, group_size, "none"))
    return {s: max(1, min(r, max_rank(n_out, n_in, group_size, s))) for s, r in ranks.items()}


def sharing_factors(weights: Sequence[torch.Tensor], sharing: str) -> tuple[torch.Tensor, ...]:
    """Full decomposition of a group that every rank's approximation slices (float64).

    ``input``: ``(stack, V)`` with ``V`` the eigenvectors of ``sum W_l^T W_l`` in descending
    order (the right singular vectors of ``[W_1; ...; W_G]``); ``output``: ``(stack, U)``
    from ``sum W_l W_l^T``; ``none``: each layer's SVD ``(U, S, Vh)``.
    """
    check_sharing(sharing)
    if not weights or len({tuple(w.shape) for w in weights}) != 1:
        raise ValueError("a sharing group needs one or more matrices of the same shape")
    stack = torch.stack([w.detach() for w in weights]).double()  # on the weights' device
    if sharing == "input":
        return stack, torch.linalg.eigh((stack.transpose(1, 2) @ stack).sum(0))[1].flip(-1)
    if sharing == "output":
        return stack, torch.linalg.eigh((stack @ stack.transpose(1, 2)).sum(0))[1].flip(-1)
    return torch.linalg.svd(stack, full_matrices=False)


def approximate(factors: tuple[torch.Tensor, ...], sharing: str, rank: int) -> torch.Tensor:
    """The ``[G, out, in]`` rank-``rank`` approximation from :func:`sharing_factors` (float64)."""
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    if sharing == "input":
        stack, basis = factors
        return stack @ basis[:, :rank] @ basis[:, :rank].T
    if sharing == "output":
        stack, basis = factors
        return basis[:, :rank] @ (basis[:, :rank].T @ stack)
    U, S, Vh = factors
    return (U[..., :rank] * S[:, None, :rank]) @ Vh[:, :rank]


def shared_approximation(weights: Sequence[torch.Tensor], sharing: str, rank: int) -> list[torch.Tensor]:
    """Rank-``rank`` approximations of a group of same-shape ``[out, in]`` matrices.

    ``input``: ``W_l V V^T`` with ``V`` the top right singular vectors of ``[W_1; ...; W_G]``
    (top eigenvectors of ``sum W_l^T W_l``); ``output``: ``U U^T W_l`` with ``U`` from
    ``[W_1, ..., W_G]``; ``none``: each ``W_l``'s own truncated SVD. Computed in float64,
    returned in the weights' dtype.
    """
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    approx = approximate(sharing_factors(weights, sharing), sharing, rank)
    return [a.to(weights[0].dtype) for a in approx]


def layer_groups(layers: Sequence[int], group_size: int) -> list[list[int]]:
    """Consecutive groups of ``group_size`` layers (the last one may be smaller)."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    layers = list(layers)
    return [layers[i:i + group_size] for i in range(0, len(layers), group_size)]


@dataclass(frozen=True)
class SharingPlan:
    """What replacing one projection's layers costs: ranks, parameter counts and error."""

    projection: str
    sharing: str
    budget: float
    ranks: tuple[int, ...]  # per group
    parameters: int  # stored parameters, all groups
    dense_parameters: int
    relative_error: float  # sqrt(sum ||W - W~||^2 / sum ||W||^2) over the replaced layers


def plan_sharing(weights: Sequence[torch.Tensor], projection: str, layers: Sequence[int], group_size: int,
                 sharing: str, budget: float, factors: dict | None = None) -> tuple[SharingPlan, dict[int, torch.Tensor]]:
    """Approximations of ``weights[l]`` for ``l`` in ``layers`` (grouped), and their plan.

    ``factors``, if given, memoises each group's decomposition across budgets (keyed by
    projection, sharing and the group's layers).
    """
    factors = {} if factors is None else factors
    approximations, ranks, parameters, dense, error, total = {}, [], 0, 0, 0.0, 0.0
    for group in layer_groups(layers, group_size):
        n_out, n_in = weights[group[0]].shape
        rank = matched_ranks(n_out, n_in, len(group), budget)[sharing]
        key = (projection, sharing, tuple(group))
        if key not in factors:
            factors[key] = sharing_factors([weights[l] for l in group], sharing)
        approx = approximate(factors[key], sharing, rank)
        for layer, a in zip(group, approx):
            original = weights[layer].detach().double()
            approximations[layer] = a.to(weights[layer].dtype)
            error += float((original - a).pow(2).sum())
            total += float(original.pow(2).sum())
        ranks.append(rank)
        parameters += sharing_parameters(n_out, n_in, len(group), sharing, rank)
        dense += len(group) * n_out * n_in
    plan = SharingPlan(projection, sharing, budget, tuple(ranks), parameters, dense, math.sqrt(error / total))
    return plan, approximations


@contextlib.contextmanager
def replaced_weights(model, projection: str, approximations: dict[int, torch.Tensor]) -> Iterator[None]:
    """Temporarily put ``approximations[layer]`` into ``projection`` of those layers."""
    params = projection_groups(model)[projection]
    saved = {layer: params[layer].data for layer in approximations}
    try:
        for layer, approx in approximations.items():
            params[layer].data = approx.to(params[layer].device, params[layer].dtype)
        yield
    finally:
        for layer, original in saved.items():
            params[layer].data = original


# --------------------------------------------------------------------------- pruning


@contextlib.contextmanager
def without_layer(model, index: int | None) -> Iterator[None]:
    """Temporarily drop decoder block ``index`` of a Llama-style model (``None``: drop nothing).

    The remaining blocks keep their weights; the model must be called with
    ``use_cache=False`` (the KV-cache layer indices are not renumbered).
    """
    layers = model.model.layers
    if index is None:
        yield
        return
    if not 0 <= index < len(layers):
        raise ValueError(f"layer {index} out of range; the model has {len(layers)} layers")
    config = model.config
    n_layers, layer_types = config.num_hidden_layers, getattr(config, "layer_types", None)
    try:
        model.model.layers = torch.nn.ModuleList([m for i, m in enumerate(layers) if i != index])
        config.num_hidden_layers = n_layers - 1
        if layer_types is not None:
            config.layer_types = [t for i, t in enumerate(layer_types) if i != index]
        yield
    finally:
        model.model.layers = layers
        config.num_hidden_layers = n_layers
        if layer_types is not None:
            config.layer_types = layer_types


# --------------------------------------------------------------------------- evaluation


def validation_windows(ids: torch.Tensor, n_windows: int, length: int) -> torch.Tensor:
    """``[n_windows, length]`` windows at evenly spaced starts of ``ids`` (as in training's eval)."""
    if len(ids) < length + 1:
        raise ValueError(f"the held-out text has {len(ids)} tokens, fewer than one window of {length}")
    starts = torch.linspace(0, len(ids) - length - 1, n_windows).long()
    return torch.stack([ids[s:s + length] for s in starts.tolist()])


@torch.no_grad()
def window_nll(model, windows: torch.Tensor, batch_size: int = 8, progress: bool = False,
               description: str = "eval") -> torch.Tensor:
    """Mean next-token NLL (nats/token) of each window, ``[n_windows]``."""
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    out = []
    for batch in tqdm(windows.split(batch_size), desc=description, disable=not progress, leave=False):
        batch = batch.to(device)
        logits = model(input_ids=batch, use_cache=False).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")
        out.append(nll.mean(1).cpu())
    return torch.cat(out)


@dataclass
class Subject:
    """A model under test: a label, its identity (the cache key), and lazy loaders.

    ``load()`` returns ``(model, validation token ids)``; it runs only when an entry
    is missing from the cache.
    """

    label: str
    identity: dict[str, Any]
    load: Callable[[], tuple[Any, torch.Tensor]]
    window_length: int
    _loaded: tuple[Any, torch.Tensor] | None = field(default=None, repr=False)

    def loaded(self) -> tuple[Any, torch.Tensor]:
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded

    def release(self) -> None:
        self._loaded = None


@functools.lru_cache(maxsize=1)
def _pretrained(name: str, device: str):
    """Model and tokenizer of a pretrained checkpoint: an offline GGUF by short name, else a HF id/path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..pretrained import OFFLINE_MODELS, locate_model

    if name in OFFLINE_MODELS:
        if OFFLINE_MODELS[name].layout != "gguf":
            raise ValueError(f"{name!r} is not a causal language model in GGUF; use a Llama-style checkpoint")
        path = locate_model(name)
        kwargs = dict(gguf_file=path.name)
        source = path.parent
    else:
        kwargs, source = {}, name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, **kwargs)
    except OSError as error:
        raise FileNotFoundError(
            f"cannot load the pretrained model {name!r} ({error}); offline short names: {', '.join(OFFLINE_MODELS)}, "
            "or a Hugging Face id / local directory that you have") from error
    if not hasattr(getattr(model, "model", None), "layers"):
        raise ValueError(f"{name!r} is not a Llama-style model (no model.model.layers)")
    from ..training import resolve_device

    return model.eval().to(resolve_device(device)), tokenizer


def pretrained_subject(name: str, corpus: str = "kjv", window_length: int = 128, device: str = "cpu") -> Subject:
    """A pretrained model evaluated on ``corpus``'s held-out split with its own tokenizer."""
    from ..text import check_corpus_name, load_corpus
    from ..pretrained import OFFLINE_MODELS, locate_model

    check_corpus_name(corpus)
    identity: dict[str, Any] = {"pretrained": name, "corpus": corpus}
    if name in OFFLINE_MODELS:  # fail early (with the install command) if it is missing
        path = locate_model(name)
        identity.update(file=path.name, size=path.stat().st_size)

    def load():
        model, tokenizer = _pretrained(name, device)
        ids = tokenizer(load_corpus(corpus).validation, return_tensors="pt").input_ids[0]
        return model, ids

    return Subject(name, identity, load, window_length)


def trained_subject(config) -> Subject:
    """A transformer of the earlier chapter (:func:`geocont.lm.trained_lm`) on its own validation split."""
    from ..lm import token_splits, trained_lm

    def load():
        return trained_lm(config), token_splits(config.corpus, config.shape.vocab_size)[1]

    return Subject(f"ours seed {config.seed}", {"lm": config.to_dict()}, load, config.shape.max_seq_len)


def _cached_nll(subject: Subject, settings: dict[str, Any], compute: Callable[[Any, torch.Tensor], pd.DataFrame]) -> pd.DataFrame:
    """One cached configuration of one subject: ``compute(model, windows)`` on a miss."""
    config = {"subject": subject.identity, **settings}

    def run():
        model, ids = subject.loaded()
        return compute(model, validation_windows(ids, settings["n_windows"], subject.window_length))

    return cache.cached("compression", config, run)


def _nll_frame(nll: torch.Tensor, **columns: Any) -> pd.DataFrame:
    return pd.DataFrame({**columns, "window": range(len(nll)), "nll": nll.numpy().astype(float)})


def n_layers_of(subject: Subject) -> int:
    """Number of decoder blocks (cached with the continuity table, so no load on a hit)."""
    return int(layer_continuity(subject)["layer"].max()) + 1


def base_nll(subject: Subject, n_windows: int, batch_size: int = 8, progress: bool = True) -> pd.DataFrame:
    """Per-window NLL of the unmodified model."""
    settings = dict(experiment="base", n_windows=n_windows, length=subject.window_length)
    return _cached_nll(subject, settings, lambda model, windows: _nll_frame(
        window_nll(model, windows, batch_size, progress, f"{subject.label} base")))


def sharing_results(subject: Subject, projections: Sequence[str], budgets: Sequence[float], group_size: int,
                    n_windows: int, layers: Sequence[int] | None = None, batch_size: int = 8,
                    progress: bool = True) -> pd.DataFrame:
    """Every projection x sharing x budget: parameters, reconstruction error and per-window NLL.

    One row per configuration x window, with ``base_nll`` and ``loss_increase`` (nats/token)
    beside ``nll``. Each projection is compressed alone, in all of ``layers`` (default all).
    """
    from tqdm.auto import tqdm

    check_projections(projections)
    layers = list(layers) if layers is not None else list(range(n_layers_of(subject)))
    base = base_nll(subject, n_windows, batch_size, progress).set_index("window")["nll"]
    jobs = [(p, s, b) for p in projections for s in SHARINGS for b in budgets]
    frames, factors = [], {}
    for projection, sharing, budget in tqdm(jobs, desc=f"{subject.label}: sharing", disable=not progress):
        if any(key[:2] != (projection, sharing) for key in factors):
            factors.clear()  # one projection x sharing's decompositions at a time (memory)
        settings = dict(experiment="sharing", projection=projection, sharing=sharing, budget=budget,
                        group_size=group_size, layers=layers, n_windows=n_windows, length=subject.window_length)

        def compute(model, windows, projection=projection, sharing=sharing, budget=budget):
            weights = [p.data for p in projection_groups(model)[projection]]
            plan, approximations = plan_sharing(weights, projection, layers, group_size, sharing, budget, factors)
            with replaced_weights(model, projection, approximations):
                nll = window_nll(model, windows, batch_size)
            return _nll_frame(nll, projection=projection, sharing=sharing, budget=budget,
                              rank=",".join(map(str, sorted(set(plan.ranks)))), parameters=plan.parameters,
                              dense_parameters=plan.dense_parameters, relative_error=plan.relative_error)

        frames.append(_cached_nll(subject, settings, compute))
    table = pd.concat(frames, ignore_index=True)
    table["base_nll"] = table["window"].map(base)
    table["loss_increase"] = table["nll"] - table["base_nll"]
    table["budget_used"] = table["parameters"] / table["dense_parameters"]
    return table.assign(model=subject.label)


def pruning_results(subject: Subject, n_windows: int, layers: Sequence[int] | None = None, batch_size: int = 8,
                    progress: bool = True) -> pd.DataFrame:
    """Loss increase of dropping each block in turn (one row per layer x window), with its continuity."""
    from tqdm.auto import tqdm

    continuity = layer_continuity(subject).set_index("layer")["continuity"]
    layers = list(layers) if layers is not None else list(continuity.index)
    base = base_nll(subject, n_windows, batch_size, progress).set_index("window")["nll"]
    frames = []
    for layer in tqdm(layers, desc=f"{subject.label}: pruning", disable=not progress):
        settings = dict(experiment="pruning", layer=layer, n_windows=n_windows, length=subject.window_length)

        def compute(model, windows, layer=layer):
            with without_layer(model, layer):
                return _nll_frame(window_nll(model, windows, batch_size), layer=layer)

        frames.append(_cached_nll(subject, settings, compute))
    table = pd.concat(frames, ignore_index=True)
    table["base_nll"] = table["window"].map(base)
    table["loss_increase"] = table["nll"] - table["base_nll"]
    table["continuity"] = table["layer"].map(continuity)
    return table.assign(model=subject.label)


def distant_order(layers: Sequence[int], group_size: int) -> list[int]:
    """``layers`` reordered so that consecutive groups hold *distant* layers: with ``n`` layers
    in ``n_g`` groups, group ``i`` is ``layers[i], layers[i + n_g], ...`` (e.g. 0 and 15 of 30)."""
    layers = list(layers)
    n_groups = -(-len(layers) // group_size)
    return [l for i in range(n_groups) for l in layers[i::n_groups]]


def grouping_control(subject: Subject, projections: Sequence[str], budget: float, group_size: int,
                     layers: Sequence[int] | None = None) -> pd.DataFrame:
    """Reconstruction error of sharing among adjacent layers versus among distant layers.

    Same shapes, ranks and parameters; only which layers share a basis differs. If
    continuity is what makes sharing work, adjacent groups should reconstruct better.
    One row per projection x space x grouping (cached; loads the model on a miss).
    """
    check_projections(projections)
    config = {"subject": subject.identity, "experiment": "grouping", "projections": list(projections),
              "budget": budget, "group_size": group_size, "layers": None if layers is None else list(layers)}

    def compute():
        model = subject.loaded()[0]
        chosen = list(layers) if layers is not None else list(range(len(model.model.layers)))
        rows = []
        for projection in projections:
            weights = [p.data for p in projection_groups(model)[projection]]
            for sharing in ("input", "output"):
                for grouping, order in (("adjacent", chosen), ("distant", distant_order(chosen, group_size))):
                    plan, _ = plan_sharing(weights, projection, order, group_size, sharing, budget)
                    rows.append(dict(projection=projection, sharing=sharing, grouping=grouping, budget=budget,
                                     parameters=plan.parameters, relative_error=plan.relative_error))
        return pd.DataFrame(rows)

    return cache.cached("compression", config, compute)


# --------------------------------------------------------------------------- continuity and correlation


def continuity_pairs(model) -> pd.DataFrame:
    """Leading-direction adjacent-layer |cos| per projection, space and pair (from geocont.metrics)."""
    rows = []
    for projection, params in projection_groups(model).items():
        triplets = stacked_singular_triplets(torch.stack([p.detach().float() for p in params]), k=1)
        for space in ("input", "output"):
            for pair, value in enumerate(adjacent_direction_cosines(triplets, space, k=1)[:, 0].tolist()):
                rows.append(dict(projection=projection, space=space, layer=pair, value=value))
    return pd.DataFrame(rows)


def per_layer_continuity(pairs: pd.DataFrame) -> pd.DataFrame:
    """A block's continuity: mean |cos| over the pairs (l-1, l) and (l, l+1) it belongs to,
    over all projections and both spaces. One row per layer, column ``continuity``."""
    pair_mean = pairs.groupby("layer")["value"].mean()
    n_layers = int(pair_mean.index.max()) + 2
    values = [np.mean([pair_mean[p] for p in (l - 1, l) if p in pair_mean.index]) for l in range(n_layers)]
    return pd.DataFrame({"layer": range(n_layers), "continuity": values})


def layer_continuity(subject: Subject) -> pd.DataFrame:
    """:func:`per_layer_continuity` of a subject's weights (cached; loads the model on a miss)."""
    config = {"subject": subject.identity, "experiment": "continuity"}
    return cache.cached("compression", config, lambda: per_layer_continuity(continuity_pairs(subject.loaded()[0])))


# --------------------------------------------------------------------------- summaries and claims


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


#: Below this total (nats/token), both spaces' costs are negligible and their ratio is noise
#: (it is the order of the paired window standard error of our small models' loss increases).
NEGLIGIBLE_LOSS = 0.001


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


def _guideline_sign(projection: str) -> int:
    """+1 where the guideline's space is the input space (or none: V is scored as input), -1 for output."""
    return -1 if GUIDELINE[projection] == "output" else 1


def sharing_claims(advantage: pd.DataFrame, model: str, spread: str, chapter: str = "compression",
                   paired: pd.DataFrame | None = None) -> list[dict]:
    """One claims row per projection: is the guideline's space the cheaper one to share?

    The quantity is the advantage of the guideline's space over the other one
    (:func:`input_advantage`, sign flipped for output-space projections; plain input-space
    advantage for V). The spread is over ``spread``: "seeds" (our trained models: per-seed
    mean over budgets) or "budgets" (a single pretrained model: one value per budget).
    ``paired`` (:func:`paired_difference`), if given, adds each budget's gap in nats with
    its window standard error to the note.
    """
    if spread not in ("seeds", "budgets"):
        raise ValueError(f"unknown spread {spread!r}; valid choices: seeds, budgets")
    zero = Estimate(0.0, 0.0, 1)
    rows = []
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
        if space is None:
            rows.append(claim_row(chapter, f"{model}: V has no clearly better sharing space",
                                  "v_proj advantage of input- over output-space sharing", "neither (no number)",
                                  value.mean, value.std, value.n, 0.0, verdict_for_value(value, 0.0, 0.10),
                                  note=details))
            continue
        other = "output" if space == "input" else "input"
        rows.append(claim_row(chapter, f"{model}: {projection} is cheaper to share in the {space} space",
                              f"{projection} advantage of {space}- over {other}-space sharing, equal parameters",
                              f"{space} space cheaper", value.mean, value.std, value.n, 0.0,
                              verdict_for_difference(value, zero, margin=0.10), note=details))
    return rows


def grouping_penalty(grouping: pd.DataFrame) -> pd.DataFrame:
    """Per seed, projection and space: how much larger the reconstruction error is with
    distant instead of adjacent groups, relative to the adjacent error (0.05 = 5% larger)."""
    wide = grouping.pivot_table(index=["seed", "projection", "sharing"], columns="grouping",
                                values="relative_error").reset_index()
    wide["penalty"] = wide["distant"] / wide["adjacent"] - 1
    return wide


def grouping_claim(grouping: pd.DataFrame, model: str, spread: str, chapter: str = "compression") -> dict:
    """Claims row: do adjacent layers share a basis better than distant ones (same parameters)?

    The value is the relative increase in reconstruction error from adjacent to distant
    groups, averaged over projections and both spaces; spread over seeds (our models) or over
    the projection x space cases (a single pretrained model). Margin: 10%.
    """
    penalty = grouping_penalty(grouping)
    value = estimate(penalty.groupby("seed")["penalty"].mean() if spread == "seeds" else penalty["penalty"])
    worse = int((penalty.groupby(["projection", "sharing"])["penalty"].mean() > 0).sum())
    cases = penalty.groupby(["projection", "sharing"]).ngroups
    return claim_row(chapter, f"{model}: continuity grounds sharing: adjacent layers share a basis better than distant ones",
                     "relative increase in reconstruction error, distant vs adjacent groups", "adjacent better (implied)",
                     value.mean, value.std, value.n, 0.0, verdict_for_difference(value, Estimate(0.0, 0.0, 1), 0.10),
                     note=f"spread over {'seeds' if spread == 'seeds' else 'projections x spaces'}; distant worse in "
                          f"{worse} of {cases} projection x space cases; margin 10%")


def pruning_claim(correlation: RankCorrelation, model: str, chapter: str = "compression", note: str = "") -> dict:
    """Claims row: is pruning a block cheaper where adjacent-layer continuity is higher?"""
    return claim_row(chapter, f"{model}: pruning costs less where continuity is higher",
                     "Spearman ρ(loss increase, block continuity)", "negative (implied)", correlation.rho,
                     (correlation.high - correlation.low) / (2 * 1.96), correlation.n, 0.0,
                     verdict_for_interval(correlation.low, correlation.high, expected_sign=-1),
                     note=f"{correlation}; ours_std = 95% bootstrap CI width / 3.92" + (f"; {note}" if note else ""))


# --------------------------------------------------------------------------- the chapter


@dataclass
class CompressionResults:
    """Everything the chapter shows: per-window tables, summaries, correlations, claims."""

    sharing: pd.DataFrame  # per configuration x window (columns model, seed, projection, sharing, budget, ...)
    pruning: pd.DataFrame  # per layer x window (columns model, seed, layer, loss_increase, continuity)
    summary: pd.DataFrame  # sharing_summary over windows, by model and seed
    advantage: pd.DataFrame  # input_advantage, by model and seed
    correlations: dict[str, RankCorrelation]
    claims: pd.DataFrame
    grouping: pd.DataFrame  # grouping_control (adjacent vs distant groups), with model and seed


#: Label of our trained transformers in the results (their seeds are in the ``seed`` column).
OURS = "ours (silu)"


def run_compression_chapter(settings, progress: bool = True) -> CompressionResults:
    """Run (or load from the cache) every experiment of the chapter for ``settings``
    (:func:`geocont.scales.compression_chapter_settings`)."""
    sharing, pruning, grouping = [], [], []
    subjects: list[tuple[Subject, int, Sequence[int] | None, Sequence[int] | None, int]] = []
    if settings.pretrained is not None:
        subjects.append((pretrained_subject(settings.pretrained, settings.lm.base.corpus, settings.window_length,
                                           settings.device), -1, settings.sharing_layers, settings.pruning_layers,
                         settings.n_windows))
    for config in settings.lm_configs():
        subjects.append((trained_subject(config), config.seed, None, None, config.eval_windows))
    middle = sorted(settings.budgets)[len(settings.budgets) // 2]
    for subject, seed, sharing_layers, pruning_layers, n_windows in subjects:
        model = OURS if seed >= 0 else subject.label
        sharing.append(sharing_results(subject, settings.projections, settings.budgets, settings.group_size, n_windows,
                                       sharing_layers, settings.batch_size, progress).assign(model=model, seed=seed))
        pruning.append(pruning_results(subject, n_windows, pruning_layers, settings.batch_size, progress)
                       .assign(model=model, seed=seed))
        grouping.append(grouping_control(subject, settings.projections, middle, settings.group_size, sharing_layers)
                        .assign(model=model, seed=seed))
        subject.release()
    sharing_table, pruning_table = pd.concat(sharing, ignore_index=True), pd.concat(pruning, ignore_index=True)
    grouping_table = pd.concat(grouping, ignore_index=True)
    summary = sharing_summary(sharing_table, by=("model", "seed"))
    advantage = input_advantage(summary, by=("model", "seed"))
    paired = paired_difference(sharing_table)
    correlations, rows = {}, []
    for model, frame in pruning_table.groupby("model", sort=False):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean()
        correlations[model] = rank_correlation(per_layer["loss_increase"], per_layer["continuity"], settings.n_boot)
        spread = "seeds" if model == OURS else "budgets"
        rows += sharing_claims(advantage[advantage["model"] == model], model, spread,
                               paired=paired[paired["model"] == model])
        pooled = f"pooled over {frame['seed'].nunique()} seeds x {frame['layer'].nunique()} blocks" if model == OURS \
            else f"{frame['layer'].nunique()} blocks"
        rows.append(pruning_claim(correlations[model], model, note=pooled))
        interior = per_layer[per_layer.index.get_level_values("layer") > 0]
        if len(interior) >= 3:
            without_first = rank_correlation(interior["loss_increase"], interior["continuity"], settings.n_boot)
            correlations[f"{model}, without block 0"] = without_first
            rows.append(pruning_claim(without_first, model + " (without block 0)",
                                      note="block 0 left out: it has one neighbour and the largest pruning cost"))
        rows.append(grouping_claim(grouping_table[grouping_table["model"] == model], model, spread))
    return CompressionResults(sharing_table, pruning_table, summary, advantage, correlations, pd.DataFrame(rows),
                              grouping_table)


#: The compression chapter: a pretrained model (SmolLM2-135M offline; a Llama-3.1-8B id at
#: ``paper``) and the transformer chapter's ``silu`` models. ``budgets`` are fractions of
#: the dense parameters of the replaced matrices. ``sharing_layers`` are the pretrained
#: model's blocks whose weights are shared (None: all); at ``cpu`` the middle 12 of 30, as
#: compressing every block without fine-tuning breaks the model (V or Gate of all 30 blocks
#: at a 50% budget: +6 nats/token). ``pruning_layers``: the blocks dropped in turn (None: all).
#: Sized from SmolLM2's measured CPU throughput (benchmarks/bench_compression.py: 160-430
#: tokens/s on the 2-core machine, depending on the other load): at ``cpu`` one evaluation is
#: 12 x 128 tokens (4-10 s), and the chapter runs 7 x 3 x 3 sharing + 30 pruning evaluations
#: of it, 10-20 minutes in all with our models.
_COMPRESSION_SCALES: dict[str, dict[str, Any]] = {
    "smoke": dict(pretrained="smollm2-135m", sharing_layers=(12, 13, 14, 15), pruning_layers=(12, 13, 14, 15),
                  budgets=(0.25,), group_size=2,
                  projections=("q_proj", "v_proj", "o_proj"),
                  n_windows=4, window_length=64, batch_size=4, seeds=(0, 1), n_boot=500, device="cpu"),
    "cpu": dict(pretrained="smollm2-135m", sharing_layers=tuple(range(9, 21)), pruning_layers=None,
                budgets=(0.25, 0.5, 0.75), group_size=2,
                n_windows=12, window_length=128, batch_size=4, seeds=(0, 1, 2), n_boot=2000, device="cpu"),
    "paper": dict(pretrained="meta-llama/Llama-3.1-8B", sharing_layers=tuple(range(10, 22)), pruning_layers=None,
                  budgets=(0.25, 0.5, 0.75),
                  group_size=2, n_windows=64, window_length=512, batch_size=4, seeds=(0, 1, 2), n_boot=2000,
                  device="auto"),
}


@dataclass(frozen=True)
class CompressionSettings:
    """What the compression chapter runs (see :data:`_COMPRESSION_SCALES`)."""

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

    def lm_configs(self) -> list["LMRunConfig"]:
        """The transformer chapter's ``silu`` model, one config per seed."""
        return self.lm.configs()["silu"]


def compression_chapter_settings(scale: str, **overrides: Any) -> CompressionSettings:
    """Settings of the compression chapter at ``scale``, with optional overrides.

    Overrides: any preset key (``pretrained`` may be "none" to skip the pretrained model, an
    offline short name, or a Hugging Face id / local directory), ``projections`` (a list of
    :data:`geocont.transformer.PROJECTIONS`) and ``seeds`` (of our trained models).
    """
    from ..layouts import PROJECTIONS

    check_scale(scale)
    valid = set(_COMPRESSION_SCALES[scale]) | {"projections"}
    preset, seeds = apply_overrides(_COMPRESSION_SCALES[scale], overrides, valid)
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
    from ..config import DEVICES

    device = preset.pop("device")
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid choices: {', '.join(DEVICES)}")
    lm = lm_chapter_settings(scale, variants=["silu"], seeds=list(seeds))
    pretrained = preset.pop("pretrained")
    pretrained = None if pretrained in (None, "none") else str(pretrained)
    return CompressionSettings(scale=scale, pretrained=pretrained, **layers,
                               budgets=budgets, projections=projections, lm=lm, device=device,
                               **{k: int(v) for k, v in preset.items()})


#: Colours of the three sharing schemes (fixed across the compression chapter's figures).
SHARING_STYLE = {
    "input": dict(label="input-space basis shared (V)", marker="o"),
    "output": dict(label="output-space basis shared (U)", marker="s"),
    "none": dict(label="no sharing (per-layer rank k)", marker="^", linestyle=":"),
}


def sharing_colours() -> dict[str, tuple]:
    colours = sns.color_palette("colorblind", 3)
    return dict(zip(SHARING_STYLE, colours))


def plot_sharing_tradeoff(summary: pd.DataFrame, projections: Sequence[str], guideline: dict[str, str | None],
                          *, title: str = "", ncols: int = 4) -> plt.Figure:
    """Per projection: loss increase (nats/token) against the parameters kept (% of dense),
    one line per sharing scheme (mean over seeds; a band of ±1 sd where there are several);
    the paper's recommended space is named in each panel's title."""
    colours = sharing_colours()
    nrows = -(-len(projections) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.1 * nrows), squeeze=False)
    for ax, projection in zip(axes.flat, projections):
        frame = summary[summary["projection"] == projection]
        for sharing, style in SHARING_STYLE.items():
            rows = frame[frame["sharing"] == sharing]
            per_budget = rows.groupby("budget").agg(x=("budget_used", "mean"), y=("loss_increase", "mean"),
                                                    sd=("loss_increase", "std")).reset_index()
            x = 100 * per_budget["x"]
            ax.plot(x, per_budget["y"], color=colours[sharing], label=style["label"], marker=style["marker"],
                    linestyle=style.get("linestyle", "-"))
            if rows["seed"].nunique() > 1:
                ax.fill_between(x, per_budget["y"] - per_budget["sd"], per_budget["y"] + per_budget["sd"],
                                color=colours[sharing], alpha=0.2)
        advice = guideline.get(projection)
        ax.set_title(f"{projection.replace('_proj', '')} (paper: {advice or 'neither'})", fontsize="medium")
        ax.set_xlabel("parameters kept (% of dense)")
        ax.set_ylabel("loss increase (nats/token)")
        ax.axhline(0, **BASELINE_STYLE)
    for ax in list(axes.flat)[len(projections):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.01))
    if title:
        fig.suptitle(title, fontweight="bold")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def plot_sharing_advice(advantage: pd.DataFrame, projections: Sequence[str], guideline: dict[str, str | None],
                        *, ax: plt.Axes | None = None, models: Sequence[str] | None = None) -> plt.Axes:
    """Which space to share, per projection and model: the input-space advantage
    ``(dL_out - dL_in) / (dL_out + dL_in)`` (> 0: share the input space), mean as a bar and
    each budget (x seed) as a dot; the paper's advice is written under each projection."""
    ax = ax or plt.gca()
    models = list(models or dict.fromkeys(advantage["model"]))
    colours = palette(models)
    width = 0.8 / len(models)
    for j, model in enumerate(models):
        for i, projection in enumerate(projections):
            values = advantage[(advantage["model"] == model) & (advantage["projection"] == projection)]["advantage"]
            x = i - 0.4 + width * (j + 0.5)
            ax.bar(x, values.mean(), width=width * 0.9, color=colours[model], alpha=0.8, label=model if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=10, zorder=3)
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(range(len(projections)),
                  [f"{p.replace('_proj', '')}\n(paper: {guideline.get(p) or 'neither'})" for p in projections])
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("input-space advantage\n(+: share input, −: share output)")
    ax.legend(fontsize="small")
    return ax


def plot_pruning(pruning: pd.DataFrame, correlations: dict, *, axes: Sequence[plt.Axes]) -> None:
    """Per model: the loss increase of dropping each block against the block's continuity."""
    for ax, (model, frame) in zip(axes, pruning.groupby("model", sort=False)):
        per_layer = frame.groupby(["seed", "layer"])[["loss_increase", "continuity"]].mean().reset_index()
        points = ax.scatter(per_layer["continuity"], per_layer["loss_increase"], c=per_layer["layer"], cmap="viridis",
                            edgecolor="black", linewidth=0.4)
        ax.figure.colorbar(points, ax=ax, label="block index")
        values = per_layer["loss_increase"].abs()
        if values.max() > 30 * max(values.median(), 1e-3):  # one catastrophic block: show the rest too
            ax.set_yscale("symlog", linthresh=float(max(values.median(), 1e-3)))
            ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
        ax.set_xlabel("block continuity (mean |cos| of v1/u1 with its neighbours)")
        ax.set_ylabel("loss increase when dropped (nats/token)")
        ax.set_title(f"{model}: {correlations[model]}", fontsize="medium")


def plot_grouping_control(grouping: pd.DataFrame, projections: Sequence[str], *, ax: plt.Axes | None = None,
                          title: str = "") -> plt.Axes:
    """How much worse sharing gets when the group holds distant instead of adjacent layers:
    the reconstruction error's increase in percent, per projection and space (bar: mean over
    seeds; dots: seeds)."""
    ax = ax or plt.gca()
    wide = grouping.pivot_table(index=["seed", "projection", "sharing"], columns="grouping",
                                values="relative_error").reset_index()
    wide["penalty"] = 100 * (wide["distant"] / wide["adjacent"] - 1)
    colours = sharing_colours()
    width = 0.38
    for offset, sharing in zip((-width / 2, width / 2), ("input", "output")):
        for i, projection in enumerate(projections):
            values = wide[(wide["projection"] == projection) & (wide["sharing"] == sharing)]["penalty"]
            x = i + offset
            ax.bar(x, values.mean(), width=width * 0.95, color=colours[sharing], alpha=0.8,
                   label=SHARING_STYLE[sharing]["label"] if i == 0 else None)
            ax.scatter([x] * len(values), values, color="black", s=10, zorder=3)
    ax.axhline(0, **BASELINE_STYLE)
    ax.set_xticks(range(len(projections)), [p.replace("_proj", "") for p in projections])
    ax.set_ylabel("reconstruction error, distant\nvs adjacent groups (% larger)")
    if title:
        ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small")
    return ax
