"""Cross-layer basis sharing at equal parameter budgets, layer pruning, and their held-out evaluation.

**Sharing** replaces a group of adjacent layers' weights by one shared right (``input``) or left (``output``)
basis and per-layer coefficients, against each layer truncated on its own (``none``), at ranks that cost the
same (:func:`matched_ranks`). **Pruning**: :func:`without_layer`. **Evaluation**: :func:`window_nll`. Each
experiment is also a :class:`geocont.sweeps.Job`. docs/design.md ("Sharing and pruning") gives the bases, the
budgets and the jobs.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from . import cache, sweeps
from .layouts import PROJECTIONS
from .metrics import adjacent_direction_cosines, stacked_singular_triplets
from .transformer import projection_groups

SHARINGS: tuple[str, ...] = ("input", "output", "none")

#: The run cache's kind for every experiment of this module (base, sharing, pruning,
#: grouping and continuity tables, told apart by their ``experiment`` setting).
CACHE_KIND = "sharing"


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
    return [layers[i : i + group_size] for i in range(0, len(layers), group_size)]


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


def plan_sharing(
    weights: Sequence[torch.Tensor],
    projection: str,
    layers: Sequence[int],
    group_size: int,
    sharing: str,
    budget: float,
    factors: dict | None = None,
) -> tuple[SharingPlan, dict[int, torch.Tensor]]:
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
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


@torch.no_grad()
def window_nll(
    model, windows: torch.Tensor, batch_size: int = 8, progress: bool = False, description: str = "eval"
) -> torch.Tensor:
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
    is missing from the cache. A subject pickles without its loaded model, so it can be
    sent to a sweep's workers when ``load`` is picklable (a top-level function or a
    ``functools.partial`` of one, as in :func:`pretrained_subject` and
    :func:`trained_subject`). ``device`` is where the model runs (the resources a Ray job
    asks for).
    """

    label: str
    identity: dict[str, Any]
    load: Callable[[], tuple[Any, torch.Tensor]]
    window_length: int
    device: str = "cpu"
    _loaded: tuple[Any, torch.Tensor] | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_loaded": None}  # a worker loads the model itself

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

    from .pretrained import OFFLINE_MODELS, locate_model

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
            "or a Hugging Face id / local directory that you have"
        ) from error
    if not hasattr(getattr(model, "model", None), "layers"):
        raise ValueError(f"{name!r} is not a Llama-style model (no model.model.layers)")
    from .training import resolve_device

    return model.eval().to(resolve_device(device)), tokenizer


def pretrained_subject(name: str, corpus: str = "kjv", window_length: int = 128, device: str = "cpu") -> Subject:
    """A pretrained model evaluated on ``corpus``'s held-out split with its own tokenizer."""
    from .pretrained import OFFLINE_MODELS, locate_model
    from .text import check_corpus_name

    check_corpus_name(corpus)
    identity: dict[str, Any] = {"pretrained": name, "corpus": corpus}
    if name in OFFLINE_MODELS:  # fail early (with the install command) if it is missing
        path = locate_model(name)
        identity.update(file=path.name, size=path.stat().st_size)

    return Subject(name, identity, functools.partial(_pretrained_data, name, corpus, device), window_length, device)


@functools.lru_cache(maxsize=1)
def _pretrained_data(name: str, corpus: str, device: str) -> tuple[Any, torch.Tensor]:
    """A pretrained subject's model and held-out token ids (once per process)."""
    from .text import load_corpus

    model, tokenizer = _pretrained(name, device)
    return model, tokenizer(load_corpus(corpus).validation, return_tensors="pt").input_ids[0]


@functools.lru_cache(maxsize=4)
def _trained_data(config) -> tuple[Any, torch.Tensor]:
    """A trained subject's model and validation token ids (once per process)."""
    from .lm import token_splits, trained_lm

    return trained_lm(config), token_splits(config.corpus, config.shape.vocab_size)[1]


def trained_subject(config) -> Subject:
    """A trained transformer (:func:`geocont.lm.trained_lm` of ``config``) on its own validation split."""
    return Subject(
        f"ours seed {config.seed}",
        {"lm": config.to_dict()},
        functools.partial(_trained_data, config),
        config.shape.max_seq_len,
        config.device,
    )


def _evaluate(subject: Subject, n_windows: int, compute: Callable[[Any, torch.Tensor], pd.DataFrame]) -> pd.DataFrame:
    """``compute(model, windows)`` on the subject's ``n_windows`` held-out windows (loads the model)."""
    model, ids = subject.loaded()
    return compute(model, validation_windows(ids, n_windows, subject.window_length))


def _cached_nll(
    subject: Subject, settings: dict[str, Any], compute: Callable[[Any, torch.Tensor], pd.DataFrame]
) -> pd.DataFrame:
    """One cached configuration of one subject: ``compute(model, windows)`` on a miss."""
    config = {"subject": subject.identity, **settings}
    return cache.cached(CACHE_KIND, config, lambda: _evaluate(subject, settings["n_windows"], compute))


