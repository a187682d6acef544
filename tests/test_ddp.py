"""Chapter 7: chapter 4's operator inside a DistributedDataParallel training step.

Two processes (gloo backend, this CPU) each take half of a batch; DDP
averages their gradients (one all-reduce per gradient bucket) during
backward. Since the loss is a mean over triplets and the halves are equal,
the averaged gradients must equal those of one process on the whole batch,
computed with chapter 1's reference loss. The operator itself knows nothing
of processes: what this checks is that its autograd formulas, the plain one
and grad_in_forward's, compose with DDP's gradient hooks.
"""

from __future__ import annotations

import pathlib
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SETTINGS = dict(t1=-0.5, t2=0.2, beta=0.3)
WORLD = 2
BATCH = 64
TIMEOUT_S = 120


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8))


def make_batch():
    generator = torch.Generator().manual_seed(1)
    return [torch.randn(BATCH, 12, generator=generator) for _ in range(3)]


VARIANTS = ("plain", "grad_in_forward")


def step(model, anchor, positive, negative, variant):
    from extending_pytorch.ops import triplet_hinge_loss
    from extending_pytorch.reference import reference_triplet_hinge_loss

    embeddings = (model(anchor), model(positive), model(negative))
    if variant == "reference":
        loss = reference_triplet_hinge_loss(*embeddings, **SETTINGS)
    else:
        loss = triplet_hinge_loss(
            *embeddings, **SETTINGS, grad_in_forward=variant == "grad_in_forward"
        )
    loss.backward()
    return loss.detach()


def worker(rank: int, store: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=WORLD)
    try:
        results = {}
        shard = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)
        for variant in VARIANTS:  # one process group, a fresh model each
            model = torch.nn.parallel.DistributedDataParallel(make_model())
            loss = step(model, *(x[shard] for x in make_batch()), variant)
            grads = {name: p.grad for name, p in model.module.named_parameters()}
            results[variant] = {"loss": loss, "grads": grads}
        torch.save(results, pathlib.Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ddp(tmp_path):
    context = mp.spawn(worker, args=(str(tmp_path / "store"), str(tmp_path)),
                       nprocs=WORLD, join=False)
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                process.terminate()
            pytest.fail(f"DDP step did not finish in {TIMEOUT_S} s")
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]


def test_ddp_gradients_equal_one_process_on_the_whole_batch(tmp_path):
    # Catches gradients that DDP does not see (an operator whose backward
    # bypassed autograd would leave .grad unset or unsynchronised), a wrong
    # mean scale (per-shard B instead of the whole batch would double them),
    # ranks that disagree after the all-reduce, and (since the expectation
    # comes from the reference, not from the operator) a wrong operator.
    # grad_in_forward is included: its saved gradients must reach DDP's
    # hooks like the plain backward's.
    results = run_ddp(tmp_path)
    model = make_model()
    whole_loss = step(model, *make_batch(), "reference")
    expected = dict(model.named_parameters())
    for variant in VARIANTS:
        shard_losses = torch.stack([r[variant]["loss"] for r in results])
        torch.testing.assert_close(shard_losses.mean(), whole_loss, msg=variant)
        for result in results:
            assert result[variant]["grads"].keys() == expected.keys()
            for name, grad in result[variant]["grads"].items():
                torch.testing.assert_close(grad, expected[name].grad, msg=f"{variant} {name}")
