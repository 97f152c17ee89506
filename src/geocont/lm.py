"""Training Llama-style language models with continuity recording (the transformer chapters).

Uses the package's one training loop (:func:`geocont.training.train_with_recording`) and
recorder; each of the seven projections (``q_proj`` ... ``down_proj``) is one recorder
group, so the run table has one ``group`` per projection.
"""

from __future__ import annotations

import functools

import warnings

import pandas as pd
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaForCausalLM

from . import cache
from .config import LMRunConfig
from .recorder import ContinuityRecorder, log_spaced_steps
from .tables import rows_to_frame
from .text import encode, load_corpus, train_tokenizer
from .training import make_optimizer, resolve_device, train_with_recording
from .transformer import build_llama, projection_groups


@functools.lru_cache(maxsize=4)
def token_splits(corpus: str, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train ids, validation ids) of a corpus under its cached BPE tokenizer."""
    text = load_corpus(corpus)
    tokenizer = train_tokenizer(text, vocab_size)
    return encode(tokenizer, text.train), encode(tokenizer, text.validation)


def _windows(ids: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    return torch.stack([ids[s:s + length] for s in starts.tolist()])


def train_lm(config: LMRunConfig, progress: bool = True, record: bool = True) -> tuple[pd.DataFrame, LlamaForCausalLM]:
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
    recorder = ContinuityRecorder(projection_groups(model), log_spaced_steps(config.steps, config.n_snapshots),
                                  n_directions=config.n_directions)
    optimizer = make_optimizer(model.parameters(), config.optimizer)

    def compute_loss(step: int) -> torch.Tensor:
        starts = torch.randint(0, len(train_ids) - length - 1, (config.batch_size,), generator=sampler)
        batch = _windows(train_ids, starts, length).to(device)
        return model(input_ids=batch, labels=batch).loss

    @torch.no_grad()
    def evaluate() -> dict[str, float]:
        model.eval()
        losses = [float(model(input_ids=chunk, labels=chunk).loss) for chunk in eval_batch.split(16)]
        model.train()
        return {"val_loss": sum(losses) / len(losses)}

    shape = config.shape
    train_with_recording(
        compute_loss=compute_loss, optimizer=optimizer, recorder=recorder if record else None,
        total_steps=config.steps,
        evaluate=evaluate, progress=progress,
        description=f"{shape.mlp_activation}/{shape.attention} seed={config.seed}",
    )
    return rows_to_frame(recorder.rows), model.eval().cpu()


#: File name of the trained weights stored beside a language-model run table.
MODEL_ARTIFACT = "model.safetensors"


def _train_and_store(config: LMRunConfig, progress: bool) -> pd.DataFrame:
    table, model = train_lm(config, progress)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    cache.store("lm", config.to_dict(), table,
                artifacts={MODEL_ARTIFACT: lambda path: save_file(state, str(path))})
    return table


def run_lm(config: LMRunConfig, progress: bool = True) -> pd.DataFrame:
    """The run table of ``config``, from the cache or by training once (weights kept too)."""
    table = cache.load("lm", config.to_dict())
    return table if table is not None else _train_and_store(config, progress)


def trained_lm(config: LMRunConfig, progress: bool = True) -> LlamaForCausalLM:
    """The trained model of ``config`` (eval mode, CPU), from the cache or by training once.

    An entry cached without weights, or with unreadable weights, is retrained.
    """
    weights = cache.artifact_path("lm", config.to_dict(), MODEL_ARTIFACT)
    if weights is not None:
        try:
            state = load_file(str(weights))
        except Exception as error:  # noqa: BLE001 - a corrupt file is reported, then retrained
            warnings.warn(f"unreadable weights {weights} ({error}); retraining", stacklevel=2)
        else:
            model = build_llama(config.shape, seed=config.seed)
            model.load_state_dict(state)
            return model.eval()
    _train_and_store(config, progress)
    return trained_lm(config, progress)


def run_lm_sweep(configs: dict[str, list[LMRunConfig]], progress: bool = True) -> pd.DataFrame:
    """Run (or load) every variant x seed; one table with the run-key columns added.

    ``condition`` holds the variant label; ``optimizer`` and ``init_scale`` are filled so
    that the MLP chapters' analysis functions apply unchanged.
    """
    from tqdm import tqdm

    jobs = [(label, config) for label, group in configs.items() for config in group]
    tables = []
    bar = tqdm(jobs, desc="runs", disable=not progress)
    for label, config in bar:
        bar.set_postfix_str(f"{label} seed={config.seed}")
        tables.append(run_lm(config, progress=False).assign(
            condition=label, optimizer=config.optimizer.label, init_scale=1.0, seed=config.seed))
    combined = pd.concat(tables, ignore_index=True)
    for column in ("condition", "optimizer", "group", "metric", "space"):
        combined[column] = combined[column].astype("category")
    return combined
