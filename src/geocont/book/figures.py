"""Numbered book figures: a chapter shows each finished figure through :func:`show_figure`."""

from __future__ import annotations

import matplotlib.pyplot as plt

from .paths import BOOK_ENV


def show_figure(fig: plt.Figure, name: str, caption: str) -> None:
    """Show a finished figure as a numbered book figure with ``caption``; ``name`` is its label.

    Prose elsewhere in the book refers to it with ``{numref}`name``` ("Figure 3"). Names
    are global to the book: prefix them with the chapter (``"mlp-weight-over-training"``).
    The caption is MyST Markdown and may hold computed numbers.

    Under ``python -m geocont.book`` (``$GEOCONT_BOOK`` set) the figure is glued with
    myst-nb and a ``{glue:figure}`` directive is emitted, which the book numbers; anywhere
    else (Jupyter, nbval, plain papermill) it is simply shown with its caption below.
    Use it instead of ``plt.show()`` as the last figure call of a cell::

        fig, ax = plt.subplots()
        ...
        plotting.show_figure(fig, "mlp-final-v1", f"Final v1 continuity; res-relu {estimate}.")
    """
    import os

    from IPython.display import Markdown, display

    if not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"figure name {name!r} must be letters, digits, '-' and '_' only")
    if os.environ.get(BOOK_ENV):
        from myst_nb import glue

        glue(name, fig, display=False)
        plt.close(fig)
        display(Markdown(f"```{{glue:figure}} {name}\n:name: {name}\n\n{caption}\n```"))
    else:
        plt.show()
        display(Markdown(f"**{name}.** {caption}"))