def _nll_frame(nll: torch.Tensor, **columns: Any) -> pd.DataFrame:
    return pd.DataFrame({**columns, "window": range(len(nll)), "nll": nll.numpy().astype(float)})


def n_layers_of(subject: Subject) -> int:
    """Number of decoder blocks (cached with the continuity table, so no load on a hit)."""
    return int(layer_continuity(subject)["layer"].max()) + 1


@dataclass(frozen=True)
class Experiment:
    """The argument of an experiment's sweep job: the subject and the settings (those the
    experiment does not use keep their defaults)."""

    subject: Subject
    n_windows: int = 0
    batch_size: int = 8
    projections: tuple[str, ...] = ()
    budgets: tuple[float, ...] = ()
    group_size: int = 2
    layers: tuple[int, ...] | None = None
    progress: bool = False


def _layers(layers: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if layers is None else tuple(int(l) for l in layers)


def _job(
    experiment: Experiment, config: dict[str, Any], compute: Callable[[Experiment], pd.DataFrame], what: str
) -> sweeps.Job:
    subject = experiment.subject
    return sweeps.Job(
        CACHE_KIND,
        {"subject": subject.identity, **config},
        compute,
        experiment,
        label=f"{subject.label}: {what}",
        device=subject.device,
    )


def compute_base_nll(experiment: Experiment) -> pd.DataFrame:
    """The computation of :func:`base_job`."""
    subject = experiment.subject
    return _evaluate(
        subject,
        experiment.n_windows,
        lambda model, windows: _nll_frame(
            window_nll(model, windows, experiment.batch_size, experiment.progress, f"{subject.label} base")
        ),
    )


def base_job(subject: Subject, n_windows: int, batch_size: int = 8, progress: bool = False) -> sweeps.Job:
    """The sweep job of :func:`base_nll` (its cache entry)."""
    return _job(
        Experiment(subject, n_windows, batch_size, progress=progress),
        dict(experiment="base", n_windows=n_windows, length=subject.window_length),
        compute_base_nll,
        "base",
    )


def base_nll(subject: Subject, n_windows: int, batch_size: int = 8, progress: bool = True) -> pd.DataFrame:
    """Per-window NLL of the unmodified model."""
    return sweeps.run_job(base_job(subject, n_windows, batch_size, progress))


def sharing_results(
    subject: Subject,
    projections: Sequence[str],
    budgets: Sequence[float],
    group_size: int,
    n_windows: int,
    layers: Sequence[int] | None = None,
    batch_size: int = 8,
    progress: bool = True,
) -> pd.DataFrame:
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
        settings = dict(
            experiment="sharing",
            projection=projection,
            sharing=sharing,
            budget=budget,
            group_size=group_size,
            layers=layers,
            n_windows=n_windows,
            length=subject.window_length,
        )
        compute = _sharing_nll(
            projection=projection,
            sharing=sharing,
            budget=budget,
            layers=layers,
            group_size=group_size,
            batch_size=batch_size,
            factors=factors,
        )
        frames.append(_cached_nll(subject, settings, compute))
    table = pd.concat(frames, ignore_index=True)
    table["base_nll"] = table["window"].map(base)
    table["loss_increase"] = table["nll"] - table["base_nll"]
    table["budget_used"] = table["parameters"] / table["dense_parameters"]
    return table.assign(model=subject.label)


def _sharing_nll(
    *,
    projection: str,
    sharing: str,
    budget: float,
    layers: Sequence[int],
    group_size: int,
    batch_size: int,
    factors: dict,
) -> Callable[[Any, torch.Tensor], pd.DataFrame]:
    """The computation of one sharing configuration: ``compute(model, windows)`` gives the per-window NLL with
    ``projection`` shared and compressed (:func:`plan_sharing`, memoised in ``factors``) and the plan's columns."""

    def compute(model: Any, windows: torch.Tensor) -> pd.DataFrame:
        weights = [p.data for p in projection_groups(model)[projection]]
        plan, approximations = plan_sharing(
            weights,
            projection=projection,
            layers=layers,
            group_size=group_size,
            sharing=sharing,
            budget=budget,
            factors=factors,
        )
        with replaced_weights(model, projection, approximations):
            nll = window_nll(model, windows, batch_size)
        return _nll_frame(
            nll,
            projection=projection,
            sharing=sharing,
            budget=budget,
            rank=",".join(map(str, sorted(set(plan.ranks)))),
            parameters=plan.parameters,
            dense_parameters=plan.dense_parameters,
            relative_error=plan.relative_error,
        )

    return compute


def pruning_results(
    subject: Subject, n_windows: int, layers: Sequence[int] | None = None, batch_size: int = 8, progress: bool = True
) -> pd.DataFrame:
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


def grouping_control(
    subject: Subject, projections: Sequence[str], budget: float, group_size: int, layers: Sequence[int] | None = None
) -> pd.DataFrame:
    """Reconstruction error of sharing among adjacent layers versus among distant layers.

    Same shapes, ranks and parameters; only which layers share a basis differs. If
    continuity is what makes sharing work, adjacent groups should reconstruct better.
    One row per projection x space x grouping (cached; loads the model on a miss).
    """
    return sweeps.run_job(grouping_job(subject, projections, budget, group_size, layers))


def compute_grouping(experiment: Experiment) -> pd.DataFrame:
    """The computation of :func:`grouping_job`."""
    model = experiment.subject.loaded()[0]
    (budget,), group_size = experiment.budgets, experiment.group_size
    chosen = list(experiment.layers) if experiment.layers is not None else list(range(len(model.model.layers)))
    rows = []
    for projection in experiment.projections:
        weights = [p.data for p in projection_groups(model)[projection]]
        for sharing in ("input", "output"):
            for grouping, order in (("adjacent", chosen), ("distant", distant_order(chosen, group_size))):
                plan, _ = plan_sharing(weights, projection, order, group_size, sharing, budget)
                rows.append(
                    dict(
                        projection=projection,
                        sharing=sharing,
                        grouping=grouping,
                        budget=budget,
                        parameters=plan.parameters,
                        relative_error=plan.relative_error,
                    )
                )
    return pd.DataFrame(rows)


def grouping_job(
    subject: Subject, projections: Sequence[str], budget: float, group_size: int, layers: Sequence[int] | None = None
) -> sweeps.Job:
    """The sweep job of :func:`grouping_control` (its cache entry: every projection at one budget)."""
    check_projections(projections)
    layers = _layers(layers)
    config = {
        "experiment": "grouping",
        "projections": list(projections),
        "budget": budget,
        "group_size": group_size,
        "layers": None if layers is None else list(layers),
    }
    return _job(
        Experiment(subject, projections=tuple(projections), budgets=(budget,), group_size=group_size, layers=layers),
        config,
        compute_grouping,
        "grouping",
    )


# --------------------------------------------------------------------------- layer continuity


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


def compute_continuity(experiment: Experiment) -> pd.DataFrame:
    """The computation of :func:`continuity_job`."""
    return per_layer_continuity(continuity_pairs(experiment.subject.loaded()[0]))


def continuity_job(subject: Subject) -> sweeps.Job:
    """The sweep job of :func:`layer_continuity` (its cache entry)."""
    return _job(Experiment(subject), {"experiment": "continuity"}, compute_continuity, "continuity")


def layer_continuity(subject: Subject) -> pd.DataFrame:
    """:func:`per_layer_continuity` of a subject's weights (cached; loads the model on a miss)."""
    return sweeps.run_job(continuity_job(subject))


# --------------------------------------------------------------------------- sweep jobs of many configurations


def compute_sharing(experiment: Experiment) -> pd.DataFrame:
    """The computation of :func:`sharing_job`: :func:`sharing_results` of its projection(s)."""
    return sharing_results(
        experiment.subject,
        experiment.projections,
        experiment.budgets,
        experiment.group_size,
        experiment.n_windows,
        experiment.layers,
        experiment.batch_size,
        progress=False,
    )


def sharing_job(
    subject: Subject,
    projection: str,
    budgets: Sequence[float],
    group_size: int,
    n_windows: int,
    layers: Sequence[int] | None = None,
    batch_size: int = 8,
) -> sweeps.Job:
    """One projection of :func:`sharing_results`: every scheme x budget (one entry per configuration
    as there, and this job's entry, keyed by all of them)."""
    check_projections([projection])
    budgets, layers = tuple(float(b) for b in budgets), _layers(layers)
    config = dict(
        experiment="sharing-projection",
        projection=projection,
        sharings=list(SHARINGS),
        budgets=list(budgets),
        group_size=group_size,
        layers=None if layers is None else list(layers),
        n_windows=n_windows,
        length=subject.window_length,
    )
    return _job(
        Experiment(
            subject,
            n_windows,
            batch_size,
            projections=(projection,),
            budgets=budgets,
            group_size=group_size,
            layers=layers,
        ),
        config,
        compute_sharing,
        f"sharing {projection}",
    )


def compute_pruning(experiment: Experiment) -> pd.DataFrame:
    """The computation of :func:`pruning_job`: :func:`pruning_results`."""
    return pruning_results(
        experiment.subject, experiment.n_windows, experiment.layers, experiment.batch_size, progress=False
    )


def pruning_job(
    subject: Subject, n_windows: int, layers: Sequence[int] | None = None, batch_size: int = 8
) -> sweeps.Job:
    """:func:`pruning_results` of a subject: every layer (one entry per layer as there, and this job's)."""
    layers = _layers(layers)
    config = dict(
        experiment="pruning-layers",
        layers=None if layers is None else list(layers),
        n_windows=n_windows,
        length=subject.window_length,
    )
    return _job(Experiment(subject, n_windows, batch_size, layers=layers), config, compute_pruning, "pruning")
