"""Chapter 4's fused triplet hinge loss, built against the LibTorch stable ABI.

Importing the package loads the operators (the empty module _C runs their
registration) and adds the Python parts: fake implementations for
torch.compile and the autograd formula.
"""

from extending_pytorch_stable import _C  # noqa: F401  (registers the operators)
from extending_pytorch_stable.ops import triplet_hinge_loss

__all__ = ["triplet_hinge_loss"]
