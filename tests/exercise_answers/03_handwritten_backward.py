"""Plausible wrong answers to the exercises of notebooks/03_handwritten_backward.ipynb, each with the error its check must raise.

exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)];
RIGHT_ANSWERS, at the end, lists right answers other than the solution that each check must accept.
"""

from __future__ import annotations

WRONG_ANSWERS = {
    1: [
        (
            'the backward computes sigmoid on x.cpu(): on a GPU the gradient comes back on the CPU',
            'class Softplus(Function):\n'
            '    @staticmethod\n'
            '    def forward(ctx, x):\n'
            '        ctx.save_for_backward(x)\n'
            '        return F.softplus(x)\n'
            '\n'
            '    @staticmethod\n'
            '    def backward(ctx, grad_output):\n'
            '        (x,) = ctx.saved_tensors\n'
            '        return grad_output * torch.sigmoid(x.cpu()).to(x.dtype)\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
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
            AssertionError,
            r"the gradient is still off",
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
            AssertionError,
            r"the second derivative is off: make the backward differentiable",
        ),
        (
            "right first derivative, computed from a detached x",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x.detach())\n",
            AssertionError,
            r"the second derivative is off: make the backward differentiable",
        ),
        (
            "right first derivative, but grad_output detached",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output.detach() * torch.sigmoid(x)\n",
            AssertionError,
            r"the second derivative is off: make the backward differentiable",
        ),
        (
            "the textbook derivative e^x / (1 + e^x): nan where e^x overflows (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.exp(x) / (1 + torch.exp(x))\n",
            AssertionError,
            r"the gradient is not finite at x = \[100\.0\] \(torch\.float32\): e\^x / \(1 \+ e\^x\) overflows",
        ),
        (
            "the textbook forward log(1 + e^x): inf where e^x overflows (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return torch.log(1 + torch.exp(x))\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x)\n",
            AssertionError,
            r"softplus is not finite at x = \[100\.0\] \(torch\.float32\): log\(1 \+ e\^x\) overflows",
        ),
        (
            "keeps the input as an attribute, ctx.x = x, escaping the version check (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.x = x\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output * torch.sigmoid(ctx.x)\n",
            AssertionError,
            r"ctx\.x holds a tensor: save tensors with ctx\.save_for_backward \(section 6\.1\)",
        ),
        (
            "sigmoid written out, 1 / (1 + e^-x): right first derivative, nan second derivative where e^-x overflows (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output / (1 + torch.exp(-x))\n",
            AssertionError,
            r"the second derivative is not finite at x = \[-100\.0\] \(torch\.float32\): autograd differentiates your backward's formula",
        ),
        (
            "sigmoid as 1 - 1 / (1 + e^x): nan second derivative where e^x overflows (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * (1 - 1 / (1 + torch.exp(x)))\n",
            AssertionError,
            r"the second derivative is not finite at x = \[100\.0\] \(torch\.float32\)",
        ),
        (
            "overflow guarded with torch.where: the untaken branch's nan reaches the second derivative (passed the old check)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.where(x > 0, 1 / (1 + torch.exp(-x)), torch.exp(x) / (1 + torch.exp(x)))\n",
            AssertionError,
            r"the second derivative is not finite at x = \[100\.0, -100\.0\] \(torch\.float32\)",
        ),
        (
            "a stable softplus written out, max(x, 0) + log1p(exp(-|x|)), with the 0 from torch.zeros(x.shape) "
            "without device=: fails for x on a GPU (passed the old check, which ran on the CPU only)",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return torch.maximum(x, torch.zeros(x.shape, dtype=x.dtype)) + torch.log1p(torch.exp(-x.abs()))\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x)\n",
            AssertionError,
            r"create every tensor on the input's device \(device=x\.device, or torch\.zeros_like\(x\)\): "
            r"on (meta|cuda) inputs, .*device",
        ),
    ],
    2: [
        (
            'the backward divides by norm.cpu(): on a GPU the operands meet on two devices',
            'class Normalize(Function):\n'
            '    @staticmethod\n'
            '    def forward(ctx, x):\n'
            '        y = x / x.norm(dim=-1, keepdim=True)\n'
            '        ctx.save_for_backward(x, y)\n'
            '        return y\n'
            '\n'
            '    @staticmethod\n'
            '    def backward(ctx, grad_output):\n'
            '        x, y = ctx.saved_tensors\n'
            '        norm = x.norm(dim=-1, keepdim=True)\n'
            '        return (grad_output - y * (y * grad_output).sum(-1, keepdim=True)) / norm.cpu()\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
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
            AssertionError,
            r"the gradient is off: did you keep the projection term",
        ),
        (
            "saves the norm, an intermediate (the old official solution): double backward wrong",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        y = x / norm\n"
            "        ctx.save_for_backward(y, norm)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        y, norm = ctx.saved_tensors\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"the second derivative is off: save only inputs and outputs",
        ),
        (
            "the projection with x in place of y",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(x, y)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        x, y = ctx.saved_tensors\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        return (grad_output - x * (x * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"the gradient is off",
        ),
        (
            "right first derivative, but grad_output detached",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(x, y)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        x, y = ctx.saved_tensors\n"
            "        g = grad_output.detach()\n"
            "        return (g - y * (y * g).sum(dim=-1, keepdim=True)) / x.norm(dim=-1, keepdim=True)\n",
            AssertionError,
            r"the second derivative is off: .*keep grad_output's history",
        ),
        (
            "saves the output and keeps the input as an attribute, ctx.x = x (passed the old check)",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(y)\n"
            "        ctx.x = x\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (y,) = ctx.saved_tensors\n"
            "        norm = ctx.x.norm(dim=-1, keepdim=True)\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"ctx\.x holds a tensor: save tensors with ctx\.save_for_backward \(section 6\.1\)",
        ),
        (
            "saves the norm, an intermediate, beside x and y, though backward recomputes it (passed the old check)",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        y = x / norm\n"
            "        ctx.save_for_backward(x, y, norm)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        x, y, _ = ctx.saved_tensors\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"save only the input and the output with ctx\.save_for_backward, no intermediate",
        ),
        (
            "saves the output and keeps the input in a dict on ctx (passed the old check, which looked only into lists and tuples)",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(y)\n"
            "        ctx.cache = {'x': x}\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (y,) = ctx.saved_tensors\n"
            "        norm = ctx.cache['x'].norm(dim=-1, keepdim=True)\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
            AssertionError,
            r"ctx\.cache holds a tensor: save tensors with ctx\.save_for_backward \(section 6\.1\)",
        ),
        (
            "the backward as each row's Jacobian (I - y y^T) / ||x||, with I from torch.eye(D) without device=: "
            "fails for x on a GPU (passed the old check, which ran on the CPU only)",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = x / x.norm(dim=-1, keepdim=True)\n"
            "        ctx.save_for_backward(x, y)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        x, y = ctx.saved_tensors\n"
            "        eye = torch.eye(x.shape[-1], dtype=x.dtype)\n"
            "        jacobian = (eye - y[..., :, None] * y[..., None, :]) / x.norm(dim=-1, keepdim=True)[..., None]\n"
            "        return (jacobian @ grad_output[..., None]).squeeze(-1)\n",
            AssertionError,
            r"create every tensor on the input's device \(device=x\.device, or torch\.zeros_like\(x\)\): "
            r"on (meta|cuda) inputs, .*device",
        ),
    ],
    3: [
        (
            'the backward multiplies by result.cpu(): on a GPU the operands meet on two devices',
            'class FuncExp(Function):\n'
            '    generate_vmap_rule = True\n'
            '\n'
            '    @staticmethod\n'
            '    def forward(x):\n'
            '        return x.exp()\n'
            '\n'
            '    @staticmethod\n'
            '    def setup_context(ctx, inputs, output):\n'
            '        ctx.save_for_backward(output)\n'
            '\n'
            '    @staticmethod\n'
            '    def backward(ctx, grad_output):\n'
            '        (result,) = ctx.saved_tensors\n'
            '        return grad_output * result.cpu()\n',
            AssertionError,
            r"keep every tensor on .*: on meta inputs your answer copies one to the CPU|create every tensor on .*: on cuda inputs|on cuda inputs .* is on another device",
        ),
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
        (
            "keeps the output as an attribute on ctx (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.result = output\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output * ctx.result\n",
            AssertionError,
            r"save the output with ctx\.save_for_backward, not as an attribute on ctx",
        ),
        (
            "returns the saved output without multiplying by the incoming gradient",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return result\n",
            AssertionError,
            r"the gradient is off",
        ),
        (
            "saves the input and recomputes exp in backward (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(inputs[0])\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * x.exp()\n",
            AssertionError,
            r"save the output, and only the output, with ctx\.save_for_backward",
        ),
        (
            "saves the input beside the output (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(inputs[0], output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        _, result = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"save the output, and only the output, with ctx\.save_for_backward",
        ),
        (
            "saves output.detach(): right first derivative, wrong second (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output.detach())\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"the second derivative is off: save the output itself, not a detached copy",
        ),
        (
            "right first derivative, but grad_output detached",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output.detach() * result\n",
            AssertionError,
            r"the second derivative is off: .*keep grad_output's history",
        ),
        (
            "saves the output, but backward computes from the input kept as ctx.x (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "        ctx.x = inputs[0]\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output * ctx.x.exp()\n",
            AssertionError,
            r"ctx\.x holds a tensor: backward must compute from the saved output alone",
        ),
        (
            "computes exp(x) - 1 (expm1) and a backward consistent with it: the gradients are exp's, the values are not (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return torch.expm1(x)\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * (result + 1)\n",
            AssertionError,
            r"the forward is off: exp\(x\), in x's dtype",
        ),
        (
            "computes in float64 whatever the input's dtype (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.double().exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"the forward is off: exp\(x\), in x's dtype \(torch\.float32.*\n.*dtype",
        ),
        (
            "saves the output, and backward reads it from a dict kept on ctx (passed the old check)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return x.exp()\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "        ctx.store = {'result': output}\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        return grad_output * ctx.store['result']\n",
            AssertionError,
            r"ctx\.store holds a tensor",
        ),
        (
            "exp(x) as a power of e, with the e's from torch.full(x.shape, torch.e) without device=: fails for x "
            "on a GPU (passed the old check, which ran on the CPU only)",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return torch.full(x.shape, torch.e, dtype=x.dtype) ** x\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return grad_output * result\n",
            AssertionError,
            r"create every tensor on the input's device \(device=x\.device, or torch\.zeros_like\(x\)\): "
            r"on (meta|cuda) inputs, .*device",
        ),
    ],
}

# Right answers other than the folded solution, which each check must accept:
# exercise number -> [(what it does differently, source defining the answer's name)]
RIGHT_ANSWERS = {
    1: [
        (
            "saves the output y and computes sigma(x) = 1 - exp(-y) from it",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        y = F.softplus(x)\n"
            "        ctx.save_for_backward(y)\n"
            "        return y\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (y,) = ctx.saved_tensors\n"
            "        return grad_output * (1 - torch.exp(-y))\n",
        ),
        (
            "a forward written stably by hand, max(x, 0) + log1p(exp(-|x|))",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.sigmoid(x)\n",
        ),
        (
            "sigmoid as exp(x - softplus(x)), finite everywhere",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * torch.exp(x - F.softplus(x))\n",
        ),
        (
            "sigmoid through tanh, (1 + tanh(x / 2)) / 2",
            "class Softplus(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return F.softplus(x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad_output * (1 + torch.tanh(x / 2)) / 2\n",
        ),
    ],
    2: [
        (
            "saves only the input and recomputes y and the norm in backward",
            "class Normalize(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return x / x.norm(dim=-1, keepdim=True)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        norm = x.norm(dim=-1, keepdim=True)\n"
            "        y = x / norm\n"
            "        return (grad_output - y * (y * grad_output).sum(dim=-1, keepdim=True)) / norm\n",
        ),
    ],
    3: [
        (
            "keeps a non-tensor (the output's shape) as an attribute on ctx, as section 6.1 allows",
            "class FuncExp(Function):\n"
            "    generate_vmap_rule = True\n"
            "    @staticmethod\n"
            "    def forward(x):\n"
            "        return torch.exp(x)\n"
            "    @staticmethod\n"
            "    def setup_context(ctx, inputs, output):\n"
            "        ctx.save_for_backward(output)\n"
            "        ctx.shape = output.shape\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad_output):\n"
            "        (result,) = ctx.saved_tensors\n"
            "        return (result * grad_output).reshape(ctx.shape)\n",
        ),
    ],
}
