"""One training loop with recording, and cached MLP runs and sweeps built on it."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from . import balance, metrics, sweeps
from .config import MLPRunConfig, OptimizerConfig, check_precision
from .mlp import ResidualMLP, forward_trace, near_linear_share
from .optimizers import FrameAdam, random_frames
from .recorder import ContinuityRecorder, DenseTrace, snapshot_schedule
from .tables import make_row, rows_to_frame

if TYPE_CHECKING:  # the datasets need the `mlp` extra; the training loop (language models too) does not
    from .data import ImageData


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and the configuration."""


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA where available; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was requested but no CUDA GPU is available; use 'cpu' or 'auto'")
    return torch.device(name)


def fused_supported(params: Sequence[torch.Tensor]) -> bool:
    """Whether torch's fused optimizer kernels take ``params``: floating-point tensors, all on one
    CPU or CUDA device."""
    devices = {p.device.type for p in params}
    return len(devices) == 1 and devices <= {"cpu", "cuda"} and all(p.is_floating_point() for p in params)


def make_optimizer(
    params: Iterable[nn.Parameter],
    config: OptimizerConfig,
    framed: Sequence[nn.Parameter] = (),
    frame_seed: int = 0,
    fused: bool | None = None,
) -> torch.optim.Optimizer:
    """Adam, AdamW (decoupled weight decay), SGD (optional momentum) or ``adam-rotated`` from an
    :class:`OptimizerConfig`.

    ``adam-rotated`` puts each matrix of ``framed`` (among ``params``) in its own random
    orthogonal frame, drawn from ``frame_seed`` (:func:`geocont.optimizers.random_frames`);
    the others ignore ``framed`` and ``frame_seed``. ``fused`` (default: wherever
    :func:`fused_supported`) updates all parameters in one fused kernel; ``False`` gives torch's
    default implementation (a loop over tensors on the CPU). The two agree to float rounding per
    step (tests/test_training_speed.py), which a long run amplifies, so a run's config says which
    it used (``fused_optimizer``).
    """
    params = list(params)
    if fused is None:
        fused = fused_supported(params)
    implementation = dict(fused=True) if fused else {}
    if config.name == "adam-rotated":
        if not framed:
            raise ValueError("adam-rotated needs the matrices to put in random frames (framed=...)")
        return FrameAdam(
            params,
            random_frames(framed, frame_seed),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.eps,
            weight_decay=config.weight_decay,
            fused=fused,
        )
    if config.name in ("adam", "adamw"):
        adam = torch.optim.AdamW if config.name == "adamw" else torch.optim.Adam
        return adam(
            params,
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            eps=config.eps,
            weight_decay=config.weight_decay,
            **implementation,
        )
    return torch.optim.SGD(
        params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay, **implementation
    )


