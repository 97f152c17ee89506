"""Adam with the residual stream's moments in a rotated frame (geocont.optimizers.ResidualFrameAdam, geocont.lm)."""

import dataclasses

import numpy as np
import pytest
import torch

from geocont.channel import channel_rows, concentration, model_channel
from geocont.config import LMRunConfig, OptimizerConfig, TransformerShape
from geocont.lm import lm_optimizer, norm_gains
from geocont.optimizers import ResidualFrameAdam, random_orthogonal, residual_frame
from geocont.transformer import build_llama, projection_groups

SHAPE = TransformerShape(n_layers=2, d_model=16, n_heads=2, n_kv_heads=2, ffn_dim=24, vocab_size=40, max_seq_len=12)
BATCH = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(5))


def config(**changes):
    return LMRunConfig(**{**dict(shape=SHAPE, steps=4, n_snapshots=2, eval_windows=2, n_directions=2), **changes})


def stream_matrices(model):
    """(readers, writers): the matrices whose second axis reads, and whose first axis writes, the residual stream."""
    groups = projection_groups(model)
    readers = [model.model.embed_tokens.weight, model.lm_head.weight]
    readers += [w for name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj") for w in groups[name]]
    return readers, [w for name in ("o_proj", "down_proj") for w in groups[name]]


def train(model, optimizer, steps=3):
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(input_ids=BATCH, labels=BATCH).loss.backward()
        optimizer.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("fused", [False, True])
def test_an_identity_frame_gives_the_plain_optimizer_bit_for_bit(fused):
    options = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-3, fused=fused)
    plain_model, framed_model = build_llama(SHAPE, seed=0), build_llama(SHAPE, seed=0)
    plain = train(plain_model, torch.optim.Adam(plain_model.parameters(), **options))
    readers, writers = stream_matrices(framed_model)
    framed_optimizer = ResidualFrameAdam(
        framed_model.parameters(), frame=torch.eye(16), readers=readers, writers=writers, **options
    )
    framed = train(framed_model, framed_optimizer)
    assert all(torch.equal(plain[name], framed[name]) for name in plain)


def rotated_copy(model, rotation):
    """The same function with the residual basis turned by ``rotation`` (RMSNorm gains must be 1)."""
    copy = build_llama(SHAPE, seed=0).double()
    copy.load_state_dict(model.state_dict())
    readers, writers = stream_matrices(copy)
    with torch.no_grad():
        for matrix in readers:
            matrix.copy_(matrix @ rotation.T)
        for matrix in writers:
            matrix.copy_(rotation @ matrix)
    return copy


def unit_frozen_gains(model):
    for gain in norm_gains(model):
        gain.data.fill_(1.0)
        gain.requires_grad_(False)
    return model


def test_a_step_in_the_rotated_frame_commutes_with_turning_the_residual_basis():
    """Model B is model A with its residual basis turned by Q; with frame Q R for B and R for A, B's trajectory is
    A's turned by Q. Plain Adam (the standard frame for both) breaks that: the control that the test can fail."""
    rotation = random_orthogonal(16, np.random.default_rng(3))
    frame = residual_frame(16, seed=0)
    results = {}
    for name, frames in (("rotated", (frame, rotation @ frame)), ("plain", (torch.eye(16).double(),) * 2)):
        a = unit_frozen_gains(build_llama(SHAPE, seed=0).double())
        b = unit_frozen_gains(rotated_copy(a, rotation))
        paths = []
        for model, model_frame in zip((a, b), frames):
            readers, writers = stream_matrices(model)
            params = [p for p in model.parameters() if p.requires_grad]
            optimizer = ResidualFrameAdam(params, frame=model_frame, readers=readers, writers=writers, lr=1e-2)
            train(model, optimizer)
            paths.append(model)
        expected = rotated_copy(paths[0], rotation)
        results[name] = max(
            float((p - q).detach().abs().max()) for p, q in zip(expected.parameters(), paths[1].parameters())
        )
    # transformers' Llama normalises (RMSNorm) and takes the softmax in float32 even in a float64 model, so the two
    # functions agree to float32 rounding, which Adam's normaliser lifts on near-zero gradient entries (~3e-6 here);
    # a step that does not commute moves the weights by the learning rate's order (~6e-2 for plain Adam)
    assert results["rotated"] < 1e-4
    assert results["plain"] > 1e-2


