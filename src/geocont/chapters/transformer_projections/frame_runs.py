"""The runs that ask what carries O's and Down's output continuity: Adam's residual frame rotated, the gains frozen.

Each is the chapter's reference run (``silu``, or the ``none`` variant) trained exactly as the chapter trains it, with
one switch changed (:class:`geocont.config.LMRunConfig`): ``residual_frame="rotated"`` keeps Adam's moments for the
residual stream's axis in a fixed random frame (:class:`geocont.optimizers.ResidualFrameAdam`), ``norm_gains="frozen"``
holds every RMSNorm gain at 1; every one records the residual channel at every snapshot (:mod:`geocont.channel`).
"""

from __future__ import annotations

from ...config import LMRunConfig
from ..lm_runs import LMChapterSettings

#: The set: label -> (variant, the switches, seeds at ``cpu``), most valuable first.
FRAME_RUNS: dict[str, tuple[str, dict, tuple[int, ...]]] = {
    "silu, rotated frame": ("silu", dict(residual_frame="rotated"), (0, 1, 2)),
    "silu, frozen gains": ("silu", dict(norm_gains="frozen"), (0,)),
    "none, rotated frame": ("none", dict(residual_frame="rotated"), (0,)),
}


def frame_configs(settings: LMChapterSettings) -> dict[str, list[LMRunConfig]]:
    """``{label: [config per seed]}`` of :data:`FRAME_RUNS`, built on the chapter's own run configs (seeds the
    chapter's variant does not train are built from its base the same way)."""
    configs = settings.configs()
    out = {}
    for label, (variant, switches, seeds) in FRAME_RUNS.items():
        base = configs[variant][0]
        out[label] = [base.replace(seed=seed, record_channel=True, **switches) for seed in seeds]
    return out
