"""geocont: measure geometric continuity across the layers of neural networks.

Reproduction of "Why Geometric Continuity Emerges in Deep Neural Networks: Residual
Connections and Rotational Symmetry Breaking" (arXiv 2605.04971).
"""

__version__ = "0.1.0"
