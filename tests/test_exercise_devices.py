"""extending_pytorch.exercises.run_on: the part of chapters 1 and 3's checks that runs an answer on another device.

Each check runs the reader's answer on the GPU, or without one on the meta device; run_on turns a tensor made
on the wrong device into a message that says so, lets meta's data-less failures pass, and keeps a GPU's.
"""

from __future__ import annotations

import pytest
import torch

from extending_pytorch.exercises import run_on

# run_on's verdicts are its own logic, not torch's: make test-oldest leaves these out.
pytestmark = pytest.mark.same_on_every_torch

CREATE_ON = "labels.device"


def mixes_devices():
    # What an answer that builds a tensor without device= does on meta inputs: the two meet and torch raises.
    return torch.zeros(3, device="meta") + torch.zeros(3)


def test_a_device_error_names_the_device_to_create_on():
    # Catches: a device error tolerated on meta like any other (returning None), so the check passes an answer
    # that makes its tensors on the CPU.
    with pytest.raises(AssertionError, match=r"create every tensor on labels\.device: on meta inputs, .*device"):
        run_on(torch.device("meta"), mixes_devices, create_on=CREATE_ON)


@pytest.mark.parametrize("no_data", [
    lambda: torch.zeros(1, device="meta").item(),  # RuntimeError: .item() on meta
    lambda: torch.zeros(3, device="meta").nonzero(),  # NotImplementedError: nonzero's size needs the data
])
def test_meta_cannot_run_it_returns_none(no_data):
    # Catches: meta's data-less failures raised, which would fail every right answer that calls .item() or nonzero.
    assert run_on("meta", no_data) is None


def test_a_result_on_another_device_is_named():
    # Catches: results not checked, so an answer returning a CPU tensor for meta (or CUDA) inputs passes;
    # the CPU tensor sits inside a nested list, as gradients come back in a tuple beside the output.
    results = lambda: (torch.zeros(2, device="meta"), [torch.zeros(2, device="meta"), torch.zeros(2)])  # noqa: E731
    with pytest.raises(AssertionError, match=r"on meta inputs the loss or a gradient is on another device: "
                                             r"create every tensor on labels\.device"):
        run_on(torch.device("meta"), results, create_on=CREATE_ON, what="the loss or a gradient")


def test_results_on_the_device_come_back_unchanged():
    # Catches: a device check that also rejects the right answer (or non-tensors, such as the fractions
    # chapter 1's Exercise 2 returns), or results not passed back to the check's value comparisons.
    loss = torch.zeros((), device="meta")
    returned = run_on(torch.device("meta"), lambda: (loss, 0.5))
    assert returned[0] is loss and returned[1:] == (0.5,)


def test_a_gpu_error_is_raised_again():
    # Catches: any error tolerated on a GPU, where every operation runs, so a crash there would pass. A
    # torch.device("cuda") object needs no GPU; the error is the answer's own, not about a device.
    bug = RuntimeError("index 7 is out of bounds for dimension 0 with size 7")

    def crashes():
        raise bug

    with pytest.raises(RuntimeError) as raised:
        run_on(torch.device("cuda"), crashes)
    assert raised.value is bug


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"run_on: device must be a torch\.device or a string .*got int"):
        run_on(0, lambda: None)
    with pytest.raises(TypeError, match=r"run_on: run must be a function taking no arguments, got Tensor"):
        run_on("meta", torch.zeros(1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_results_are_on_the_plain_cuda_device():
    # Catches: comparing whole devices, torch.device("cuda") != torch.device("cuda:0"), which would reject
    # every right answer on a GPU.
    x = torch.ones(3, device="cuda")
    assert run_on(torch.device("cuda"), lambda: x * 2) is not None
    with pytest.raises(AssertionError, match=r"on cuda inputs a result is on another device"):
        run_on(torch.device("cuda"), lambda: x.cpu())


@pytest.mark.parametrize("copies", [
    lambda: torch.zeros(3, device="meta").cpu(),  # a result brought back to the CPU
    lambda: torch.zeros(3).copy_(torch.ones(3, device="meta")),  # written into a tensor made on the CPU
    lambda: torch.zeros(3, device="meta").tolist(),
])
def test_a_copy_to_the_cpu_on_meta_is_named(copies):
    # Catches: meta's "Cannot copy out of meta tensor" tolerated like .item(), which passes an answer that
    # moves its tensors to the CPU (on a GPU its result comes back there); and reads_data ignored.
    with pytest.raises(AssertionError, match=r"keep every tensor on labels\.device: on meta inputs your answer copies "
                                             r"one to the CPU"):
        run_on("meta", copies, create_on=CREATE_ON)
    assert run_on("meta", copies, create_on=CREATE_ON, reads_data=True) is None


def test_numpy_of_a_tensor_on_the_device_is_named():
    # Catches: .numpy()'s TypeError reaching the reader as torch's own traceback; and other TypeErrors swallowed.
    with pytest.raises(AssertionError, match=r"keep every tensor on labels\.device, and compute with torch: on meta "
                                             r"inputs, can't convert meta device type tensor to numpy"):
        run_on("meta", lambda: torch.zeros(3, device="meta").numpy(), create_on=CREATE_ON)
    with pytest.raises(TypeError, match="unsupported operand"):
        run_on("meta", lambda: torch.zeros(3, device="meta") + "text")
