"""Plausible wrong answers to the exercises of notebooks/02_numpy_scipy_function.ipynb, each with the error its check must raise,
and right answers other than the solution, which its check must accept.

WRONG_ANSWERS: exercise number -> [(what is wrong, source defining the answer's name, exception, message regex)]
RIGHT_ANSWERS: exercise number -> [(what it does differently, source defining the answer's name)]
"""

from __future__ import annotations

import torch

WRONG_ANSWERS = {
    1: [
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
            r"save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "saves x beside w and calls scipy again in backward (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(x, w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, _ = ctx.saved_tensors\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "saves w.detach(): right first derivative, wrong second (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w.detach())\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"second derivative is off: save w itself, not a detached copy",
        ),
        (
            "keeps w as an attribute on ctx instead of saving it (section 3's rule; the tensor escapes the version check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.w = w\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        return grad / (torch.exp(ctx.w) * (1 + ctx.w))\n",
            AssertionError,
            r"save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "forgets the 1 + w factor: W' = 1 / e^W",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / torch.exp(w)\n",
            AssertionError,
            r"gradient is off",
        ),
        (
            "inverts the derivative: grad * e^W (1 + W) instead of dividing",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad * torch.exp(w) * (1 + w)\n",
            AssertionError,
            r"gradient is off",
        ),
        (
            "keeps x as an attribute beside the saved w, W' = W / (x (1 + W)): NaN at x = 0 (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        ctx.x = x\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad * w / (ctx.x * (1 + w))\n",
            AssertionError,
            r"keep tensors off ctx: ctx\.x holds one",
        ),
        (
            "saves scipy's float64 result and returns it .to(x.dtype): in float32 the saved tensor is a "
            "float64 copy without history, so the second derivative is wrong (passed the old check)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = torch.from_numpy(scipy.special.lambertw(x.detach().numpy()).real)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w.to(x.dtype)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"torch\.float32, x of shape \(9,\): save the output w, and only w, with ctx\.save_for_backward",
        ),
        (
            "the backward marked @once_differentiable: a second derivative is an error",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"the second derivative is off: .*\(no @once_differentiable\)",
        ),
        (
            "saves w, and keeps the input too, in a tuple on ctx, ctx.inputs = (x,) (passed the previous check, "
            "whose attribute test did not look inside containers)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        ctx.inputs = (x,)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"keep tensors off ctx: ctx\.inputs holds one",
        ),
        (
            "W' = W / (x (1 + W)) with x recomputed from the output as w e^w: NaN at x = 0",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad * w / (w * torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"(?s)torch\.float64, x of shape \(9,\): the gradient is off: .*nan at index \(2,\)",
        ),
        (
            "marks the output non-differentiable (failed with an unrelated TypeError)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = numpy_ops.from_numpy(scipy.special.lambertw(numpy_ops.to_numpy(x)).real, like=x)\n"
            "        ctx.save_for_backward(w)\n"
            "        ctx.mark_non_differentiable(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad / (torch.exp(w) * (1 + w))\n",
            AssertionError,
            r"W\(x\) has no gradient: .*no ctx\.mark_non_differentiable",
        ),
    ],
    2: [
        (
            "backward in gaussian_filter1d's default mode, reflect",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1)\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"the gradient is off: is the backward the same filter, with ctx's sigma and mode='constant'\? \(torch\.float64, x of shape \(3, 12\), sigma=1\.5\)",
        ),
        (
            "the right backward calling scipy, without @once_differentiable (an old official solution): "
            "a gradient penalty built on it silently loses its term",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"the gradient has no history \(the backward calls scipy, or detaches\): mark it @once_differentiable, "
            r"or make it the Function itself",
        ),
        (
            "scipy in backward, given a history by adding 0 * grad: gradcheck passes, second derivative 0",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=grad) + 0 * grad, None\n",
            AssertionError,
            r"the second derivative is off: make the backward the Function itself",
        ),
        (
            "forward and backward both in mode nearest (A not symmetric)",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='nearest')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='nearest')\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
            AssertionError,
            r"the forward is off: gaussian_filter1d\(x, sigma, axis=-1, mode='constant'\)",
        ),
        (
            "blurs along the wrong axis (axis=0, down the columns)",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=0, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        return GaussianBlur.apply(grad, ctx.sigma), None\n",
            AssertionError,
            r"the forward is off: gaussian_filter1d\(x, sigma, axis=-1, mode='constant'\)",
        ),
        (
            "the backward hard-codes sigma = 1.5 instead of ctx.sigma (passed the old check, which used 1.5 only)",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        return GaussianBlur.apply(grad, 1.5), None\n",
            AssertionError,
            r"the gradient is off: .*sigma=0\.7\)",
        ),
        (
            "the backward is the Function, applied to grad.detach(): the gradient has no history",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        return GaussianBlur.apply(grad.detach(), ctx.sigma), None\n",
            AssertionError,
            r"the gradient has no history \(the backward calls scipy, or detaches\)",
        ),
    ],
    3: [
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
            r"torch\.float64, x near 100: the gradient is off: multiply the softmax by the incoming gradient",
        ),
        (
            "softmax from scipy in backward, no @once_differentiable: second derivative silently wrong (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        soft = numpy_ops.from_numpy(scipy.special.softmax(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        return grad[..., None] * soft\n",
            AssertionError,
            r"second derivative is off: compute the backward with torch operations",
        ),
        (
            "always float64: torch.from_numpy of a float64 result, no like= (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = torch.from_numpy(scipy.special.logsumexp(x.detach().numpy().astype('float64'), axis=-1))\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - lse[..., None])\n",
            AssertionError,
            r"torch\.float32 input gave torch\.float64",
        ),
        (
            "unstable: log(exp(x).sum()) in forward, exp(x) / exp(x).sum() in backward (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(np.log(np.exp(numpy_ops.to_numpy(x)).sum(axis=-1)), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * x.exp() / x.exp().sum(dim=-1, keepdim=True)\n",
            AssertionError,
            r"torch\.float32, x near 100: the value overflowed",
        ),
        (
            "scipy's stable forward, but the softmax as exp(x) / exp(x).sum() in backward",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * x.exp() / x.exp().sum(dim=-1, keepdim=True)\n",
            AssertionError,
            r"torch\.float32, x near 100: the gradient overflowed: compute exp\(x - lse\)",
        ),
        (
            "keeps x as an attribute on ctx, saves only lse (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.x = x\n"
            "        ctx.save_for_backward(lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (lse,) = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(ctx.x - lse[..., None])\n",
            AssertionError,
            r"save x itself with ctx\.save_for_backward: not a copy, and not as an attribute on ctx",
        ),
        (
            "detaches the saved lse in backward: right gradient, wrong second derivative",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - lse[..., None].detach())\n",
            AssertionError,
            r"second derivative is off: .*no \.detach\(\)",
        ),
        (
            "saves x, keeps the output lse as an attribute on ctx: a reference cycle (passed the old check)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x)\n"
            "        ctx.lse = lse\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - ctx.lse[..., None])\n",
            AssertionError,
            r"keep tensors off ctx: ctx\.lse holds one",
        ),
        (
            "the output kept in a tuple on ctx, ctx.stash = (lse,) (passed the previous check, whose attribute "
            "test did not look inside containers)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x)\n"
            "        ctx.stash = (lse,)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - ctx.stash[0][..., None])\n",
            AssertionError,
            r"keep tensors off ctx: ctx\.stash holds one",
        ),
        (
            "saves scipy's float64 lse and returns lse.to(x.dtype): in float32 the saved lse is a copy without "
            "history, so the second derivative is wrong (passed the previous check, which differentiated twice "
            "in float64 only)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = torch.from_numpy(scipy.special.logsumexp(x.detach().double().numpy(), axis=-1))\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse.to(x.dtype)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - lse[..., None])\n",
            AssertionError,
            r"torch\.float32, x near 100: the second derivative is off: .*no copy in another dtype",
        ),
        (
            "the softmax as exp(x) / exp(lse): overflows in float32 near 100",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        lse = numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "        ctx.save_for_backward(x, lse)\n"
            "        return lse\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        x, lse = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x) / torch.exp(lse)[..., None]\n",
            AssertionError,
            r"torch\.float32, x near 100: the gradient overflowed",
        ),
    ],
}

