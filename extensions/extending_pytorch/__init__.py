"""Code shared by the chapters of the book "Extending PyTorch"."""

from extending_pytorch.benchmarking import keep_freed_memory, timed
from extending_pytorch.display import show_source
from extending_pytorch.reference import (
    REDUCTIONS,
    TripletHingeLoss,
    check_hyperparameters,
    check_triplet_inputs,
    reference_triplet_hinge_loss,
    squared_distance,
)

__all__ = [
    "REDUCTIONS",
    "TripletHingeLoss",
    "check_hyperparameters",
    "check_triplet_inputs",
    "keep_freed_memory",
    "reference_triplet_hinge_loss",
    "show_source",
    "squared_distance",
    "timed",
]
