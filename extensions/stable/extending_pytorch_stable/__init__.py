"""Chapter 7: chapter 4's fused triplet hinge loss, built against the LibTorch stable ABI.

Importing the package loads the operators (the empty module _C runs their
registration) and adds the Python parts: fake implementations for
torch.compile and the autograd formula.
"""

# torch first: _C links against libc10.so and libtorch_cpu.so, which the
# dynamic loader finds only because importing torch has loaded them (the
# library has no rpath into torch's directory). Loading _C on its own fails
# with "libc10.so: cannot open shared object file".
import torch  # noqa: F401

from extending_pytorch_stable import _C  # noqa: F401  (registers the operators)
from extending_pytorch_stable.ops import triplet_hinge_loss

__all__ = ["triplet_hinge_loss"]