# Wrong on a GPU only: each check's GPU part rejects them, and without a GPU nothing can (scipy needs the data,
# which the meta device's tensors do not have), so they are named where the tests run on a GPU.
if torch.cuda.is_available():
    WRONG_ANSWERS[1].append((
        "W(x) made with torch.from_numpy(...).to(x.dtype), on the CPU whatever x's device",
        "class LambertW(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        w = torch.from_numpy(scipy.special.lambertw(x.detach().cpu().numpy()).real).to(x.dtype)\n"
        "        ctx.save_for_backward(w)\n"
        "        return w\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        (w,) = ctx.saved_tensors\n"
        "        return grad / (torch.exp(w) * (1 + w))\n",
        AssertionError,
        r"on a cuda input, W\(x\) is on cpu: return it on the input's device",
    ))
    WRONG_ANSWERS[2].append((
        "x.detach().numpy() without .cpu(): numpy cannot read a GPU tensor",
        "class GaussianBlur(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x, sigma):\n"
        "        ctx.sigma = sigma\n"
        "        out = scipy.ndimage.gaussian_filter1d(x.detach().numpy(), sigma, axis=-1, mode='constant')\n"
        "        return torch.from_numpy(out).to(x)\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        return GaussianBlur.apply(grad, ctx.sigma), None\n",
        TypeError,
        r"can't convert cuda.* to numpy",
    ))
    WRONG_ANSWERS[3].append((
        "lse made with torch.from_numpy(...).to(x.dtype), on the CPU whatever x's device",
        "class LogSumExp(Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        lse = torch.from_numpy(scipy.special.logsumexp(x.detach().cpu().numpy(), axis=-1)).to(x.dtype)\n"
        "        ctx.save_for_backward(x, lse)\n"
        "        return lse\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        x, lse = ctx.saved_tensors\n"
        "        return grad[..., None] * torch.exp(x - lse[..., None])\n",
        AssertionError,
        r"on a cuda input, lse is on cpu: return it on the input's device",
    ))

