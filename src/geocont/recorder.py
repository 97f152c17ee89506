"""Snapshot continuity metrics of named groups of layer matrices during training.

A *group* is an ordered list of same-shaped matrices whose adjacent pairs are compared: the MLP's hidden
matrices, or one transformer projection (say ``q_proj``) across layers. Every chapter records through
:class:`ContinuityRecorder` and gets the same tidy table (:mod:`geocont.tables`). A snapshot at step ``t`` reads
the weights ``W(t)``, the minibatch gradient at ``W(t)`` and the cumulative gradient; every value that compares
an undefined singular direction is NaN (:func:`geocont.metrics.pair_directions`). docs/design.md ("What a
snapshot records") lists every metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import nn

from . import metrics
from .tables import MODEL_LAYER, Row, make_row

#: The sizes k of the top-k singular subspaces whose adjacent-layer continuity a snapshot records
#: (``subspace_cos``): those below the recorder's ``n_directions``.
SUBSPACE_KS: tuple[int, ...] = (2, 4)


def log_spaced_steps(total_steps: int, n_snapshots: int) -> list[int]:
    """Step 0, the last step, and about ``n_snapshots`` log-spaced steps in between."""
    if total_steps < 0 or n_snapshots < 2:
        raise ValueError(f"need total_steps >= 0 and n_snapshots >= 2 (got {total_steps}, {n_snapshots})")
    if total_steps == 0:
        return [0]
    grid = torch.logspace(0, torch.log10(torch.tensor(float(total_steps))), n_snapshots - 1)
    return sorted({0, total_steps, *(int(round(float(x))) for x in grid)})


def log_and_linear_steps(total_steps: int, n_log: int, n_linear: int) -> list[int]:
    """:func:`log_spaced_steps` ``(total_steps, n_log)`` together with ``n_linear`` evenly spaced
    steps ``round(k * total_steps / n_linear)``, ``k = 1 .. n_linear``; sorted, without repeats.

    Log spacing resolves the early rise but leaves the late run almost unobserved (12
    log-spaced snapshots of 9,300 steps put only two after step 2,500); the evenly spaced
    ones, ``total_steps / n_linear`` apart, resolve a late fall.
    """
    if n_linear < 1:
        raise ValueError(f"need n_linear >= 1 (got {n_linear})")
    steps = set(log_spaced_steps(total_steps, n_log))
    steps.update(round(k * total_steps / n_linear) for k in range(1, n_linear + 1))
    return sorted(steps)


def snapshot_schedule(total_steps: int, n_log: int, n_late: int = 0, extra: Iterable[int] = ()) -> list[int]:
    """The snapshot steps of a run: ``n_log`` log-spaced (:func:`log_spaced_steps`), ``n_late``
    evenly spaced (:func:`log_and_linear_steps`; 0: none) and the ``extra`` steps within the run."""
    steps = set(log_and_linear_steps(total_steps, n_log, n_late) if n_late else log_spaced_steps(total_steps, n_log))
    steps.update(s for s in extra if s <= total_steps)
    return sorted(steps)


class ContinuityRecorder:
    """Accumulates gradients every step and records continuity metrics at scheduled steps.

    Call :meth:`observe` once per step, after ``loss.backward()`` and before
    ``optimizer.step()``. ``n_directions`` singular directions are compared per weight
    pair (direction 1 is v1 / u1); gradients are compared on direction 1. With
    ``n_directions = 1`` (the cheap, fine-schedule setting) the σ²-weighted alignment, a
    whole-spectrum measure, is not recorded, nor are ``sigma2`` and ``subspace_cos``.
    ``cross_pairs``: ``{name: (group_a, group_b)}``, two groups of as many layers whose layer-l
    leading directions are compared (``cross_cos``, recorded under the group ``name``).
    """

    def __init__(
        self,
        groups: Mapping[str, Sequence[nn.Parameter]],
        schedule: Iterable[int],
        n_directions: int = 8,
        cross_pairs: Mapping[str, tuple[str, str]] | None = None,
    ):
        if not groups:
            raise ValueError("the recorder needs at least one group of matrices")
        for name, params in groups.items():
            shapes = {tuple(p.shape) for p in params}
            if len(params) < 2 or len(shapes) != 1 or len(next(iter(shapes))) != 2:
                raise ValueError(
                    f"group {name!r} must hold at least two 2-D matrices of one shape, got {sorted(shapes)}"
                )
        self.groups = {name: list(params) for name, params in groups.items()}
        self.cross_pairs = {name: tuple(pair) for name, pair in (cross_pairs or {}).items()}
        self._cross_spaces = {name: self._shared_spaces(name, pair) for name, pair in self.cross_pairs.items()}
        self.schedule = frozenset(schedule)
        self.n_directions = n_directions
        self.rows: list[Row] = []
        self._initial = {name: self._stack(params) for name, params in self.groups.items()}
        self._cumulative = {name: torch.zeros_like(stack) for name, stack in self._initial.items()}
        self._cumulative_views = {name: list(stack.unbind(0)) for name, stack in self._cumulative.items()}
        # group -> the previous snapshot's weight triplets and their direction flags
        self._previous_weights: dict[str, tuple[list[metrics.SingularTriplets], list[list[str]]]] = {}
        self._previous_stack: dict[str, torch.Tensor] = {}  # group -> the previous snapshot's weights
        self._warm_starts: dict[str, dict[str, torch.Tensor]] = {}  # group -> quantity -> [L, in, 1]
        self._initial_sigma1 = {
            name: torch.stack([t.s[0] for t in metrics.stacked_singular_triplets(stack, 1)])
            for name, stack in self._initial.items()
        }

    def _shared_spaces(self, name: str, pair: tuple[str, str]) -> tuple[str, ...]:
        """The spaces in which a cross pair's two groups have one dimension (validating the pair)."""
        valid = ", ".join(self.groups)
        if len(pair) != 2 or any(group not in self.groups for group in pair):
            raise ValueError(f"cross pair {name!r} must name two of the groups {valid}; got {pair}")
        if name in self.groups:
            raise ValueError(f"cross pair {name!r} has a group's name; its rows need a name of their own")
        a, b = (self.groups[group] for group in pair)
        if len(a) != len(b):
            raise ValueError(f"cross pair {name!r}: {pair[0]!r} has {len(a)} layers, {pair[1]!r} {len(b)}")
        shape_a, shape_b = a[0].shape, b[0].shape  # [out, in]
        spaces = tuple(space for space in metrics.SPACES if shape_a[space == "input"] == shape_b[space == "input"])
        if not spaces:
            raise ValueError(f"cross pair {name!r}: shapes {tuple(shape_a)} and {tuple(shape_b)} share no space")
        return spaces

    @staticmethod
    def _stack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack([t.detach() for t in tensors]).clone()

    def observe(self, step: int) -> bool:
        """Add this step's gradients to the running sums; snapshot if ``step`` is scheduled."""
        for name, params in self.groups.items():
            if any(p.grad is None for p in params):
                raise RuntimeError(f"group {name!r} has parameters without gradients at step {step}")
            torch._foreach_add_(self._cumulative_views[name], [p.grad.detach() for p in params])
        if step not in self.schedule:
            return False
        current = {name: self._snapshot(step, name, params) for name, params in self.groups.items()}
        self._record_cross_pairs(step, current)
        return True

    def record(self, step: int, metric: str, value: float, *, group: str = "model", layer: int = MODEL_LAYER) -> None:
        """Add a scalar that is not a continuity metric (loss, accuracy) to the table."""
        self.rows.append(make_row(step, group, layer, metric, "", 0, value))

    def _record_rotation(
        self,
        step: int,
        name: str,
        space: str,
        triplets: Sequence[metrics.SingularTriplets],
        flags: Sequence[Sequence[str]],
    ) -> None:
        """Turns of each layer's leading direction since the previous snapshot (NaN where the pair of
        snapshots does not define it, :func:`geocont.metrics.pair_directions`) and co-rotation of
        adjacent layers (NaN if either's turn is)."""
        if name not in self._previous_weights:
            return
        before, before_flags = self._previous_weights[name]
        both = torch.tensor(
            [
                not metrics.pair_directions(b, t, space, 1, flags=(bf, f)).reasons[0]
                for b, t, bf, f in zip(before, triplets, before_flags, flags)
            ]
        )
        previous = torch.stack([t.vectors(space)[:, 0] for t in before])
        leading = torch.stack([t.vectors(space)[:, 0] for t in triplets])
        turns = torch.where(both, metrics.direction_turn(previous, leading), torch.nan)
        co_rotation = torch.where(both[:-1] & both[1:], metrics.co_rotation(previous, leading), torch.nan)
        for layer, value in enumerate(turns.tolist()):
            self.rows.append(make_row(step, name, layer, "turn", space, 1, value))
        for layer, value in enumerate(co_rotation.tolist()):
            self.rows.append(make_row(step, name, layer, "co_rotation", space, 1, value))

    def _record_cross_pairs(
        self, step: int, current: Mapping[str, tuple[Sequence[metrics.SingularTriplets], Sequence[Sequence[str]]]]
    ) -> None:
        """|cos| of each cross pair's layer-l leading directions (:func:`geocont.metrics.pair_directions`)."""
        for name, (a, b) in self.cross_pairs.items():
            (triplets_a, flags_a), (triplets_b, flags_b) = current[a], current[b]
            for space in self._cross_spaces[name]:
                for layer, (ta, tb, fa, fb) in enumerate(zip(triplets_a, triplets_b, flags_a, flags_b)):
                    pair = metrics.pair_directions(ta, tb, space, 1, labels=(a, b), flags=(fa, fb))
                    self.rows.append(make_row(step, name, layer, "cross_cos", space, 1, float(pair.cos[0])))

    def _record_subspaces(self, step: int, name: str, triplets: Sequence[metrics.SingularTriplets]) -> None:
        """Adjacent layers' top-k subspace continuity for each k of :data:`SUBSPACE_KS` below ``n_directions``."""
        ks = [k for k in SUBSPACE_KS if k < triplets[0].s.numel()]  # numel: n_directions, or a smaller side
        if not ks:
            return
        for space in metrics.SPACES:
            for layer, values in enumerate(metrics.subspace_cosines(triplets, space, ks).tolist()):
                for k, value in zip(ks, values):
                    self.rows.append(make_row(step, name, layer, "subspace_cos", space, k, value))

    def _record_motion(self, step: int, name: str, weights: torch.Tensor) -> None:
        """``||W(t) - W(t')||_F / ||W(t')||_F`` since the previous snapshot ``t'`` (NaN where ``W(t') = 0``)."""
        previous = self._previous_stack.get(name)
        self._previous_stack[name] = weights
        if previous is None:
            return
        change = metrics.relative_update(weights, previous)
        change = torch.where(previous.flatten(1).any(dim=1), change, torch.nan)
        for layer, value in enumerate(change.tolist()):
            self.rows.append(make_row(step, name, layer, "step_change", "", 0, value))

    def _snapshot(
        self, step: int, name: str, params: Sequence[nn.Parameter]
    ) -> tuple[list[metrics.SingularTriplets], list[list[str]]]:
        """Record one group's rows; return its weights' triplets and their direction flags."""
        weights = self._stack(params)
        gradients = self._stack([p.grad for p in params])
        cumulative = self._cumulative[name]
        k = self.n_directions
        # Iterative solvers start from the previous snapshot's vectors (a warm start: the
        # matrices change little between snapshots); k = 1 (the timeline's fine schedule)
        # computes the weights' leading pair iteratively too, exact where it does not converge.
        warm = self._warm_starts.setdefault(name, {})
        w_triplets = metrics.stacked_singular_triplets(
            weights, k, method="iterative" if k == 1 else "gram-eigh", start=warm.get("weights")
        )
        g_triplets = metrics.stacked_singular_triplets(gradients, 1, method="iterative", start=warm.get("grads"))
        c_triplets = metrics.stacked_singular_triplets(cumulative, 1, method="iterative", start=warm.get("cumulative"))
        for key, triplets in (("weights", w_triplets), ("grads", g_triplets), ("cumulative", c_triplets)):
            warm[key] = torch.stack([t.v[:, :1] for t in triplets])
        w_flags = [metrics.direction_flags(t) for t in w_triplets]
        c_flags = [metrics.direction_flags(t) for t in c_triplets]
        self._record_gaps(step, name, weights=w_triplets, grads=g_triplets, cumulative=c_triplets)
        for space in metrics.SPACES:
            self._record_space(
                step,
                name,
                space=space,
                weights=weights,
                weighted=(w_triplets, w_flags),
                g_triplets=g_triplets,
                cumulative=(c_triplets, c_flags),
            )
        self._previous_weights[name] = w_triplets, w_flags
        self._record_norms_and_updates(step, name, weights=weights, gradients=gradients, w_triplets=w_triplets)
        self._record_subspaces(step, name, w_triplets)
        self._record_motion(step, name, weights)
        return w_triplets, w_flags

    def _record_gaps(self, step: int, name: str, *, weights, grads, cumulative) -> None:
        """Each direction's spectral gap of the weights', the gradients' and the cumulative gradient's triplets."""
        for metric, triplets in (("weight_gap", weights), ("grad_gap", grads), ("cumgrad_gap", cumulative)):
            for layer, t in enumerate(triplets):
                for direction, gap in enumerate(metrics.direction_gaps(t).tolist(), start=1):
                    self.rows.append(make_row(step, name, layer, metric, "", direction, gap))

    def _record_space(self, step: int, name: str, *, space: str, weights, weighted, g_triplets, cumulative) -> None:
        """In one space: adjacent layers' |cos| of the weights, gradients and cumulative gradient, the whole-spectrum
        alignment, the weights against the cumulative gradient, and the rotation since the last snapshot."""
        (w_triplets, w_flags), (c_triplets, c_flags) = weighted, cumulative
        pair_values = {
            "weight_cos": metrics.adjacent_direction_cosines(w_triplets, space),
            "grad_cos": metrics.adjacent_direction_cosines(g_triplets, space),
            "cumgrad_cos": metrics.adjacent_direction_cosines(c_triplets, space),
        }
        for metric, values in pair_values.items():
            for layer, per_direction in enumerate(values.tolist()):
                for direction, value in enumerate(per_direction, start=1):
                    self.rows.append(make_row(step, name, layer, metric, space, direction, value))
        if self.n_directions > 1:  # a whole-spectrum measure: recorded with the spectrum, not in leading-pair-only runs
            for layer, value in enumerate(metrics.adjacent_spectral_alignment(weights, space).tolist()):
                self.rows.append(make_row(step, name, layer, "weight_align", space, 0, value))
        for layer, (w, c) in enumerate(zip(w_triplets, c_triplets)):
            value = float(metrics.pair_directions(w, c, space, 1, flags=(w_flags[layer], c_flags[layer])).cos[0])
            self.rows.append(make_row(step, name, layer, "weight_cumgrad_cos", space, 1, value))
        self._record_rotation(step, name, space, w_triplets, w_flags)

    def _record_norms_and_updates(self, step: int, name: str, *, weights, gradients, w_triplets) -> None:
        """Each layer's gradient norm, its update since initialisation (Frobenius and spectral, relative), and its
        two largest singular values."""
        warm = self._warm_starts[name]
        for layer, value in enumerate(gradients.flatten(1).norm(dim=1).tolist()):
            self.rows.append(make_row(step, name, layer, "grad_norm", "", 0, value))
        updates = metrics.relative_update(weights, self._initial[name]).tolist()
        update_norms, warm["update"] = metrics.spectral_norms(weights - self._initial[name], start=warm.get("update"))
        spectral_updates = (update_norms / self._initial_sigma1[name]).tolist()
        for layer, (update, spectral, triplets) in enumerate(zip(updates, spectral_updates, w_triplets)):
            self.rows.append(make_row(step, name, layer, "rel_update", "", 0, update))
            self.rows.append(make_row(step, name, layer, "rel_update_spectral", "", 0, spectral))
            self.rows.append(make_row(step, name, layer, "sigma1", "", 1, float(triplets.s[0])))
            if triplets.s.numel() > 1:
                self.rows.append(make_row(step, name, layer, "sigma2", "", 2, float(triplets.s[1])))


