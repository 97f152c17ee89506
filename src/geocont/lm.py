"""Training Llama-style language models with continuity recording (the transformer chapters).

Uses the package's one training loop (:func:`geocont.training.train_with_recording`) and
recorder; each of the seven projections (``q_proj`` ... ``down_proj``) is one recorder
group, so the run table has one ``group`` per projection, and ``up~gate`` holds the
layer-wise comparison of the up and gate projections (:data:`CROSS_PAIRS`).
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import pandas as pd
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaForCausalLM

from . import cache, sweeps
from .channel import model_channel
from .config import LMRunConfig
from .optimizers import ResidualFrameAdam, residual_frame
from .recorder import ContinuityRecorder
from .tables import rows_to_frame
from .text import encode, load_corpus, train_tokenizer
from .training import fused_supported, make_optimizer, precision_context, resolve_device, train_with_recording
from .transformer import build_llama, projection_groups


class TokenSplits(NamedTuple):
    """A corpus's training and validation token ids under one tokenizer."""

    train: torch.Tensor
    validation: torch.Tensor


class TrainedLM(NamedTuple):
    """A trained language model and its run table."""

    table: pd.DataFrame
    model: LlamaForCausalLM


@functools.lru_cache(maxsize=4)
def token_splits(corpus: str, vocab_size: int) -> TokenSplits:
    """(train ids, validation ids) of a corpus under its cached BPE tokenizer."""
    text = load_corpus(corpus)
    tokenizer = train_tokenizer(text, vocab_size)
    return TokenSplits(encode(tokenizer, text.train), encode(tokenizer, text.validation))


