// Per-row arithmetic of the triplet hinge loss, shared by the C++ (CPU) and
// CUDA kernels. Everything here is plain arithmetic on one triplet's squared
// distances, so the CPU tests exercise exactly the code the GPU runs.
//
//   loss_i = max(d_ap - d_an, t1) + beta * max(d_ap, t2)
//
// and, for an upstream gradient g = dL/dloss_i,
//
//   dL/dp = -w_ap (a - p),  dL/dn = w_an (a - n),  dL/da = w_ap (a - p) - w_an (a - n)
//   w_ap = 2 g (push + beta pull),  w_an = 2 g push,
//   push = [d_ap - d_an > t1],  pull = [d_ap > t2].
//
// At a kink (d_ap - d_an == t1, or d_ap == t2) the loss has no derivative; the
// strict > picks the subgradient 0 there, the minimum-norm choice that
// torch.clamp also makes since torch 2.14 (before it, clamp passed the
// gradient through at its boundary). It is part of this operator's
// definition: reference.py gives the same on every torch version.
#pragma once

#if defined(__CUDACC__)
#define EP_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define EP_HOST_DEVICE inline
#endif

namespace extending_pytorch {

struct TripletParams {
  double t1;
  double t2;
  double beta;
};

// The loss of one triplet from its two squared distances.
template <typename acc_t>
EP_HOST_DEVICE acc_t triplet_loss(acc_t d_ap, acc_t d_an, TripletParams params) {
  const acc_t t1 = static_cast<acc_t>(params.t1);
  const acc_t t2 = static_cast<acc_t>(params.t2);
  const acc_t beta = static_cast<acc_t>(params.beta);
  const acc_t diff = d_ap - d_an;
  // NaN propagates, as in torch.clamp: a comparison with NaN is false.
  const acc_t push = (diff < t1) ? t1 : diff;
  const acc_t pull = (d_ap < t2) ? t2 : d_ap;
  return push + beta * pull;
}

// The two weights that turn the differences (a - p), (a - n) into gradients.
template <typename acc_t>
struct TripletWeights {
  acc_t w_ap;  // dL/dp = -w_ap (a - p)
  acc_t w_an;  // dL/dn =  w_an (a - n)
};

template <typename acc_t>
EP_HOST_DEVICE TripletWeights<acc_t> triplet_weights(
    acc_t d_ap, acc_t d_an, acc_t g, TripletParams params) {
  const acc_t push = (d_ap - d_an > static_cast<acc_t>(params.t1)) ? acc_t(1) : acc_t(0);
  const acc_t pull = (d_ap > static_cast<acc_t>(params.t2)) ? acc_t(1) : acc_t(0);
  const acc_t beta = static_cast<acc_t>(params.beta);
  return {acc_t(2) * g * (push + beta * pull), acc_t(2) * g * push};
}

}  // namespace extending_pytorch
