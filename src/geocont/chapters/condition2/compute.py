"""condition2: what the chapter computes, no figures, no matplotlib. Each question in its own module:

* :mod:`.settings`: the presets, parameters, run set and cost (``CHAPTER``);
* :mod:`.runs`: training them (:class:`Results`);
* :mod:`.comparison`: Condition 2 on every dataset, every seed, and formation under SGD;
* :mod:`.motion_and_spectrum`: the logits' function-preserving motion and the spectrum beside the turn rate;
* :mod:`.drift_tests`: the learning-rate and batch tests and the readings that vote on drift (with :mod:`.forks`);
* :mod:`.spikes`: the spike detector calibrated on the baseline;
* :mod:`.mechanism`: instability, drift and memorisation judged;
* :mod:`.claim_table`: the claims table.
"""

from __future__ import annotations

from .claim_table import (  # noqa: F401
    NOT_COUNTED,
    claims,
    drift_claims,
    drift_verdict_claim,
)
from .comparison import (  # noqa: F401
    BIMODAL_GAP,
    PAPER_LINEAR_GRADIENT,
    PAPER_LINEAR_WEIGHT,
    Formation,
    Modality,
    SeedGroup,
    comparison_claims,
    comparison_rows,
    formation,
    formation_rows,
    half_verdicts,
    halves_agree,
    intervention_rows,
    modality,
    seed_groups,
    seed_groups_found,
    seed_values,
    weight_v1,
    weight_v1_fall,
)
from .drift_tests import (  # noqa: F401
    BATCH_TESTS,
    DRIFT_GROUPINGS,
    NOT_TALLIED,
    STILL_RISING_SHARE,
    BatchDose,
    CosineCourse,
    DriftTests,
    EqualDistance,
    StepTest,
    batch_dose,
    cosine_course,
    cosine_lr,
    drift_readings,
    drift_tests_found,
    equal_distance,
    fall_rates,
    forks_found,
    grouped_readings,
    motion_readings,
    rate_margin,
    step_test,
    tally,
)
from .mechanism import (  # noqa: F401
    Explanation,
    SharedAxes,
    explanations,
    shared_axes,
    weight_decay_prediction,
)
from .motion_and_spectrum import (  # noqa: F401
    GAP_TURN_DRAWS,
    GAP_TURN_SIGN,
    MOTION_LOG2_MARGIN,
    SUBSPACE_KS,
    FunctionPreservingMotion,
    Motion,
    Spectrum,
    Subspace,
    function_preserving_motion,
    gap_and_turn,
    gap_per_run,
    loss_rose_seeds,
    motion,
    spectral_gaps,
    spectrum,
)
from .runs import (  # noqa: F401
    Results,
    SGDChoice,
    choose_sgd_lr,
    recorded,
    run,
)
from .settings import (  # noqa: F401
    CHAPTER,
    CORE_CONDITIONS,
    DRIFT_TESTS,
    HEADLINE_RULE,
    INTERVENTIONS,
    NARROW_CPU_RERUN,
    PARAMETERS,
    SGD_LEARNING_RATES,
    SGD_MOMENTUM,
    Budget,
    Condition2Settings,
    all_run_configs,
    budget,
    build_settings,
    describe,
    predicted_minutes,
    probe_configs,
    scale_rows,
    switch_step,
)
from .spikes import (  # noqa: F401
    CALIBRATION_EVENTS_PER_RUN,
    RECENT_MEDIAN_FACTOR,
    RECENT_MEDIAN_WINDOW,
    SPIKE_EXCESS,
    SPIKE_FACTORS,
    SpikeCalibration,
    SpikeRule,
    spike_calibration,
    spike_counts,
    spike_rules,
)