def precision_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Where a forward pass runs in ``precision`` (:data:`geocont.config.PRECISIONS`): ``fp32`` as
    is; ``bf16-autocast`` under ``torch.autocast`` in bfloat16, so that matrix products run in
    bf16 while the weights, their gradients (backward runs outside the context) and the optimizer
    state stay float32, and the loss is computed in float32 (autocast's rule for cross-entropy)."""
    check_precision(precision)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def cosine_factor(total_steps: int) -> Callable[[int], float]:
    """The cosine schedule's learning-rate multiplier before update ``step + 1``: 1 at the first
    update, 0 at the last step (``0.5 * (1 + cos(pi * step / total_steps))``)."""
    return lambda step: 0.5 * (1.0 + math.cos(math.pi * step / max(1, total_steps)))


def step_factor(total_steps: int, factor: float, at: int | None = None) -> Callable[[int], float]:
    """The step schedule's learning-rate multiplier before update ``step + 1``: 1 for the updates
    after steps ``0 .. at - 1``, ``factor`` for those after ``at`` on (``at`` None: ``total_steps // 2``)."""
    switch = total_steps // 2 if at is None else at
    return lambda step: 1.0 if step < switch else factor


def lr_factor_for(config: MLPRunConfig, total_steps: int) -> Callable[[int], float] | None:
    """The learning-rate multiplier of ``config.lr_schedule`` over ``total_steps`` (None: constant)."""
    if config.lr_schedule == "cosine":
        return cosine_factor(total_steps)
    if config.lr_schedule == "step":
        return step_factor(total_steps, config.lr_step_factor, config.lr_switch_step)
    return None


def flush_denormal_enabled() -> bool:
    """Whether this thread flushes subnormal floats to zero (``torch.set_flush_denormal``, which has no
    getter): probed by a product whose float32 result, 1e-40, is subnormal, hence 0 when flushed."""
    return bool((torch.tensor([1e-30], dtype=torch.float32) * 1e-10).item() == 0)


def train_with_recording(
    *,
    compute_loss: Callable[[int], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    recorder: ContinuityRecorder | None,
    total_steps: int,
    evaluate: Callable[[], dict[str, float]] | None = None,
    description: str = "train",
    progress: bool = True,
    lr_factor: Callable[[int], float] | None = None,
    clip_norm: float | None = None,
    trace: DenseTrace | None = None,
    probe: Callable[[int], None] | None = None,
) -> int | None:
    """The one training loop: steps ``0..total_steps``, recording at scheduled steps.

    At every step the minibatch loss is computed and back-propagated and the recorder observes the gradients;
    an update follows at every step but the last, so the final snapshot sees the trained weights with their
    gradient. ``evaluate`` runs at snapshot steps. ``recorder=None`` trains without any recording.
    ``lr_factor(step)`` multiplies every group's initial learning rate before the update that follows ``step``;
    ``clip_norm`` clips the global gradient norm before each update (after the recorder saw the raw gradients);
    ``trace`` sees every step's loss; ``probe(step)`` runs at every snapshot step, before the update, and must not
    change the model, its gradients or any random state. A non-finite loss or gradient ends training there as an
    outcome (one ``diverged`` row; the step is returned, else None); without a recorder it raises
    :class:`TrainingDiverged`. Subnormal floats are flushed to zero while it trains (the caller's setting is
    restored). docs/design.md ("The training loop") gives the details.
    """
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    initial_lrs = [group["lr"] for group in optimizer.param_groups]
    last_finite = math.nan
    flushing = flush_denormal_enabled()
    torch.set_flush_denormal(True)
    try:
        for step in tqdm(range(total_steps + 1), desc=description, leave=False, disable=not progress):
            optimizer.zero_grad(set_to_none=True)
            loss = compute_loss(step)
            value = float(loss.detach())
            if not math.isfinite(value):
                if recorder is None:
                    raise TrainingDiverged(f"{description}: loss became {value} at step {step}")
                recorder.record(step, "diverged", last_finite)
                return step
            loss.backward()
            if recorder is not None and not math.isfinite(
                float(torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None]))
            ):
                recorder.record(step, "diverged", value)  # a finite loss whose gradient overflowed
                return step
            last_finite = value
            if trace is not None:
                trace.observe(step, value)
            if recorder is not None and recorder.observe(step):
                recorder.record(step, "train_loss", value)
                for metric, metric_value in (evaluate() if evaluate else {}).items():
                    recorder.record(step, metric, metric_value)
                if probe is not None:
                    probe(step)
            if step < total_steps:
                if clip_norm is not None:
                    torch.nn.utils.clip_grad_norm_(parameters, clip_norm)
                if lr_factor is not None:
                    for group, initial in zip(optimizer.param_groups, initial_lrs):
                        group["lr"] = initial * lr_factor(step)
                optimizer.step()
        return None
    finally:
        torch.set_flush_denormal(flushing)


#: Snapshots also evaluate the loss and accuracy on (at most) this many training examples:
#: the minibatch ``train_loss`` is too noisy to say when the training set is memorised.
TRAIN_SET_EVAL = 4096


