"""profiling.peak_bytes, the memory measurement of chapter 8, against allocations of known size."""

from __future__ import annotations

import os

import torch

from extending_pytorch import profiling

MIB = 2**20


def test_one_allocation_counts_its_bytes():
    assert profiling.peak_bytes(lambda: torch.empty(MIB, dtype=torch.float32)) == 4 * MIB


def test_temporaries_count_while_they_live():
    # Two buffers live at once, then freed before fn returns: the peak is both, not the last.
    def fn():
        a = torch.empty(MIB, dtype=torch.uint8)
        b = torch.empty(2 * MIB, dtype=torch.uint8)
        del a, b
        return torch.empty(16, dtype=torch.uint8)

    assert profiling.peak_bytes(fn) == 3 * MIB


def test_memory_kept_from_an_earlier_session_is_not_counted():
    # The profiler's "Total Allocated" is not reset between sessions: a tensor allocated
    # in one and kept is still in the next one's totals. Without the subtraction of its
    # value before the first event, it would be counted again.
    held = []
    assert profiling.peak_bytes(lambda: held.append(torch.empty(8 * MIB, dtype=torch.uint8))) == 8 * MIB
    assert profiling.peak_bytes(lambda: torch.empty(MIB, dtype=torch.uint8)) == MIB
    del held


def test_no_allocation_is_zero():
    assert profiling.peak_bytes(lambda: None) == 0


def test_chapter_8_unfold_reference_peak():
    # The chapter's measured claim, at a small size: the windows, their product with the
    # kernels and the output are live at once.
    from extending_pytorch import involution as inv

    b, c, g, h, k = 2, 8, 2, 12, 3
    x, w = torch.randn(b, c, h, h), torch.randn(b, g, k, k, h, h)
    output = b * c * h * h * 4
    with torch.no_grad():
        assert profiling.peak_bytes(lambda: inv.reference_involution(x, w, 1, 1)) == (2 * k * k + 1) * output
        assert profiling.peak_bytes(lambda: inv.involution(x, w, 1, 1)) == output


def test_quiet_profiler_silences_and_restores_descriptor_2(capfd):
    with profiling.quiet_profiler():
        os.write(2, b"silenced\n")
    os.write(2, b"restored\n")
    err = capfd.readouterr().err
    assert "silenced" not in err and "restored" in err
