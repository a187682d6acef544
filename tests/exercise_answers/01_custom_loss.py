"""Plausible wrong answers to the exercises of notebooks/01_custom_loss.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
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
            r"the loss differs from the reference: Scalars are not close",
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
            r"the loss differs from the reference: Scalars are not close",
        ),
        (
            "F.pairwise_distance squared: its eps moves the triplets off the kinks, so their gradient is not 0",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = F.pairwise_distance(anchor, positive) ** 2\n"
            "    d_an = F.pairwise_distance(anchor, negative) ** 2\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).mean()\n",
            AssertionError,
            r"the gradient of anchor differs from the reference \(the last two rows sit on the kinks\)",
        ),
        (
            "sum instead of the mean",
            "def triplet_loss_relu(anchor, positive, negative, t1, t2, beta):\n"
            "    d_ap = ep.squared_distance(anchor, positive)\n"
            "    d_an = ep.squared_distance(anchor, negative)\n"
            "    return (F.relu(d_ap - d_an - t1) + t1 + beta * (F.relu(d_ap - t2) + t2)).sum()\n",
            AssertionError,
            r"the loss differs from the reference: Scalars are not close",
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
    ],
}