@torch.no_grad()
def evaluate_classifier(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 2048, prefix: str = "test"
) -> dict[str, float]:
    """Cross-entropy and accuracy on ``(x, y)``, as ``{prefix}_loss`` and ``{prefix}_acc``."""
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    for start in range(0, len(y), batch_size):
        logits = model(x[start : start + batch_size])
        total_loss += float(nn.functional.cross_entropy(logits, y[start : start + batch_size], reduction="sum"))
        correct += int((logits.argmax(1) == y[start : start + batch_size]).sum())
    model.train(was_training)
    return {f"{prefix}_loss": total_loss / len(y), f"{prefix}_acc": correct / len(y)}


#: The probe batch of an MLP run: its first this-many training examples (fixed, not shuffled), on
#: which every snapshot measures the model's inputs and function (:class:`MLPProbe`).
PROBE_EXAMPLES = 1024


def relative_change(current: torch.Tensor, previous: torch.Tensor) -> float:
    """``||current - previous||_F / ||previous||_F`` in float64 (NaN where ``previous`` is zero)."""
    current, previous = current.double(), previous.double()
    scale = float(torch.linalg.vector_norm(previous))
    change = float(torch.linalg.vector_norm(current - previous))
    return change / scale if scale > 0 else math.nan


def hidden_product(model: ResidualMLP) -> torch.Tensor:
    """``P = (I + W_{L-1}) ... (I + W_0)`` in float64: the hidden map of the linear residual net,
    biases aside (in other residual conditions, the linear part that the identity paths and the
    ``W_l`` make together)."""
    weights = [w.detach().double() for w in model.hidden_weights()]
    eye = torch.eye(weights[0].shape[1], dtype=torch.float64, device=weights[0].device)
    product = eye
    for w in weights:
        product = product + w @ product
    return product


class MLPProbe:
    """Measurements on a fixed probe batch at every snapshot of an MLP run (the ``probe`` hook of
    :func:`train_with_recording`), recorded into ``recorder``: the alignment of each layer's v1 with the mean of
    its input (``mean_input_cos``, ``mean_input_share``, ``mean_input_pair_cos``), the motion of the logits and of
    the hidden product (``logit_change``, ``product_change``), the near-linear share of radial activations
    (``near_linear_share``) and, with ``balance``, the motion of the conserved balances (``pair_balance_motion``,
    ``unit_balance_motion``). docs/design.md ("What the MLP probe records") defines each.

    The model runs in eval mode under ``torch.no_grad`` (then back to its mode): no running
    statistic moves, no gradient is touched, and no random state is drawn (the singular-vector
    solver seeds its own generator), so training is bit-identical with and without the probe.
    """

    def __init__(
        self,
        model: ResidualMLP,
        x: torch.Tensor,
        recorder: ContinuityRecorder,
        group: str = "hidden",
        balance: bool = False,
    ):
        self.model, self.x, self.recorder, self.group = model, x, recorder, group
        self.residual = model.blocks[0].residual
        self.balance = balance
        self._balances: tuple[list, tuple] | None = None  # the first snapshot's balances
        self._logits: torch.Tensor | None = None
        self._product: torch.Tensor | None = None
        self._start: torch.Tensor | None = None  # the previous snapshot's v1: a warm start

    @torch.no_grad()
    def __call__(self, step: int) -> None:
        model, rows, group = self.model, self.recorder.rows, self.group
        was_training = model.training
        model.eval()
        try:
            trace = forward_trace(model, self.x)
        finally:
            model.train(was_training)
        weights = torch.stack([w.detach() for w in model.hidden_weights()])
        triplets = metrics.stacked_singular_triplets(weights, 1, method="iterative", start=self._start)
        self._start = torch.stack([t.v[:, :1] for t in triplets])
        means = []
        for layer, (inputs, t) in enumerate(zip(trace.inputs, triplets)):
            inputs = inputs.double()
            mean = inputs.mean(0)
            means.append(mean)
            mean_sq = float(torch.linalg.vector_norm(mean)) ** 2
            second_moment = float((inputs * inputs).sum(1).mean())
            undefined = metrics.direction_flags(t)[0] or mean_sq == 0
            cos = math.nan if undefined else float(metrics.abs_cos(t.v[:, 0].double(), mean))
            rows.append(make_row(step, group, layer, "mean_input_cos", "input", 1, cos))
            share = mean_sq / second_moment if second_moment > 0 else math.nan
            self.recorder.record(step, "mean_input_share", share, group=group, layer=layer)
        for layer, (mean, following) in enumerate(zip(means, means[1:])):
            zero = not bool(mean.any()) or not bool(following.any())
            cos = math.nan if zero else float(metrics.abs_cos(mean, following))
            rows.append(make_row(step, group, layer, "mean_input_pair_cos", "input", 1, cos))
        linear = near_linear_share(model, trace.preactivation_norms)
        if linear is not None:
            for layer, value in enumerate(linear.tolist()):
                self.recorder.record(step, "near_linear_share", value, group=group, layer=layer)
        logits = trace.logits.detach().double()
        if self._logits is not None:
            self.recorder.record(step, "logit_change", relative_change(logits, self._logits))
        self._logits = logits
        if self.residual:
            product = hidden_product(model)
            if self._product is not None:
                self.recorder.record(step, "product_change", relative_change(product, self._product))
            self._product = product
        if self.balance:
            self._record_balances(step)

    def _record_balances(self, step: int) -> None:
        pairs, unit = balance.pair_balances(self.model), balance.unit_balance(self.model)
        if self._balances is None:
            self._balances = (pairs, unit)
        start_pairs, start_unit = self._balances
        for layer, ((now, size), (then, then_size)) in enumerate(zip(pairs, start_pairs)):
            self.recorder.record(
                step,
                "pair_balance_motion",
                balance.relative_motion(now, then, size, then_size),
                group=self.group,
                layer=layer,
            )
        self.recorder.record(
            step, "unit_balance_motion", balance.relative_motion(unit[0], start_unit[0], unit[1], start_unit[1])
        )


