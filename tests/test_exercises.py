"""Exercises a learner can trust: each check accepts the solution and rejects a named wrong answer.

The checks are taken from the notebooks themselves (the cell that defines `check_exercise_N`), run in
a namespace prepared by the chapter's import cell, against the chapter's folded solution and against
the plausible wrong answers below. A check that let one of them through would make a learner believe
a wrong answer.
"""

from __future__ import annotations

import ast
import re

import pytest
from torch.autograd.gradcheck import GradcheckError

from conftest import cell_source, chapter_notebooks, load_notebook

# Chapters whose exercises must each name a wrong answer here (the others are added as they adopt the form).
COVERED = ("01_", "02_", "03_", "04_", "05_", "06_", "07_", "90_")

# (notebook stem, exercise) -> [(what is wrong, source defining the answer's name, exception, message regex)]
WRONG_ANSWERS = {
    ("01_custom_loss", 1): [
        (
            "returns the reference, which uses clamp",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    return ep.reference_triplet_hinge_loss(anchor, positive, negative, t1=t1, t2=t2, beta=beta)\n",
            AssertionError,
            r"use F\.relu instead of \['clamp'\]",
        ),
        (
            "uses relu but forgets the constants t1 and beta * t2",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + beta * F.relu(d_ap - t2)).mean()\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("01_custom_loss", 2): [
        (
            "strict > where clamp passes the gradient at the boundary",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean().item(), (d_ap > t2).float().mean().item()\n",
            AssertionError,
            r"push fraction is off",
        ),
        (
            "returns 0-d tensors instead of Python floats (no .item())",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an >= t1).float().mean(), (d_ap >= t2).float().mean()\n",
            AssertionError,
            r"return two Python floats \(\.item\(\)\), got Tensor and Tensor",
        ),
    ],
    ("01_custom_loss", 3): [
        (
            "pairs an anchor with itself (no i != j)",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    return (same[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"0 missing, 32 invalid",
        ),
    ],
    ("02_numpy_scipy_function", 1): [
        (
            "always returns float64 (torch.from_numpy without like=)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = torch.from_numpy(scipy.special.lambertw(x.detach().numpy()).real)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"float32 input gave torch\.float64",
        ),
        (
            "saves the input and calls scipy again in backward (right gradient, output not saved)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"save the output w with ctx\.save_for_backward, not x",
        ),
    ],
    ("02_numpy_scipy_function", 2): [
        (
            "backward in gaussian_filter1d's default mode, reflect",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1)\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            GradcheckError,
            r"Jacobian mismatch",
        ),
    ],
    ("02_numpy_scipy_function", 3): [
        (
            "softmax without the incoming gradient",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return torch.exp(x - lse[..., None])\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("03_handwritten_backward", 1): [
        (
            "the buggy sigmoid(-x) left as it is",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(-x)\n",
            GradcheckError,
            r"Jacobian mismatch",
        ),
        (
            "right first derivative, but @once_differentiable",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x)\n",
            GradcheckError,  # raised by the check's gradgradcheck: analytical second derivative 0
            r"Jacobian mismatch",
        ),
    ],
    ("03_handwritten_backward", 2): [
        (
            "divides by the norm and forgets the projection term",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(norm)\n"
            "        return x / norm\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (norm,) = ctx.saved_tensors\n"
            "        return grad_output / norm\n",
            GradcheckError,
            r"Jacobian mismatch",
        ),
    ],
    ("03_handwritten_backward", 3): [
        (
            "the classic style, forward(ctx, x)",
            "FuncExp = fn.Exp\n",
            RuntimeError,
            r"must override the setup_context staticmethod",
        ),
        (
            "setup_context style without a vmap rule",
            "class FuncExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            RuntimeError,
            r"vmap",
        ),
    ],
    ("04_cpp_extension", 1): [
        (
            "counts the fused design like the two-pass one (9 B D)",
            "def minimum_bytes(batch, dim, element_size, design):\n"
            "    numbers = {\"forward\": 3, \"two-pass\": 9, \"fused\": 9}[design] * batch * dim\n"
            "    return numbers * element_size\n",
            AssertionError,
            r"fused",
        ),
    ],
    ("04_cpp_extension", 2): [
        (
            "never trains: returns the two starting weights",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for _ in range(2):\n"
            "        torch.manual_seed(0)\n"
            "        finals.append(torch.nn.Linear(16, 4).weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"did it train\?",
        ),
        (
            "trains with the reference twice: the C++ operator never runs",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for criterion in (ep.TripletHingeLoss(-1.0, 0.05, 0.1), ep.TripletHingeLoss(-1.0, 0.05, 0.1)):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            criterion(*(net(t) for t in batch)).backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"was the C\+\+ operator used\?",
        ),
    ],
    ("04_cpp_extension", 3): [
        (
            "returns the first row's gradient instead of the sum over rows",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an >= t1).to(anchor.dtype)\n"
            "    pull = (d_ap >= t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row[:1]\n",
            AssertionError,
            r"not close",
        ),
        (
            "drops the pull mask (as if d_ap >= t2 always held)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an >= t1).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"not close",
        ),
    ],
    ("04_cpp_extension", 4): [
        (
            "says grad_in_forward always moves 6 B D (ignores the scaling)",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\":\n"
            "        return 9 if backward else 3\n"
            "    return 6\n",
            AssertionError,
            r"scaling reads and writes the three saved gradients",
        ),
        (
            "says a forward without backward costs 3 B D under grad_in_forward",
            "def numbers_moved(design, backward, grad_output_is_one=True):\n"
            "    if design == \"two-pass\" or not backward:\n"
            "        return 9 if backward else 3\n"
            "    return 6 if grad_output_is_one else 12\n",
            AssertionError,
            r"the forward still writes three gradients",
        ),
    ],
    ("05_cuda_kernel", 1): [
        (
            "no cap on the grid (2^37 blocks for 2^40 rows, past gridDim.x's limit)",
            "def launch_shape(batch):\n    return (batch + 7) // 8, 256\n",
            AssertionError,
            r"capped at 2\^20 blocks",
        ),
    ],
    ("05_cuda_kernel", 2): [
        (
            "stops one exchange early (offsets 16, 8, 4, 2)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[i ^ offset] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"every lane should hold the sum",
        ),
        (
            "rotates (lane i + offset) instead of exchanging (lane i XOR offset)",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    lanes = list(values)\n"
            "    for offset in offsets:\n"
            "        lanes = [lanes[i] + lanes[(i + offset) % 32] for i in range(32)]\n"
            "    return lanes\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
        (
            "skips the exchanges and hands every lane the total",
            "def butterfly_sum(values, offsets=(16, 8, 4, 2, 1)):\n"
            "    return [sum(values)] * 32\n",
            AssertionError,
            r"values\[i\] \+ values\[i \^ 1\]",
        ),
    ],
    ("05_cuda_kernel", 3): [
        (
            "counts only the inputs (3 B D numbers, not 9 B D)",
            "def floor_milliseconds(batch, dim, bandwidth_gb_per_s, element_size=4):\n"
            "    return 3 * batch * dim * element_size / (bandwidth_gb_per_s * 1e9) * 1e3\n",
            AssertionError,
            r"take 1 ms",
        ),
    ],
    ("06_triton_kernel", 1): [
        (
            "no mask on the last block (reads past the end of each row)",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols * col_stride)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"read past the end of a row",
        ),
        (
            "one block as wide as the row (next_power_of_2(dim)), no loop",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, BLOCK)\n"
            "    mask = cols < dim\n"
            "    x = tl.load(x_ptr + row * row_stride + cols.to(tl.int64) * col_stride, mask=mask, other=0.0)\n"
            "    tl.store(out_ptr + row, tl.sum(x * x, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](\n"
            "        x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=triton.next_power_of_2(x.shape[1])\n"
            "    )\n"
            "    return out\n",
            AssertionError,
            r"launched with BLOCK=64: loop over the row 16 columns at a time",
        ),
        (
            "plain torch, no kernel",
            "def squared_norms(x):\n    return x.pow(2).sum(1)\n",
            AssertionError,
            r"no Triton kernel was launched",
        ),
        (
            "copies the view with .contiguous() and ignores col_stride",
            "@triton.jit\n"
            "def squared_norms_kernel(x_ptr, out_ptr, dim, row_stride, col_stride, BLOCK: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    total = tl.zeros([BLOCK], dtype=tl.float32)\n"
            "    for start in range(0, dim, BLOCK):\n"
            "        cols = start + tl.arange(0, BLOCK)\n"
            "        x = tl.load(x_ptr + row * row_stride + cols, mask=cols < dim, other=0.0)\n"
            "        total += x * x\n"
            "    tl.store(out_ptr + row, tl.sum(total, axis=0))\n"
            "\n"
            "def squared_norms(x):\n"
            "    x = x.contiguous()\n"
            "    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)\n"
            "    squared_norms_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), BLOCK=16)\n"
            "    return out\n",
            AssertionError,
            r"the kernel received a copy of the view",
        ),
    ],
    ("06_triton_kernel", 2): [
        (
            "block - dim % block (a full last block is not idle)",
            "def idle_lanes(dim, block):\n    return block - dim % block\n",
            AssertionError,
            r"a full last block has no idle lanes",
        ),
    ],
    ("07_involution", 1): [
        (
            "forgets the dilation",
            "def output_shape(height, width, kernel, stride, padding, dilation):\n"
            "    return tuple((n + 2 * p - (k - 1) - 1) // s + 1\n"
            "                 for n, k, s, p in zip((height, width), kernel, stride, padding))\n",
            AssertionError,
            r"dilation\?",
        ),
    ],
    ("07_involution", 2): [
        (
            "sums over every channel, not the channels of each group",
            "def weight_gradient(x, grad_out, groups, kernel, padding):\n"
            "    b, c = x.shape[:2]\n"
            "    out_h, out_w = grad_out.shape[2:]\n"
            "    windows = F.unfold(x, kernel, padding=padding).view(b, c, kernel[0] * kernel[1], out_h, out_w)\n"
            "    total = (windows * grad_out.view(b, c, 1, out_h, out_w)).sum(dim=1)\n"
            "    return total[:, None].expand(b, groups, -1, -1, -1).reshape(b, groups, *kernel, out_h, out_w)\n",
            AssertionError,
            r"sum over the channels of each group only",
        ),
    ],
    ("07_involution", 3): [
        (
            "counts the output, not the K x K windows",
            "def unfold_mebibytes(batch, channels, size, kernel, dtype_bytes=4):\n"
            "    return batch * channels * size * size * dtype_bytes / 2**20\n",
            AssertionError,
            r"count the windows",
        ),
    ],
    ("90_appendix_allocator", 1): [
        (
            "counts elements instead of bytes",
            "def pages(tensor):\n    return -(-tensor.numel() // 4096)\n",
            AssertionError,
            r"expected 2048 pages, got 512",
        ),
    ],
}

