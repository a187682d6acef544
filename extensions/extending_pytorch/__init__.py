"""Code shared by the chapters of the book "Extending PyTorch"."""

from extending_pytorch.benchmarking import (
    compare,
    keep_freed_memory,
    measured_on,
    timed,
)
from extending_pytorch.display import Table, Text, show, show_source
from extending_pytorch.reference import (
    REDUCTIONS,
    TripletHingeLoss,
    check_hyperparameters,
    check_triplet_inputs,
    floor_at,
    reference_triplet_hinge_loss,
    squared_distance,
)

__all__ = [
    "REDUCTIONS",
    "Table",
    "Text",
    "TripletHingeLoss",
    "check_hyperparameters",
    "check_triplet_inputs",
    "compare",
    "floor_at",
    "keep_freed_memory",
    "measured_on",
    "reference_triplet_hinge_loss",
    "show",
    "show_source",
    "squared_distance",
    "timed",
]
