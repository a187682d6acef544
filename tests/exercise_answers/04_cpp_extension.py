"""Plausible wrong answers to the exercises of notebooks/04_cpp_extension.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)];
RIGHT_ANSWERS, at the end, lists right answers other than the solution that each check must accept.
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
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
        (
            "uses the C++ loss in both runs: nothing is compared with the reference",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for criterion in (ops.CppTripletHingeLoss(-1.0, 0.05, 0.1), ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)):\n"
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
            r"the C\+\+ operator ran 40 times: use it in one run only",
        ),
        (
            "trains once, with the C++ loss, and returns that run's weights twice",
            "def train_twice(steps=20):\n"
            "    criterion = ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)\n"
            "    torch.manual_seed(0)\n"
            "    net = torch.nn.Linear(16, 4)\n"
            "    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "    data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "    for batch in data:\n"
            "        optimizer.zero_grad()\n"
            "        criterion(*(net(t) for t in batch)).backward()\n"
            "        optimizer.step()\n"
            "    w = net.weight.detach()\n"
            "    return [w, w]\n",
            AssertionError,
            r"chapter 1's TripletHingeLoss ran 0 times in 20 steps",
        ),
        (
            "trains both, but returns the C++ run's weights in both places",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for criterion in (ep.TripletHingeLoss(-1.0, 0.05, 0.1), ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            criterion(*(net(t) for t in batch)).backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return [finals[1], finals[1]]\n",
            AssertionError,
            r"the two results are the same tensor",
        ),
        (
            "seeds only once: the second net starts from other weights",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    torch.manual_seed(0)\n"
            "    for criterion in (ep.TripletHingeLoss(-1.0, 0.05, 0.1), ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)):\n"
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
            r"the runs end apart: same initial weights",
        ),
        (
            "logs the C++ loss on detached embeddings, but trains the second run with the reference (passed the old check)",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for use_cpp in (False, True):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            embeddings = [net(t) for t in batch]\n"
            "            loss = ep.TripletHingeLoss(-1.0, 0.05, 0.1)(*embeddings)\n"
            "            if use_cpp:  # the C++ value, for the log only\n"
            "                logged = ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)(*(e.detach() for e in embeddings))\n"
            "            loss.backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"the C\+\+ operator's backward ran 0 times in 20 steps: train through the C\+\+ loss",
        ),
        (
            "returns the runs in the wrong order, the C++ run's first (passed the old check)",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for criterion in (ep.TripletHingeLoss(-1.0, 0.05, 0.1), ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            criterion(*(net(t) for t in batch)).backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals[::-1]\n",
            AssertionError,
            r"return the final weights of the net chapter 1's TripletHingeLoss trained first",
        ),
        (
            "the second run trains the mean of both losses: the reference's gradient reaches its net too (passed the old check)",
            "def train_twice(steps=20):\n"
            "    finals = []\n"
            "    for use_cpp in (False, True):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            embeddings = [net(t) for t in batch]\n"
            "            loss = ep.TripletHingeLoss(-1.0, 0.05, 0.1)(*embeddings)\n"
            "            if use_cpp:\n"
            "                loss = (loss + ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)(*embeddings)) / 2\n"
            "            loss.backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals\n",
            AssertionError,
            r"the gradients of both losses reached one net",
        ),
    ],
    2: [
        (
            'the row weights moved to the CPU (.cpu()): on a GPU they meet the CUDA rows',
            'def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n'
            '    positive = prototype.expand_as(anchor)\n'
            '    d_ap = ep.squared_distance(anchor, positive)\n'
            '    d_an = ep.squared_distance(anchor, negative)\n'
            '    push = (d_ap - d_an > t1).to(anchor.dtype)\n'
            '    pull = (d_ap > t2).to(anchor.dtype)\n'
            '    g = 1.0 / anchor.shape[0]\n'
            '    w = (push + beta * pull).cpu()\n'
            '    return (-2 * g * w[:, None] * (anchor - positive)).sum(0, keepdim=True)\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
        (
            "sums the rows into a buffer made with torch.zeros(1, D), on the CPU whatever the inputs' device",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    total = torch.zeros(1, anchor.shape[1], dtype=anchor.dtype)\n"
            "    total += (-2 / anchor.shape[0] * (push + beta * pull)[:, None] * (anchor - positive)).sum(0)\n"
            "    return total\n",
            AssertionError,
            # on meta the CPU buffer's += runs, and the gradient comes back on the CPU; on a GPU += raises
            r"on (meta|cuda) inputs.*create every tensor on the inputs' device \(device=anchor\.device, "
            r"or torch\.zeros_like\(prototype\)\)|create every tensor on the inputs' device .*: on cuda inputs",
        ),
        (
            "returns the first row's gradient instead of the sum over rows",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row[:1]\n",
            AssertionError,
            r"not close",
        ),
        (
            "drops the pull mask (as if d_ap > t2 always held)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"not close",
        ),
        (
            "the sum's gradient: forgets that the mean divides by B",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"the prototype's gradient is off: .*g_i = 1/B for the mean.*\n.*not close",
        ),
        (
            "the sign of dL/da: +2 g (...)(a - p) instead of -2 g (...)(a - p)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = 2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"the prototype's gradient is off.*\n.*not close",
        ),
        (
            "sums over the rows without keepdim: shape (D,), not the prototype's (1, D)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0)\n",
            AssertionError,
            r"the gradient has the prototype's shape \(1, 6\), got \(6,\)",
        ),
        (
            "the chapter's default thresholds, not the t1 and t2 passed in",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > -1.0).to(anchor.dtype)\n"
            "    pull = (d_ap > 0.5).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"the prototype's gradient is off.*\n.*not close",
        ),
        (
            "beta hard-coded to 0.5, its default, and the argument ignored (passed the old check)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an > t1).to(anchor.dtype)\n"
            "    pull = (d_ap > t2).to(anchor.dtype)\n"
            "    g = 1.0 / anchor.shape[0]\n"
            "    per_row = -2 * g * (push + 0.5 * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"the prototype's gradient is off: .*\(here B=12, D=6, torch\.float64, .*beta=0\.3\)\n.*not close",
        ),
        (
            "masks written with >=: slope 1 on the kinks, where the loss's gradient is 0 (passed the old check)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    positive = prototype.expand_as(anchor)\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an >= t1).to(anchor.dtype)\n"
            "    pull = (d_ap >= t2).to(anchor.dtype)\n"
            "    per_row = -2 / anchor.shape[0] * (push + beta * pull)[:, None] * (anchor - positive)\n"
            "    return per_row.sum(dim=0, keepdim=True)\n",
            AssertionError,
            r"the prototype's gradient is off: .*0 on their kinks \(here B=4, D=2, torch\.float64, t1=-2, t2=4, beta=0\.7\)\n.*not close",
        ),
        (
            "lets autograd compute it through the operator instead of summing the rows by hand (passed the old check)",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    p = prototype.clone().requires_grad_()\n"
            "    loss = ops.triplet_hinge_loss(anchor, p.expand_as(anchor), negative, t1=t1, t2=t2, beta=beta)\n"
            "    return torch.autograd.grad(loss, p)[0]\n",
            AssertionError,
            r"compute the gradient by hand, from the per-row formula: the check calls your function under torch\.no_grad\(\)",
        ),
    ],
    3: [
        (
            "the distance, not its square: a square root too many",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) { return (x - y).square().sum(1).sqrt(); }\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"float32: the values are off: d_i is the sum over j of \(x_ij - y_ij\)\^2, summed in torch\.float32",
        ),
        (
            "saves a temporary: subtracts and squares in x's memory (the schema says x is not mutated)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) { return x.sub_(y).square_().sum(1); }\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"opcheck, \(1, 1\) float32: .*'test_schema': 'Argument x is not defined as mutable but was mutated'.*"
            r"\nthe schema's `-> Tensor` promises a new tensor",
        ),
        (
            "indexes data_ptr() as if contiguous (row * D + j), without .contiguous()",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            "  const int64_t rows = x.size(0), dim = x.size(1);\n"
            "  at::Tensor out = at::empty({rows}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const scalar_t* xs = x.data_ptr<scalar_t>();\n"
            "    const scalar_t* ys = y.data_ptr<scalar_t>();\n"
            "    scalar_t* d = out.data_ptr<scalar_t>();\n"
            "    for (int64_t i = 0; i < rows; ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < dim; ++j) {\n"
            "        const scalar_t diff = xs[i * dim + j] - ys[i * dim + j];\n"
            "        total += diff * diff;\n"
            "      }\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x transposed, strides \(1, 33\): the values are off; index with the strides, or call \.contiguous\(\)",
        ),
        (
            "checks dims and dtypes but not that y has the shape of x (reads only x's rows and columns of y)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2 && y.dim() == 2, "squared_distance: x and y must be 2-D");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,\n"
            '              "squared_distance: x must be float32 or float64");\n'
            "  const int64_t rows = x.size(0), dim = x.size(1);\n"
            "  at::Tensor out = at::empty({rows}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    for (int64_t i = 0; i < rows; ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < dim; ++j) {\n"
            "        total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      }\n"
            "      out.data_ptr<scalar_t>()[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.randn\(3, 4\), y = torch\.randn\(5, 6\) raised no error: reject it with a TORCH_CHECK naming y",
        ),
        (
            "ATen's arithmetic with no shape check: its broadcasting error does not name y",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D");\n'
            '  TORCH_CHECK(x.is_floating_point(), "squared_distance: x must be floating point");\n'
            "  return (x - y).square().sum(1);\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"y = torch\.randn\(5, 6\) raised RuntimeError\('The size of tensor a \(4\) must match the size of tensor b "
            r"\(6\).*raise it with a TORCH_CHECK naming y",
        ),
        (
            "no dtype check of its own: AT_DISPATCH_FLOATING_TYPES rejects integers, in words that do not name x",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D, got ", x.dim());\n'
            '  TORCH_CHECK(y.sizes() == x.sizes(), "squared_distance: y must have the shape of x");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  at::Tensor out = at::empty({x.size(0)}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    auto d = out.accessor<scalar_t, 1>();\n"
            "    for (int64_t i = 0; i < x.size(0); ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < x.size(1); ++j) total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.arange\(12\)\.view\(3, 4\), y = .* raised NotImplementedError\(.*not implemented for .*Long.*raise it with a TORCH_CHECK naming x",
        ),
        (
            "x.is_floating_point() for the dtype check: float16 passes it, and AT_DISPATCH_FLOATING_TYPES's error does not name x (passed the old check)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D, got ", x.dim());\n'
            '  TORCH_CHECK(y.sizes() == x.sizes(), "squared_distance: y must have the shape of x");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            '  TORCH_CHECK(x.is_floating_point(), "squared_distance: x must be floating point");\n'
            "  at::Tensor out = at::empty({x.size(0)}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    auto d = out.accessor<scalar_t, 1>();\n"
            "    for (int64_t i = 0; i < x.size(0); ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < x.size(1); ++j) total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.randn\(3, 4, dtype=torch\.float16\), .* raised NotImplementedError\(.*Half.*raise it with a TORCH_CHECK naming x",
        ),
        (
            "checks that y has as many rows as x, not its columns (passed the old check)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D, got ", x.dim());\n'
            '  TORCH_CHECK(y.dim() == 2 && y.size(0) == x.size(0), "squared_distance: y must have the rows of x");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,\n"
            '              "squared_distance: x must be float32 or float64");\n'
            "  at::Tensor out = at::empty({x.size(0)}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    auto d = out.accessor<scalar_t, 1>();\n"
            "    for (int64_t i = 0; i < x.size(0); ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < x.size(1); ++j) total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.randn\(3, 4\), y = torch\.randn\(3, 6\) raised no error: reject it with a TORCH_CHECK naming y",
        ),
        (
            "one combined check whose message names both x and y, whichever is at fault (passed the old check)",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            "  TORCH_CHECK(x.dim() == 2 && y.sizes() == x.sizes() && y.scalar_type() == x.scalar_type() &&\n"
            "              (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble),\n"
            '              "squared_distance: bad input x or y");\n'
            "  at::Tensor out = at::empty({x.size(0)}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    auto d = out.accessor<scalar_t, 1>();\n"
            "    for (int64_t i = 0; i < x.size(0); ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < x.size(1); ++j) total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"x = torch\.randn\(12\), y = torch\.randn\(12\) raised RuntimeError\('squared_distance: bad input x or y'\): "
            r"x alone is at fault here; name x, not y",
        ),
        (
            "accumulates each row in a float, whatever scalar_t is: float64 inputs lose digits",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x, const at::Tensor& y) {\n"
            '  TORCH_CHECK(x.dim() == 2, "squared_distance: x must be 2-D, got ", x.dim());\n'
            '  TORCH_CHECK(y.sizes() == x.sizes(), "squared_distance: y must have the shape of x");\n'
            '  TORCH_CHECK(y.scalar_type() == x.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,\n"
            '              "squared_distance: x must be float32 or float64");\n'
            "  at::Tensor out = at::empty({x.size(0)}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const auto xs = x.accessor<scalar_t, 2>();\n"
            "    const auto ys = y.accessor<scalar_t, 2>();\n"
            "    auto d = out.accessor<scalar_t, 1>();\n"
            "    for (int64_t i = 0; i < x.size(0); ++i) {\n"
            "      float total = 0;\n"
            "      for (int64_t j = 0; j < x.size(1); ++j) total += (xs[i][j] - ys[i][j]) * (xs[i][j] - ys[i][j]);\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
            AssertionError,
            r"torch\.float64: the values are off: d_i is the sum over j of \(x_ij - y_ij\)\^2, summed in torch\.float64",
        ),
    ],
}

# Right answers other than the folded solution, which each check must accept:
# exercise number -> [(what it does differently, source defining the answer's name)]
RIGHT_ANSWERS = {
    1: [
        (
            "trains the C++ run first and returns copies of the weights, the reference run's first",
            "def train_twice(steps=20):\n"
            "    finals = {}\n"
            "    for name, criterion in (('cpp', ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)),\n"
            "                            ('reference', ep.TripletHingeLoss(-1.0, 0.05, 0.1))):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            anchor, positive, negative = (net(t) for t in batch)\n"
            "            criterion(anchor, positive, negative).backward()\n"
            "            optimizer.step()\n"
            "        finals[name] = net.weight.detach().clone()\n"
            "    return finals['reference'], finals['cpp']\n",
        ),
        (
            "logs chapter 1's loss in the C++ run without training through it",
            "def train_twice(steps=20):\n"
            "    finals, logged = [], []\n"
            "    for use_cpp in (False, True):\n"
            "        torch.manual_seed(0)\n"
            "        net = torch.nn.Linear(16, 4)\n"
            "        optimizer = torch.optim.SGD(net.parameters(), lr=0.05)\n"
            "        data = torch.randn(steps, 3, 32, 16, generator=torch.Generator().manual_seed(1))\n"
            "        for batch in data:\n"
            "            optimizer.zero_grad()\n"
            "            embeddings = [net(t) for t in batch]\n"
            "            reference = ep.TripletHingeLoss(-1.0, 0.05, 0.1)(*embeddings)\n"
            "            loss = ops.CppTripletHingeLoss(-1.0, 0.05, 0.1)(*embeddings) if use_cpp else reference\n"
            "            logged.append(reference.item())\n"
            "            loss.backward()\n"
            "            optimizer.step()\n"
            "        finals.append(net.weight.detach())\n"
            "    return finals\n",
        ),
    ],
    2: [
        (
            "broadcasts the prototype instead of expanding it, and scales after summing the rows",
            "def prototype_gradient(anchor, prototype, negative, t1=-1.0, t2=0.5, beta=0.5):\n"
            "    d_ap = ((anchor - prototype) ** 2).sum(dim=1)\n"
            "    d_an = ((anchor - negative) ** 2).sum(dim=1)\n"
            "    weight = (d_ap - d_an > t1).to(anchor.dtype) + beta * (d_ap > t2).to(anchor.dtype)\n"
            "    total = (weight[:, None] * (anchor - prototype)).sum(dim=0, keepdim=True)\n"
            "    return -2 / anchor.shape[0] * total\n",
        ),
    ],
    3: [
        (
            "calls .contiguous() and indexes data_ptr() as a (B, D) block, as the exercise allows",
            'SQUARED_DISTANCE_CPP = r"""\n'
            "#include <ATen/ATen.h>\n"
            "#include <ATen/Dispatch.h>\n"
            "#include <torch/library.h>\n"
            "namespace {\n"
            "at::Tensor distance(const at::Tensor& x_in, const at::Tensor& y_in) {\n"
            '  TORCH_CHECK(x_in.dim() == 2, "squared_distance: x must be 2-D, got ", x_in.dim(), " dimension(s)");\n'
            '  TORCH_CHECK(y_in.sizes() == x_in.sizes(), "squared_distance: y must have the shape of x, got ", y_in.sizes());\n'
            '  TORCH_CHECK(y_in.scalar_type() == x_in.scalar_type(), "squared_distance: y must have the dtype of x");\n'
            "  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kDouble,\n"
            '              "squared_distance: x must be float32 or float64, got ", x_in.scalar_type());\n'
            "  const at::Tensor x = x_in.contiguous(), y = y_in.contiguous();\n"
            "  const int64_t rows = x.size(0), dim = x.size(1);\n"
            "  at::Tensor out = at::empty({rows}, x.options());\n"
            '  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squared_distance", [&] {\n'
            "    const scalar_t* xs = x.const_data_ptr<scalar_t>();\n"
            "    const scalar_t* ys = y.const_data_ptr<scalar_t>();\n"
            "    scalar_t* d = out.mutable_data_ptr<scalar_t>();\n"
            "    for (int64_t i = 0; i < rows; ++i) {\n"
            "      scalar_t total = 0;\n"
            "      for (int64_t j = 0; j < dim; ++j) {\n"
            "        const scalar_t diff = xs[i * dim + j] - ys[i * dim + j];\n"
            "        total += diff * diff;\n"
            "      }\n"
            "      d[i] = total;\n"
            "    }\n"
            "  });\n"
            "  return out;\n"
            "}\n"
            "}  // namespace\n"
            'TORCH_LIBRARY(ex_rowdist, m) { m.def("squared_distance(Tensor x, Tensor y) -> Tensor"); }\n'
            'TORCH_LIBRARY_IMPL(ex_rowdist, CPU, m) { m.impl("squared_distance", &distance); }\n'
            '"""\n',
        ),
    ],
}