def test_the_run_config_builds_the_frame_and_the_frozen_gains():
    model = build_llama(SHAPE, seed=0)
    optimizer = lm_optimizer(model, config(residual_frame="rotated", norm_gains="frozen"))
    assert isinstance(optimizer, ResidualFrameAdam)
    assert len(optimizer.shadows) == 2 + 7 * SHAPE.n_layers
    assert all(not gain.requires_grad for gain in norm_gains(model))
    trained = {id(p) for p in optimizer.param_groups[0]["params"]}
    assert not trained & {id(g) for g in norm_gains(model)}
    plain = lm_optimizer(build_llama(SHAPE, seed=0), config())
    assert isinstance(plain, torch.optim.Adam) and len(plain.param_groups[0]["params"]) == len(
        list(build_llama(SHAPE, seed=0).parameters())
    )


def test_the_new_fields_leave_every_earlier_run_key_as_it_was():
    assert config().to_dict() == {
        k: v for k, v in config(residual_frame="standard", norm_gains="trained", record_channel=False).to_dict().items()
    }
    assert "residual_frame" not in config().to_dict()
    assert config(residual_frame="rotated").to_dict()["residual_frame"] == "rotated"


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(residual_frame="spun"), "valid choices: standard, rotated"),
        (dict(norm_gains="fixed"), "valid choices: trained, frozen"),
        (dict(residual_frame="rotated", optimizer=OptimizerConfig("sgd", lr=0.1)), "has none"),
    ],
)
def test_bad_frame_settings_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        config(**changes)


def test_concentration_reads_one_coordinate_and_a_spread_vector():
    assert concentration(torch.tensor([0.0, 0.0, 3.0, 0.0])) == (1.0, 2, 1.0)
    share, _, ratio = concentration(torch.ones(16))
    assert share == pytest.approx(1 / 16) and ratio == pytest.approx(16)


def test_channel_rows_find_a_planted_outlier_coordinate_and_its_gain():
    d, width = 16, 24
    g = torch.Generator().manual_seed(0)
    down = [torch.randn(d, width, generator=g) * 0.1 for _ in range(2)]
    for matrix in down:
        matrix[7] += 5 * torch.ones(width) / width**0.5  # every layer writes a large row on coordinate 7
    gains = [torch.ones(d) for _ in range(2)]
    gains[1][7] = 0.25
    rows = {(p, layer, m): v for p, layer, m, v in channel_rows({"down_proj": down}, attention_gains=gains)}
    assert rows[("down_proj", 0, "channel_index")] == 7 == rows[("down_proj", 1, "channel_index")]
    assert rows[("down_proj", 0, "channel_share")] > 0.9
    assert rows[("down_proj", 0, "channel_gain")] == pytest.approx(0.25)  # the next layer's attention norm
    assert rows[("down_proj", 1, "channel_gain")] != rows[("down_proj", 1, "channel_gain")]  # no final norm given


def test_a_recorded_run_carries_the_channel_at_every_snapshot():
    from geocont.lm import train_lm

    shape = dataclasses.replace(SHAPE, vocab_size=512)  # the smallest byte-level BPE vocabulary is 256 wide
    table = train_lm(config(record_channel=True, steps=3, shape=shape), progress=False).table
    shares = table[table["metric"] == "channel_share"]
    assert set(shares["group"]) == set(projection_groups(build_llama(SHAPE)))
    assert shares["value"].between(1 / 24, 1).all()
    assert shares["step"].nunique() == table[table["metric"] == "val_loss"]["step"].nunique()
    assert len(model_channel(build_llama(SHAPE))) == 2 * (7 * 4 + 1)


def test_the_channel_rules_can_return_each_of_their_verdicts():
    from geocont.channel import random_top_share
    from geocont.chapters.transformer_projections import channel_rules as rules
    from geocont.statistics import Estimate as E

    d = 128
    assert 0.06 < random_top_share(d) < 0.07  # about 2 ln(d) / d, not 1/d
    assert rules.carried_by_one_coordinate(E(0.6, 0.05, 3), d) == "reproduced"
    assert rules.carried_by_one_coordinate(E(0.07, 0.01, 3), d) == "not reproduced"
    assert rules.frame_removes(E(0.072, 0.004, 3), d) == "reproduced"  # random level at d = 128: 0.0706
    assert rules.frame_removes(E(0.40, 0.04, 3), d) == "not reproduced"
    assert rules.frame_removes(E(0.10, 0.05, 3), d) == "inconclusive"
    assert rules.frame_keeps(E(0.66, 0.02, 3), E(0.68, 0.02, 3), d) == "reproduced"
    assert rules.frame_keeps(E(0.07, 0.01, 3), E(0.68, 0.02, 3), d) == "not reproduced"
    assert rules.frame_keeps(E(0.40, 0.02, 3), E(0.68, 0.02, 3), d) == "not reproduced"  # clearly below standard
    assert rules.frame_keeps(E(0.15, 0.02, 3), E(0.20, 0.02, 3), d) == "partly reproduced"
    assert rules.loss_gap(E(3.1, 0.01, 3), E(3.0, 0.01, 3)).mean == pytest.approx(0.1)
