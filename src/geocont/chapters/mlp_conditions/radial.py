"""mlp_conditions: how nonlinear the radial activations are at initialisation (read through :mod:`.compute`)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import mlp_runs
from ..mlp_runs import MLPChapterSettings

#: sigma_rad(z) = z tanh(||z||) is within 1% of the identity for ||z|| above this (tanh(2.65) = 0.99).
RADIAL_NEAR_IDENTITY_NORM = 2.65

#: A radial activation is called linear in practice when at least this percentage of its pre-activations lie
#: where it is within 1% of the identity (defined once in :mod:`geocont.chapters.mlp_runs`, which the symmetry-dose
#: chapter reads too).
NEAR_LINEAR_SHARE = mlp_runs.NEAR_LINEAR_SHARE


@dataclass(frozen=True)
class RadialLinearity:
    """How nonlinear the two radial activations are at initialisation, on ``probe`` training images: the
    pre-activation norms of ``res-radial`` (median, 5th percentile) and the percentage of them where
    σ_rad is within 1% of the identity; ``res-radial-tau``'s τ over layers and the same percentage."""

    probe: int
    median: float
    low: float
    near_identity: float
    tau_min: float
    tau_max: float
    tau_near_identity: float

    @property
    def radial_is_linear(self) -> bool:
        return self.near_identity >= NEAR_LINEAR_SHARE


def radial_linearity(settings: MLPChapterSettings, n_probe: int = 512) -> RadialLinearity:
    """The :class:`RadialLinearity` of the chapter's model at initialisation (seed ``settings.seeds[0]``)."""
    import torch

    from ...data import load_image_data
    from ...mlp import ResidualMLP, preactivation_norms

    base = settings.base
    data = load_image_data(base.dataset, max_train=base.max_train)
    probe = data.x_train[:n_probe]

    def model(condition: str) -> ResidualMLP:
        torch.manual_seed(settings.seeds[0])
        return ResidualMLP(
            condition,
            in_features=data.n_features,
            width=base.width,
            depth=base.depth,
            n_classes=data.n_classes,
            init_scale=base.init_scale,
        )

    norms = preactivation_norms(model("res-radial"), probe)
    scaled = model("res-radial-tau")
    with torch.no_grad():
        scaled_norms = preactivation_norms(scaled, probe)  # its first forward pass fixes every layer's tau
    taus = torch.stack([block.activation.tau for block in scaled.blocks])
    return RadialLinearity(
        probe=len(probe),
        median=float(norms.median()),
        low=float(norms.quantile(0.05)),
        near_identity=float(100 * (norms > RADIAL_NEAR_IDENTITY_NORM).float().mean()),
        tau_min=float(taus.min()),
        tau_max=float(taus.max()),
        tau_near_identity=float(100 * (scaled_norms / taus[:, None] > RADIAL_NEAR_IDENTITY_NORM).float().mean()),
    )