CHECK = re.compile(r"^def (check_exercise_(\d+))\(", re.MULTILINE)


def covered_chapters():
    return [p for p in chapter_notebooks() if p.name.startswith(COVERED)]


def exercises(path):
    """(number, solution cell, check cell) for each exercise of a notebook."""
    cells = load_notebook(path)["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code" and (match := CHECK.search(cell_source(cell))):
            found.append((int(match.group(2)), cells[index - 1], cell))
    return found


def namespace(path):
    """The chapter's imports (the cell that imports the book's package), run in a fresh namespace."""
    cells = load_notebook(path)["cells"]
    imports = next(
        cell_source(c) for c in cells
        if c["cell_type"] == "code" and "import extending_pytorch as ep" in cell_source(c)
    )
    names = {"__name__": "exercise_check"}
    exec(imports, names)
    # Wrong answers below also use these.
    exec(
        "from torch.autograd import Function\n"
        "from torch.autograd.function import once_differentiable\n"
        "from torch.autograd.gradcheck import GradcheckError\n",
        names,
    )
    return names


def load_check(path, number, names):
    """Define check_exercise_<number> (and its helpers) from the notebook; returns (check, answer name)."""
    check_cell = next(c for n, _, c in exercises(path) if n == number)
    module = ast.parse(cell_source(check_cell))
    *definitions, call = module.body
    assert isinstance(call, ast.Expr) and ast.unparse(call.value.func) == f"check_exercise_{number}", (
        "a check cell ends by calling its check on the solution"
    )
    exec(compile(ast.Module(definitions, type_ignores=[]), str(path), "exec"), names)
    return names[f"check_exercise_{number}"], ast.unparse(call.value.args[0])


def exercise_ids():
    return [
        (path, number)
        for path in covered_chapters()
        for number, _, _ in exercises(path)
    ]


WRONG = [
    pytest.param(stem, number, wrong, id=f"{stem}-ex{number}-{wrong[0]}")
    for (stem, number), answers in WRONG_ANSWERS.items()
    for wrong in answers
]


def path_of(stem):
    (path,) = [p for p in chapter_notebooks() if p.stem == stem]
    return path


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_every_exercise_names_a_wrong_answer_its_check_rejects(path, number):
    assert WRONG_ANSWERS.get((path.stem, number)), (
        f"{path.name}, exercise {number}: name a plausible wrong answer in tests/test_exercises.py"
    )


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_solution_is_folded_on_the_site_in_jupyter_and_on_colab(path, number):
    solution = next(s for n, s, _ in exercises(path) if n == number)
    metadata = solution["metadata"]
    assert "hide-input" in metadata.get("tags", []), "the site folds cells tagged hide-input"
    assert metadata.get("jupyter", {}).get("source_hidden") is True, "Jupyter folds source_hidden cells"
    assert metadata.get("cellView") == "form", "Colab shows a form instead of the code"
    assert cell_source(solution).startswith("# @title "), "Colab's form view needs a # @title line"


@pytest.mark.parametrize(
    "path, number", exercise_ids(), ids=[f"{p.stem}-ex{n}" for p, n in exercise_ids()]
)
def test_check_accepts_the_solution(path, number, capsys):
    names = namespace(path)
    check, answer = load_check(path, number, names)
    solution = next(s for n, s, _ in exercises(path) if n == number)
    exec(cell_source(solution), names)
    check(names[answer])
    assert f"Exercise {number} passed" in capsys.readouterr().out


@pytest.mark.parametrize("stem, number, wrong", WRONG)
def test_check_rejects_the_named_wrong_answer(stem, number, wrong):
    what, source, error, message = wrong
    path = path_of(stem)
    names = namespace(path)
    check, answer = load_check(path, number, names)
    exec(source, names)
    with pytest.raises(error, match=message):
        check(names[answer])
