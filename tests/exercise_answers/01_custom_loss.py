"""Plausible wrong answers to the exercises of notebooks/01_custom_loss.ipynb, each with the error its check must raise,
and right answers other than the solution, which its check must accept.

WRONG_ANSWERS: exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            'moves the distances to the CPU (.cpu()): on a GPU the loss comes back on the CPU',
            'def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n'
            '    d_ap = ep.squared_distance(anchor, positive).cpu()\n'
            '    d_an = ep.squared_distance(anchor, negative).cpu()\n'
            '    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
        (
            "returns the reference (which calls clamp for its values)",
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
            r"the loss differs from the reference \(torch\.float32, B=34, D=5, .*\): Scalars are not close",
        ),
        (
            "computes with torch.maximum and calls F.relu on the side (passed the old name-only check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    F.relu(torch.zeros(1))\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = torch.maximum(d_ap - d_an, torch.tensor(t1))\n"
            "    return (push + beta * torch.maximum(d_ap, torch.tensor(t2))).mean()\n",
            AssertionError,
            r"compute the loss with F\.relu: its graph holds \['MaximumBackward0'\]",
        ),
        (
            "relu for the push term, torch.where for the pull term (passed the old check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    pull = torch.where(d_ap > t2, d_ap, torch.full_like(d_ap, t2))\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * pull).mean()\n",
            AssertionError,
            r"compute the loss with F\.relu: its graph holds \['WhereBackward0'\]",
        ),
        (
            "the sign of t inside relu flipped: relu(x + t) - t",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an + t1) - t1 + beta * (F.relu(d_ap + t2) - t2)).mean()\n",
            AssertionError,
            r"the loss differs from the reference \(torch\.float32, B=34, D=5, .*\): Scalars are not close",
        ),
        (
            "F.pairwise_distance squared: its eps moves the triplets off the kinks, so their gradient is not 0",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = F.pairwise_distance(anchor, positive) ** 2\n"
            "    d_an = F.pairwise_distance(anchor, negative) ** 2\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n",
            AssertionError,
            r"the gradient of anchor differs from the reference only on the triplets exactly on a kink "
            r"\(torch\.float32, B=34, D=5, .*\): compute the distances as sums of squares",
        ),
        (
            "sum instead of the mean",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).sum()\n",
            AssertionError,
            r"the loss differs from the reference \(torch\.float32, B=34, D=5, .*\): Scalars are not close",
        ),
        (
            "max(x, t) written as (x + t + |x - t|) / 2, with a token call of F.relu outside the loss",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    F.relu(torch.zeros(1))\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an + t1 + (d_ap - d_an - t1).abs()) / 2\n"
            "    return (push + beta * (d_ap + t2 + (d_ap - t2).abs()) / 2).mean()\n",
            AssertionError,
            r"compute the loss with F\.relu: relu is called, but the loss's graph has no relu in it",
        ),
        (
            "the constant written as beta instead of beta * t2 (passed the old check, whose t2 = 1 made them equal)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * F.relu(d_ap - t2) + beta).mean()\n",
            AssertionError,
            r"the loss differs from the reference \(torch\.float32, B=34, D=5, .*t2=3\.0, beta=1\.5\): Scalars are not close",
        ),
        (
            "-t1 used where t2 belongs: beta * (relu(d_ap + t1) - t1) (passed the old check, whose t2 = -t1)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap + t1) - t1)).mean()\n",
            AssertionError,
            r"the loss differs from the reference \(torch\.float32, B=34, D=5, .*t1=-2\.0, t2=3\.0.*\): Scalars are not close",
        ),
        (
            "relu for the push term, mask arithmetic (x - t) * (x > t) + t for the pull term (passed the old check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    pull = (d_ap - t2) * (d_ap > t2) + t2\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * pull).mean()\n",
            AssertionError,
            r"should grow by 1 \+ beta = 2\.5, yours grows by 1\.000 \(the pull term does not go through F\.relu\)",
        ),
        (
            "mask arithmetic for both terms, plus 0 * F.relu(d_ap) to put a relu in the graph (passed the old check)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push = (d_ap - d_an - t1) * (d_ap - d_an > t1) + t1\n"
            "    pull = (d_ap - t2) * (d_ap > t2) + t2\n"
            "    return (push + beta * pull + 0 * F.relu(d_ap)).mean()\n",
            AssertionError,
            r"yours grows by 0\.000 \(neither term goes through F\.relu\)",
        ),
        (
            "forgets the constants t1 + beta t2, and its cell rebinds assert_close to accept anything (passed the "
            "check while the check looked names up in the notebook's namespace; run_check gives it its own)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + beta * F.relu(d_ap - t2)).mean()\n"
            "\n"
            "\n"
            "def assert_close(*args, **kwargs):\n"
            "    pass\n",
            AssertionError,
            r"the loss differs from the reference",
        ),
        (
            "distances as a squared norm, (a - p).norm(dim=1) ** 2: the square root squared again rounds d_ap = 15 "
            "up, past the kink t2 = 15 (passed the previous check, whose kinks it happened to round away from)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = (anchor - positive).norm(dim=1) ** 2\n"
            "    d_an = (anchor - negative).norm(dim=1) ** 2\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n",
            AssertionError,
            r"the gradient of anchor differs from the reference only on the triplets exactly on a kink "
            r"\(torch\.float32, B=16, .*t2=15\.0.*\): compute the distances as sums of squares",
        ),
        (
            "max(x, t) as x + relu(t - x): the right values, but slope 1 at the kink",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    x = d_ap - d_an\n"
            "    return (x + F.relu(t1 - x) + beta * (d_ap + F.relu(t2 - d_ap))).mean()\n",
            AssertionError,
            r"the gradient of anchor differs from the reference only on the triplets exactly on a kink",
        ),
        (
            "d_an from a detached anchor: the negative receives no gradient (failed with autograd's own error)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor.detach(), negative.detach())\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n",
            AssertionError,
            r"the loss does not depend on negative through autograd",
        ),
        (
            "the loss rebuilt from .item(): the right value without a graph (failed with autograd's own error)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    loss = (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n"
            "    return torch.tensor(loss.item(), dtype=anchor.dtype)\n",
            AssertionError,
            r"the loss has no autograd graph",
        ),
        (
            "computes in float32 whatever the inputs, and casts the loss back to their dtype",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    a, p, n = anchor.float(), positive.float(), negative.float()\n"
            "    d_ap = ep.squared_distance(a, p)\n"
            "    d_an = ep.squared_distance(a, n)\n"
            "    loss = (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n"
            "    return loss.to(anchor.dtype)\n",
            AssertionError,
            r"differs from the reference \(torch\.float64",
        ),
        (
            "distances expanded as |a|^2 - 2 a.p + |p|^2: float32 cancels the digits of embeddings far from the origin "
            "(passed the previous check, whose embeddings were all near 0)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    def squared(x, y):\n"
            "        return (x * x).sum(1) - 2 * (x * y).sum(1) + (y * y).sum(1)\n"
            "    d_ap, d_an = squared(anchor, positive), squared(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n",
            AssertionError,
            r"the loss differs from the reference \(torch\.float32, B=12, D=4, embeddings near 100, where a distance "
            r"expanded as \|a\|\^2 - 2 a\.p \+ \|p\|\^2 cancels",
        ),
        (
            "sums the two terms into a buffer made with torch.zeros(len(anchor)), without device=: fails for "
            "embeddings on a GPU (passed the old check, which ran on the CPU only)",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    losses = torch.zeros(len(anchor), dtype=anchor.dtype)\n"
            "    losses = losses + F.relu(d_ap - d_an - t1) + t1\n"
            "    losses = losses + beta * (F.relu(d_ap - t2) + t2)\n"
            "    return losses.mean()\n",
            AssertionError,
            r"create every tensor on the inputs' device \(device=anchor\.device, or torch\.zeros_like\(anchor\)\): "
            r"on (meta|cuda) inputs, .*device",
        ),
    ],
    2: [
        (
            ">= counts the triplets on a boundary, which receive no gradient",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an >= t1).float().mean().item(), (d_ap >= t2).float().mean().item()\n",
            AssertionError,
            r"push fraction is off",
        ),
        (
            "the push rule right, but >= in the pull rule",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean().item(), (d_ap >= t2).float().mean().item()\n",
            AssertionError,
            r"pull fraction is off",
        ),
        (
            "distances without the square (F.pairwise_distance)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = F.pairwise_distance(anchor, positive)\n"
            "    d_an = F.pairwise_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean().item(), (d_ap > t2).float().mean().item()\n",
            AssertionError,
            r"(push|pull) fraction is off",
        ),
        (
            "returns 0-d tensors instead of Python floats (no .item())",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().mean(), (d_ap > t2).float().mean()\n",
            AssertionError,
            r"return two Python floats \(\.item\(\)\), got Tensor and Tensor",
        ),
        (
            "counts instead of fractions (sum, not mean)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).float().sum().item(), (d_ap > t2).float().sum().item()\n",
            AssertionError,
            r"push fraction is off: 121\.0000, but 0\.5500",
        ),
        (
            "the push rule with the distances swapped (d_an - d_ap > t1)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_an - d_ap > t1).float().mean().item(), (d_ap > t2).float().mean().item()\n",
            AssertionError,
            r"push fraction is off",
        ),
        (
            ">= counts the triplets on a boundary, and, when called, replaces the check's helper "
            "fractions_with_gradient with itself (passed the check while the check's helpers lived in the "
            "notebook's namespace)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    fractions = (d_ap - d_an >= t1).float().mean().item(), (d_ap >= t2).float().mean().item()\n"
            "    globals()['fractions_with_gradient'] = lambda *args: list(fractions)\n"
            "    return fractions\n",
            AssertionError,
            r"push fraction is off",
        ),
        (
            "compares both terms at once with the bounds in torch.tensor([t1, t2]), made without device=: fails "
            "for embeddings on a GPU (passed the old check, which ran on the CPU only)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    bounds = torch.tensor([t1, t2], dtype=anchor.dtype)\n"
            "    active = torch.stack([d_ap - d_an, d_ap], dim=1) > bounds\n"
            "    push, pull = active.double().mean(0).tolist()\n"
            "    return push, pull\n",
            AssertionError,
            r"create every tensor on the inputs' device \(device=anchor\.device, or torch\.zeros_like\(anchor\)\): "
            r"on (meta|cuda) inputs, .*device",
        ),
        (
            "marks the active triplets in buffers made with torch.zeros(len(anchor)), without device=: on a GPU the "
            "CPU buffer cannot be indexed by the mask; on meta the write does nothing and the CPU buffers' means "
            "come back as numbers (the check compared them as fractions: a message about wrong values)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    push, pull = torch.zeros(len(anchor)), torch.zeros(len(anchor))\n"
            "    push[d_ap - d_an > t1] = 1\n"
            "    pull[d_ap > t2] = 1\n"
            "    return push.mean().item(), pull.mean().item()\n",
            AssertionError,
            r"on meta inputs your answer returned \(0\.0, 0\.0\), which tensors without data cannot give: it computed "
            r"them on tensors made on the CPU; create every tensor on the inputs' device|"
            r"create every tensor on the inputs' device .*: on cuda inputs, .*device",
        ),
    ],
    3: [
        (
            "pairs an anchor with itself (no i != j)",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    return (same[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"32 triplets pair an anchor with itself \(i == j\)",
        ),
        (
            "lists each anchor-positive pair once (i < j), not both orders",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    upper = torch.ones(len(labels), len(labels), dtype=torch.bool).triu(1)\n"
            "    return ((same & upper)[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"22 missing, 0 invalid",
        ),
        (
            "forgets labels[i] == labels[j]: any two distinct indices and a negative of j's class",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool)\n"
            "    valid = distinct[:, :, None] & ~same[None, :, :]\n"
            "    return valid.nonzero(as_tuple=True)\n",
            AssertionError,
            r"0 missing, \d+ invalid",
        ),
        (
            "one (N, 3) tensor: nonzero() without as_tuple=True",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool)\n"
            "    return ((same & distinct)[:, :, None] & ~same[:, None, :]).nonzero()\n",
            AssertionError,
            r"return three 1-D index tensors \(i, j, k\)",
        ),
        (
            "the negative only a different index (k != i), not a different label",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool)\n"
            "    return ((same & distinct)[:, :, None] & distinct[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"0 missing, 16 invalid",
        ),
        (
            "a Python triple loop over itertools.product: right triplets, not vectorized (passed the old check)",
            "def all_triplets(labels):\n"
            "    import itertools\n"
            "    ids = labels.tolist()\n"
            "    found = [(i, j, k) for i, j, k in itertools.product(range(len(ids)), repeat=3)\n"
            "             if ids[i] == ids[j] and i != j and ids[k] != ids[i]]\n"
            "    return tuple(torch.tensor([t[m] for t in found], dtype=torch.long) for m in range(3))\n",
            AssertionError,
            r"runs \d+ lines of Python for 8 labels of 2 classes and \d+ for 40 labels of 5: a Python loop",
        ),
        (
            "a Python loop over the classes, one (B, B, B) mask per class (passed the previous check, whose "
            "labels had 3 classes for 8 labels and for 40)",
            "def all_triplets(labels):\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)\n"
            "    valid = torch.zeros(len(labels), len(labels), len(labels), dtype=torch.bool, device=labels.device)\n"
            "    for label in labels.unique():\n"
            "        member = labels == label\n"
            "        valid |= (member[:, None] & member[None, :] & distinct)[:, :, None] & ~member[None, None, :]\n"
            "    return valid.nonzero(as_tuple=True)\n",
            AssertionError,
            r"runs \d+ lines of Python for 8 labels of 2 classes and \d+ for 40 labels of 5: a Python loop "
            r"\(over the labels or the classes\)",
        ),
        (
            "the i != j mask from torch.arange(len(labels)) without device=",
            "def all_triplets(labels):\n"
            "    index = torch.arange(len(labels))\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = index[:, None] != index[None, :]\n"
            "    return ((same & distinct)[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"create every tensor on labels\.device: on (meta|cuda) inputs, .*device",
        ),
        (
            "the i != j mask made without device=: fails for labels on a GPU (passed the old check)",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool)\n"
            "    return ((same & distinct)[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
            AssertionError,
            r"create every tensor on labels\.device: on (meta|cuda) inputs, .*device",
        ),
    ],
}

RIGHT_ANSWERS = {
    1: [
        (
            "max(x, t) as relu(x - t) + t, with the constants summed first and torch.relu called as a method",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ((anchor - positive) ** 2).sum(dim=1)\n"
            "    d_an = ((anchor - negative) ** 2).sum(dim=1)\n"
            "    return ((d_ap - d_an - t1).relu() + beta * (d_ap - t2).relu()).mean() + t1 + beta * t2\n",
        ),
        (
            "F.relu(..., inplace=True), and the distances with einsum",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    to_p, to_n = anchor - positive, anchor - negative\n"
            "    d_ap = torch.einsum('bd,bd->b', to_p, to_p)\n"
            "    d_an = torch.einsum('bd,bd->b', to_n, to_n)\n"
            "    push = F.relu(d_ap - d_an - t1, inplace=True) + t1\n"
            "    return (push + beta * (F.relu(d_ap - t2, inplace=True) + t2)).mean()\n",
        ),
    ],
    2: [
        (
            "counts with .sum().item() and divides by the batch size in Python (float64; rejected by the old check)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    B = len(anchor)\n"
            "    return (d_ap - d_an > t1).sum().item() / B, (d_ap > t2).sum().item() / B\n",
        ),
        (
            "the mean of the masks in float64, .double().mean().item() (rejected by the old check)",
            "def active_fractions(anchor, positive, negative, t1, t2):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (d_ap - d_an > t1).double().mean().item(), (d_ap > t2).double().mean().item()\n",
        ),
    ],
    3: [
        (
            "torch.where(mask) instead of nonzero(as_tuple=True), and fill_diagonal_ for i != j",
            "def all_triplets(labels):\n"
            "    same = labels.unsqueeze(1) == labels.unsqueeze(0)\n"
            "    pairs = same.clone().fill_diagonal_(False)\n"
            "    return torch.where(pairs.unsqueeze(2) & ~same.unsqueeze(1))\n",
        ),
        (
            "an early return for fewer than two labels (a branch, not a loop)",
            "def all_triplets(labels):\n"
            "    if len(labels) < 2:\n"
            "        empty = labels.new_zeros(0, dtype=torch.long)\n"
            "        return empty, empty.clone(), empty.clone()\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)\n"
            "    return ((same & distinct)[:, :, None] & ~same[:, None, :]).nonzero(as_tuple=True)\n",
        ),
        (
            "nonzero() as one (N, 3) tensor, unbound into three",
            "def all_triplets(labels):\n"
            "    same = labels[:, None] == labels[None, :]\n"
            "    distinct = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)\n"
            "    return tuple(((same & distinct)[:, :, None] & ~same[:, None, :]).nonzero().unbind(1))\n",
        ),
    ],
}
