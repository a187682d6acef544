"""The poison: a signalling-NaN pattern (or, for integers, a byte pattern)
written into outputs before a launch, and the check that none is left after."""

from __future__ import annotations

# Signalling NaNs (float types) or a byte pattern: what outputs hold before a launch.
POISON_BITS = {2: 0x7D5A, 4: 0x7FA5A5A5, 8: 0x7FF4A5A5A5A5A5A5}


def poison_view(t):
    import torch

    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(bits)


def poison_value(t):
    import torch

    if t.dtype == torch.bfloat16:
        return 0x7FA5
    if t.element_size() == 1:
        return 0xA5
    value = POISON_BITS[t.element_size()]
    # As a signed integer of the element's width.
    return value - (1 << (8 * t.element_size())) if value >= 1 << (8 * t.element_size() - 1) else value



def check_written(t, kernel: str, output: str) -> None:
    """Every element of `t` must have been written (no poison left)."""
    if t.numel() == 0:
        return
    unwritten = poison_view(t) == poison_value(t)
    if unwritten.any():
        first = [int(i) for i in unwritten.nonzero()[0]]
        raise RuntimeError(
            f"simt: {kernel} left {int(unwritten.sum())} of the {t.numel()} elements of "
            f"{output} unwritten, the first at {first} (shape {list(t.shape)}): they still "
            "hold the poison written before the launch"
        )


def poisoned_empty(*shape, like):
    import torch

    t = torch.empty(shape, dtype=like.dtype)
    poison_view(t).fill_(poison_value(t))
    return t