def _windows(ids: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


#: Projections of one layer compared with each other (the recorder's ``cross_pairs``, metric
#: ``cross_cos``): the up and gate projections read the same input.
CROSS_PAIRS: dict[str, tuple[str, str]] = {"up~gate": ("up_proj", "gate_proj")}


def train_lm(config: LMRunConfig, progress: bool = True, record: bool = True) -> TrainedLM:
    """Train one model; return its run table and the trained model (uncached; see :func:`run_lm`).

    ``record=False`` trains identically without the recorder (for overhead benchmarks)
    and returns an empty table.
    """
    train_ids, val_ids = token_splits(config.corpus, config.shape.vocab_size)
    device = resolve_device(config.device)
    model = build_llama(config.shape, seed=config.seed).to(device)
    length = config.shape.max_seq_len
    sampler = torch.Generator().manual_seed(config.seed)
    eval_starts = torch.linspace(0, len(val_ids) - length - 1, config.eval_windows).long()
    eval_batch = _windows(val_ids, eval_starts, length).to(device)
    groups = projection_groups(model)
    cross_pairs = {name: pair for name, pair in CROSS_PAIRS.items() if set(pair) <= set(groups)}
    recorder = ContinuityRecorder(groups, config.schedule(), n_directions=config.n_directions, cross_pairs=cross_pairs)
    optimizer = lm_optimizer(model, config)

    def compute_loss(step: int) -> torch.Tensor:
        starts = torch.randint(0, len(train_ids) - length - 1, (config.batch_size,), generator=sampler)
        batch = _windows(train_ids, starts, length).to(device)
        with precision_context(config.precision, device):
            return model(input_ids=batch, labels=batch).loss

    @torch.no_grad()
    def evaluate() -> dict[str, float]:
        model.eval()
        losses = [float(model(input_ids=chunk, labels=chunk).loss) for chunk in eval_batch.split(16)]
        model.train()
        return {"val_loss": sum(losses) / len(losses)}

    def record_channel(step: int) -> None:
        for name, layer, metric, value in model_channel(model):
            recorder.record(step, metric, value, group=name, layer=layer)

    shape = config.shape
    train_with_recording(
        compute_loss=compute_loss,
        optimizer=optimizer,
        recorder=recorder if record else None,
        total_steps=config.steps,
        evaluate=evaluate,
        probe=record_channel if config.record_channel else None,
        progress=progress,
        description=f"{shape.mlp_activation}/{shape.attention} seed={config.seed}",
    )
    return TrainedLM(rows_to_frame(recorder.rows), model.eval().cpu())


def norm_gains(model) -> list[torch.nn.Parameter]:
    """Every RMSNorm gain of a Llama model (each layer's two, then the final norm's)."""
    layers = model.model.layers
    return [g for layer in layers for g in (layer.input_layernorm.weight, layer.post_attention_layernorm.weight)] + [
        model.model.norm.weight
    ]


def lm_optimizer(model: LlamaForCausalLM, config: LMRunConfig) -> torch.optim.Optimizer:
    """The run's optimizer: ``config.optimizer`` over the trained parameters (the RMSNorm gains left at 1 and out
    where ``norm_gains`` is ``frozen``), with Adam's moments for the residual stream in a random frame where
    ``residual_frame`` is ``rotated`` (:class:`geocont.optimizers.ResidualFrameAdam`: the embedding, Q, K, V,
    Gate, Up and the head read the stream, O and Down write it)."""
    if config.norm_gains == "frozen":
        for gain in norm_gains(model):
            gain.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    fused = None if config.fused_optimizer else False
    if config.residual_frame == "standard":
        return make_optimizer(params, config.optimizer, fused=fused)
    groups = projection_groups(model)
    readers = [model.model.embed_tokens.weight, model.lm_head.weight]
    readers += [w for name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") for w in groups[name]]
    writers = [w for name in ("o_proj", "down_proj") for w in groups[name]]
    options = config.optimizer
    return ResidualFrameAdam(
        params,
        frame=residual_frame(config.shape.d_model, config.seed),
        readers=readers,
        writers=writers,
        inner=torch.optim.AdamW if options.name == "adamw" else torch.optim.Adam,
        lr=options.lr,
        betas=(options.beta1, options.beta2),
        eps=options.eps,
        weight_decay=options.weight_decay,
        fused=fused_supported(params) if fused is None else fused,
    )


#: File name of the trained weights stored beside a language-model run table.
MODEL_ARTIFACT = "model.safetensors"


def compute_lm_run(config: LMRunConfig, progress: bool = False) -> cache.Computed:
    """Train one model: its table, with the weights as the entry's :data:`MODEL_ARTIFACT`
    (the computation of a language-model sweep job)."""
    table, model = train_lm(config, progress)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    return cache.Computed(table, {MODEL_ARTIFACT: lambda path: save_file(state, str(path))})


def _compute_lm_run_with_progress(config: LMRunConfig) -> cache.Computed:
    return compute_lm_run(config, progress=True)


#: Metrics every language-model run of this code records: a cached table without them was recorded by earlier
#: code and is recomputed (``cross_cos``: the up~gate pairs of :data:`CROSS_PAIRS`).
RECORDED_METRICS = ("step_change", "cross_cos")


def lm_job(config: LMRunConfig, label: str = "", progress: bool = False) -> sweeps.Job:
    """The sweep job of one language-model run (kind ``lm``); the entry must hold the weights and
    :data:`RECORDED_METRICS`; it is trained only on the corpus text its key stands for (:func:`_corpus_check`)."""
    shape = config.shape
    return sweeps.Job(
        "lm",
        config.to_dict(),
        _compute_lm_run_with_progress if progress else compute_lm_run,
        config,
        label=f"{label or f'{shape.mlp_activation}/{shape.attention}'} seed={config.seed}",
        device=config.device,
        require_metrics=RECORDED_METRICS,
        require_artifacts=(MODEL_ARTIFACT,),
        cost=float(config.steps * (shape.n_layers + 1)),
        before_training=_corpus_check(config.corpus),
    )


def corpus_check(corpus: str) -> str | None:
    """Why ``corpus`` is not the text its runs' keys stand for (:func:`geocont.corpus_files.corpus_problem`), or None;
    a copy saved in ``$GEOCONT_CORPUS_DIR`` is not checked (its content is what the user chose to train on)."""
    from .corpus_files import corpus_problem
    from .text import saved_corpus_path

    saved = saved_corpus_path(corpus)
    return None if saved is not None and saved.exists() else corpus_problem(corpus)


@functools.lru_cache(maxsize=8)
def _corpus_check(corpus: str) -> functools.partial:
    """:func:`corpus_check` of ``corpus`` as one picklable callable per corpus (a sweep runs each once)."""
    return functools.partial(corpus_check, corpus)


def run_lm(config: LMRunConfig, progress: bool = True) -> pd.DataFrame:
    """The run table of ``config``, from the cache or by training once (weights kept too)."""
    return sweeps.run_job(lm_job(config, progress=progress))


def trained_lm(config: LMRunConfig, progress: bool = True) -> LlamaForCausalLM:
    """The trained model of ``config`` (eval mode, CPU), from the cache or by training once.

    An entry cached without weights, or with weights failing their checksum, is retrained
    (through the cache). Where the cache cannot give the weights back (a read-only cache,
    an unreadable file) the model is trained here and returned without being kept.
    """
    job = lm_job(config, progress=progress)
    weights = cache.artifact_path("lm", job.key_config(), MODEL_ARTIFACT)
    if weights is None:
        sweeps.run_job(job)
        weights = cache.artifact_path("lm", job.key_config(), MODEL_ARTIFACT)
    if weights is not None:
        try:
            state = load_file(str(weights))
        except Exception as error:  # noqa: BLE001 - an unreadable file is reported, then retrained
            warnings.warn(f"unreadable weights {weights} ({error}); retraining", stacklevel=2)
        else:
            model = build_llama(config.shape, seed=config.seed)
            model.load_state_dict(state)
            return model.eval()
    with sweeps.pinned_threads():
        return train_lm(config, progress)[1]


def run_lm_sweep(
    configs: dict[str, list[LMRunConfig]], progress: bool = True, executor: str | None = None
) -> pd.DataFrame:
    """Run (or load) every variant x seed; one table with the run-key columns added.

    ``condition`` holds the variant label; ``optimizer`` and ``init_scale`` are filled so
    that the MLP chapters' analysis functions apply unchanged. ``executor`` as in
    :func:`geocont.sweeps.run_jobs`.
    """
    jobs = [(label, config) for label, group in configs.items() for config in group]
    tables = sweeps.run_jobs([lm_job(config, label) for label, config in jobs], executor=executor, progress=progress)
    return sweeps.tidy_sweep_table(
        tables,
        [
            dict(condition=label, optimizer=config.optimizer.label, init_scale=1.0, seed=config.seed)
            for label, config in jobs
        ],
    )
