"""Run CUDA kernels on the CPU: the SIMT emulator (no GPU needed).

The emulator (extensions/csrc/simt/simt.h) compiles a kernel's .cu source,
unchanged, with g++: each thread of a block is a fiber, each collective
(__syncthreads, __syncwarp, shuffles, votes) waits until every thread it names
has arrived, and a broken rule is reported, never a hang: a lane that exits
or goes elsewhere while others wait for it, a shuffle that reads a lane
outside its mask, a barrier not every thread reaches, an invalid launch. Each
report names the .cu file:line, blockIdx and threadIdx, and arrives here as a
RuntimeError. Outputs are filled with a signalling-NaN pattern before a
launch, and an element a kernel left unwritten is reported too.

Three build modes:

- ``"fast"``: -O2, the emulator's own checks.
- ``"memory"``: -fsanitize=address,undefined: out-of-bounds reads and writes,
  misaligned (e.g. 16-byte vector) loads, other undefined behaviour.
- ``"races"``: -fsanitize=thread, with each GPU thread a ThreadSanitizer
  fiber: unsynchronised accesses of two threads to the same memory (a missing
  __syncthreads, two blocks writing one element).

and four schedules: the order in which blocks, and threads within a block,
run until their next collective: ``"forward"``, ``"reverse"`` and
``"random"`` (with ``seed``), so that order-dependent bugs show, in which
``__activemask()`` is a rendezvous (the lanes of the warp that reach that call
together, once no other lane can get there); and ``"independent"``: forward
order, with ``__activemask()`` returning only the calling lane, an outcome a
GPU since Volta allows wherever a warp may have diverged, so that a shuffle
over a mask read from ``__activemask()`` that reads another lane is reported.

Every emulated call runs in a worker process, one per mode, started at the
first call: a sanitizer's runtime must be loaded before anything else
(LD_PRELOAD), and a kernel that crashes takes down the worker, not your
Python session; the crash report comes back as a RuntimeError. The worker
imports torch only for the book's kernels and for a source that includes
torch's headers: a ``load_source`` launch gets its tensors as memory and
addresses (a fresh worker starts in a fraction of a second, also under a
sanitizer).

The API:

- ``load_source(source, mode="fast")``: build your own .cu code (a string or
  a path); returns a module whose ``__global__`` functions launch like CUDA's
  ``kernel<<<grid, block>>>(args)``: ``module.kernel[grid, block](args)``,
  with CPU tensors for pointer parameters; an extension's whole .cu file
  (torch's headers, host code) builds too, its host functions on ``at::Tensor``
  called as ``module.host.name(args)`` through a CPU shim (source.HostFunctions).
- ``triplet_hinge_loss``, ``triplet_forward``, ``triplet_backward``,
  ``involution``, ``involution_forward``, ``involution_backward``: the book's
  kernels (csrc/cuda/triplet.cu, involution.cu) through a binding that makes
  the same launch calls as the CUDA binding; ``triplet_forward_with_distances``,
  ``triplet_backward_from_distances``, ``triplet_forward_with_grads``,
  ``triplet_takes_one_pass``, ``triplet_scale_gradients``: its launches that
  move fewer bytes (chapter 5, section 9).
- ``traffic()``: ``with emulator.traffic() as t:`` counts the global-memory
  bytes (per tensor, per launch) and 32-byte sectors of the emulated launches
  inside, and of Triton kernels run by Triton's interpreter (traffic.py).
- ``available()`` / ``cuda_include_dir()``: whether the headers it needs are
  here (else calls raise ``EmulatorUnavailable``), and where;
  ``cuda_include_description()`` says which, in words (no machine path), and
  why the candidates before it were skipped.

Honest limits. g++ is not nvcc: floating-point results can differ in the last
bits (no FMA contraction; __CUDA_ARCH__ is undefined, so code under
``#ifdef __CUDA_ARCH__`` takes its host branch). There is no memory model
(threads switch only at collectives, so a missing __syncwarp or volatile can
go unnoticed outside "races" mode), no timing, registers or occupancy, no
tensor cores, cp.async or TMA. The emulator proves logic and memory safety,
never speed; ``traffic()`` counts the bytes a kernel moves, and the sectors
its warps touch (a model of coalescing, without caches). It is also stricter than a GPU in places: lanes of
a warp must meet at the same collective call (Volta and later tolerate
different call sites with the same mask), and a thread that has exited may not
be waited for. ``load_source(..., gpu_like=True)`` relaxes what hardware tolerates:
threads that exit before ``__syncthreads()``, and full masks on partial warps.

The package's files name its parts: ``toolchain`` (g++, CUDA's headers, the
build modes and their sanitizer runtimes), ``signatures`` (the kernel
signatures of a .cu source, and the launch glue built from them),
``worker`` (the worker processes and how tensors reach them), ``book`` (the
book's kernels), ``source`` (``load_source``: a reader's kernels), ``poison``
(the pattern outputs hold before a launch) and ``traffic`` (the counter).
"""

from extending_pytorch.emulator.book import (
    involution,
    involution_backward,
    involution_forward,
    triplet_backward,
    triplet_backward_from_distances,
    triplet_forward,
    triplet_forward_with_distances,
    triplet_forward_with_grads,
    triplet_hinge_loss,
    triplet_scale_gradients,
    triplet_takes_one_pass,
)
from extending_pytorch.emulator.signatures import Binding, KernelSignature, Parameter, parse_kernels
from extending_pytorch.emulator.source import EmulatedModule, Kernel, TemplateKernel, load_source
from extending_pytorch.emulator.toolchain import (
    BUILD_ROOT,
    CSRC_ENV,
    DEFAULT_TIMEOUT,
    MODES,
    SCHEDULES,
    SIMT_DIR,
    EmulatorUnavailable,
    available,
    cuda_include_description,
    cuda_include_dir,
)
from extending_pytorch.emulator.traffic import BufferTraffic, LaunchTraffic, Traffic, traffic
from extending_pytorch.emulator.worker import shutdown

__all__ = [
    "MODES",
    "SCHEDULES",
    "EmulatorUnavailable",
    "available",
    "cuda_include_dir",
    "cuda_include_description",
    "load_source",
    "Binding",
    "EmulatedModule",
    "Kernel",
    "TemplateKernel",
    "parse_kernels",
    "triplet_hinge_loss",
    "triplet_forward",
    "triplet_backward",
    "triplet_forward_with_distances",
    "triplet_backward_from_distances",
    "triplet_forward_with_grads",
    "triplet_takes_one_pass",
    "triplet_scale_gradients",
    "involution",
    "involution_forward",
    "involution_backward",
    "shutdown",
    "traffic",
    "Traffic",
    "LaunchTraffic",
    "BufferTraffic",
]

