"""The paper's numbers (arXiv 2605.04971), each once: every chapter that judges a claim against one of
them reads it here. See ``shared/paper.md`` for where each comes from."""

#: Condition 2: the linear residual net (Res+None) ends with low weight v1 continuity...
LINEAR_WEIGHT_V1 = 0.22
#: ... yet high gradient v1 continuity.
LINEAR_GRADIENT_V1 = 0.93
#: Res+Radial (a rotation-equivariant nonlinearity) ends as low as the linear net ("~0.22").
RADIAL_WEIGHT_V1 = 0.22
#: Condition 1: without residual connections gradient continuity falls to the random level ("~0.05").
NORES_GRADIENT = 0.05