def steps_for(config: MLPRunConfig, n_train: int) -> int:
    """Total optimizer steps: ``config.steps``, else ``epochs`` passes over the training set
    (last batch dropped)."""
    if config.steps is not None:
        return config.steps
    return config.epochs * max(1, n_train // config.batch_size)


@functools.lru_cache(maxsize=4)
def _dataset(name: str, max_train: int | None) -> ImageData:
    """Datasets are loaded once per process, and only when a run actually trains."""
    from .data import load_image_data

    return load_image_data(name, max_train=max_train)


def train_mlp(config: MLPRunConfig, progress: bool = True, record: bool = True, probe: bool = True) -> pd.DataFrame:
    """Train one residual MLP and return its run table (uncached; see :func:`run_mlp`).

    ``record=False`` trains identically without the recorder (for overhead benchmarks)
    and returns an empty table. Every snapshot also measures the model on the probe batch, the
    first :data:`PROBE_EXAMPLES` training examples (:class:`MLPProbe`); ``probe=False`` leaves
    those rows out and trains identically (the test that the probe changes nothing).
    """
    data = _dataset(config.dataset, config.max_train)
    device = resolve_device(config.device)
    torch.manual_seed(config.seed)
    model = ResidualMLP(
        config.condition,
        in_features=data.n_features,
        width=config.width,
        depth=config.depth,
        n_classes=data.n_classes,
        init_scale=config.init_scale,
    ).to(device)
    x_train, y_train = data.x_train.to(device), data.y_train.to(device)
    x_test, y_test = data.x_test.to(device), data.y_test.to(device)
    batches_per_epoch = max(1, len(y_train) // config.batch_size)
    total_steps = steps_for(config, len(y_train))
    recorder = ContinuityRecorder(
        {"hidden": model.hidden_weights()},
        snapshot_schedule(total_steps, config.n_snapshots, config.n_late_snapshots, config.snapshot_steps),
        n_directions=config.n_directions,
    )
    optimizer = make_optimizer(
        model.parameters(),
        config.optimizer,
        framed=model.hidden_weights(),
        frame_seed=config.seed,
        fused=None if config.fused_optimizer else False,
    )
    trace = (
        DenseTrace({"hidden": model.hidden_weights()}, config.trace_every) if config.trace_every and record else None
    )
    shuffle = torch.Generator().manual_seed(config.seed)
    order = torch.empty(0, dtype=torch.long)

    def compute_loss(step: int) -> torch.Tensor:
        nonlocal order
        position = step % batches_per_epoch
        if position == 0:
            order = torch.randperm(len(y_train), generator=shuffle).to(device)
        index = order[position * config.batch_size : (position + 1) * config.batch_size]
        with precision_context(config.precision, device):
            return nn.functional.cross_entropy(model(x_train[index]), y_train[index])

    train_with_recording(
        compute_loss=compute_loss,
        optimizer=optimizer,
        recorder=recorder if record else None,
        total_steps=total_steps,
        evaluate=lambda: {
            **evaluate_classifier(model, x_test, y_test),
            **evaluate_classifier(model, x_train[:TRAIN_SET_EVAL], y_train[:TRAIN_SET_EVAL], prefix="train_set"),
        },
        description=f"{config.condition} {config.optimizer.label} seed={config.seed}",
        progress=progress,
        lr_factor=lr_factor_for(config, total_steps),
        clip_norm=config.grad_clip,
        trace=trace,
        probe=MLPProbe(model, x_train[:PROBE_EXAMPLES], recorder, balance=config.record_balance)
        if probe and record
        else None,
    )
    return rows_to_frame(recorder.rows + (trace.rows if trace else []))


def compute_mlp_run(config: MLPRunConfig) -> pd.DataFrame:
    """The table of one run, without progress bar: the computation of an MLP sweep job."""
    return train_mlp(config, progress=False)


def _compute_mlp_run_with_progress(config: MLPRunConfig) -> pd.DataFrame:
    return train_mlp(config, progress=True)


#: Metrics every MLP run of this code records (the probe's and the recorder's latest): a cached table without
#: them was recorded by earlier code and is recomputed, so that every chapter reads one version of the recording.
RECORDED_METRICS = ("mean_input_cos", "step_change")


def mlp_job(config: MLPRunConfig, require_metrics: Sequence[str] = (), progress: bool = False) -> sweeps.Job:
    """The sweep job of one MLP run (cache kind ``mlp``, keyed by ``config.to_dict()``); it requires
    :data:`RECORDED_METRICS` besides ``require_metrics``."""
    return sweeps.Job(
        "mlp",
        config.to_dict(),
        _compute_mlp_run_with_progress if progress else compute_mlp_run,
        config,
        label=f"{config.condition} {config.optimizer.label} init={config.init_scale:g} seed={config.seed}",
        device=config.device,
        require_metrics=tuple(dict.fromkeys((*RECORDED_METRICS, *require_metrics))),
    )


def run_mlp(config: MLPRunConfig, progress: bool = True, require_metrics: Sequence[str] = ()) -> pd.DataFrame:
    """The run table of ``config``, from the cache or by training once (in this process).

    ``require_metrics``: metrics the caller needs; a cached table recorded before they
    existed is recomputed.
    """
    return sweeps.run_job(mlp_job(config, require_metrics, progress))


def run_sweep(
    configs: Sequence[MLPRunConfig],
    progress: bool = True,
    require_metrics: Sequence[str] = (),
    executor: str | None = None,
) -> pd.DataFrame:
    """Run (or load) every configuration; one table with :data:`geocont.tables.RUN_KEYS` added
    (``optimizer`` is the optimizer's label).

    All configurations are validated before the first run starts. Each run is cached on
    its own, so an interrupted sweep resumes where it stopped. ``executor`` as in
    :func:`geocont.sweeps.run_jobs` (default ``$GEOCONT_EXECUTOR``, else all local
    cores); ``progress`` shows one bar over the runs; ``require_metrics`` as in :func:`run_mlp`.
    """
    configs = list(configs)
    if not configs:
        raise ValueError("run_sweep needs at least one configuration")
    tables = sweeps.run_jobs([mlp_job(c, require_metrics) for c in configs], executor=executor, progress=progress)
    return sweeps.tidy_sweep_table(
        tables,
        [
            dict(condition=c.condition, optimizer=c.optimizer.label, init_scale=c.init_scale, seed=c.seed)
            for c in configs
        ],
    )