RIGHT_ANSWERS = {
    1: [
        (
            "converts with .to(x) before saving, and writes W' as exp(-w) / (1 + w)",
            "class LambertW(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        w = torch.from_numpy(scipy.special.lambertw(x.detach().cpu().numpy()).real).to(x)\n"
            "        ctx.save_for_backward(w)\n"
            "        return w\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (w,) = ctx.saved_tensors\n"
            "        return grad * torch.exp(-w) / (1 + w)\n",
        ),
    ],
    2: [
        (
            "the backward calls scipy and is marked @once_differentiable, the text's other route "
            "(rejected by the old check, whose second-derivative probe never reached the mark)",
            "class GaussianBlur(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x, sigma):\n"
            "        ctx.sigma = sigma\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(x), sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=x)\n"
            "    @staticmethod\n"
            "    @once_differentiable\n"
            "    def backward(ctx, grad):\n"
            "        out = scipy.ndimage.gaussian_filter1d(numpy_ops.to_numpy(grad), ctx.sigma, axis=-1, mode='constant')\n"
            "        return numpy_ops.from_numpy(out, like=grad), None\n",
        ),
    ],
    3: [
        (
            "the backward with torch.softmax(x, dim=-1), which is stable and differentiable, instead of exp(x - lse)",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad.unsqueeze(-1) * torch.softmax(x, dim=-1)\n",
        ),
        (
            "saves only x and recomputes lse in backward with torch.logsumexp, which autograd differentiates again",
            "class LogSumExp(Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x):\n"
            "        ctx.save_for_backward(x)\n"
            "        return numpy_ops.from_numpy(scipy.special.logsumexp(numpy_ops.to_numpy(x), axis=-1), like=x)\n"
            "    @staticmethod\n"
            "    def backward(ctx, grad):\n"
            "        (x,) = ctx.saved_tensors\n"
            "        return grad[..., None] * torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))\n",
        ),
    ],
}