#: The trace records continuity at every this-many-th loss trace point (continuity costs ~10^4 times a loss).
TRACE_CONTINUITY_STRIDE = 5


class DenseTrace:
    """A cheap, dense record of training: every ``every`` steps, the mean minibatch loss since the
    previous trace point (``trace_loss``; at step 0 the first loss), and at every
    :data:`TRACE_CONTINUITY_STRIDE`-th trace point the |cos| of adjacent layers' leading singular
    vectors in both spaces (``trace_weight_cos``, direction 1, one row per pair).

    Snapshots (:class:`ContinuityRecorder`) are tens per run; a trace point every few dozen steps
    resolves loss spikes and what continuity does across each one. The leading pair is computed
    iteratively, warm-started from the previous trace point (about 0.1 s for 16 matrices of
    256 x 256 on one busy core, hence the stride); a direction whose gap is below
    :data:`geocont.metrics.DEGENERACY_TOL` gives NaN. Call :meth:`observe` once per step, with that
    step's (finite) loss.
    """

    def __init__(self, groups: Mapping[str, Sequence[nn.Parameter]], every: int):
        if every < 1:
            raise ValueError(f"the trace needs every >= 1, got {every}")
        self.groups = {name: list(params) for name, params in groups.items()}
        self.every = every
        self.rows: list[Row] = []
        self._loss_sum = 0.0
        self._losses = 0
        self._warm: dict[str, torch.Tensor] = {}

    def observe(self, step: int, loss: float) -> None:
        self._loss_sum += loss
        self._losses += 1
        if step % self.every:
            return
        self.rows.append(make_row(step, "model", MODEL_LAYER, "trace_loss", "", 0, self._loss_sum / self._losses))
        self._loss_sum, self._losses = 0.0, 0
        if step % (self.every * TRACE_CONTINUITY_STRIDE):
            return
        for name, params in self.groups.items():
            weights = torch.stack([p.detach() for p in params])
            triplets = metrics.stacked_singular_triplets(weights, 1, method="iterative", start=self._warm.get(name))
            self._warm[name] = torch.stack([t.v[:, :1] for t in triplets])
            for space in metrics.SPACES:
                for layer, (value,) in enumerate(metrics.adjacent_direction_cosines(triplets, space).tolist()):
                    self.rows.append(make_row(step, name, layer, "trace_weight_cos", space, 1, value))
