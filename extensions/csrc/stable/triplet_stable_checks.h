// Input checks of the stable-ABI triplet operator, shared by its CPU kernels
// (triplet_stable.cpp) and its CUDA kernels (triplet_stable_cuda.cpp), so that
// both refuse bad input with the same words. Stable headers only.
//
// Every check reads metadata (dims, sizes, dtypes, devices), never data, and
// the device checks come last: a CUDA entry point called with CPU tensors
// (tests/test_stable_abi.py does that through the dispatcher, on a machine
// without a GPU) reports every other mistake before it reports the device.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace extending_pytorch_stable {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The backend whose kernel is checking: its inputs must all be there.
enum class Backend { CPU, CUDA };

inline std::string shape_of(const Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    out << (d ? ", " : "") << t.size(d);
  }
  out << "]";
  return out.str();
}

// "cpu", "cuda:1", or "a device other than CPU and CUDA" (a meta tensor can
// reach a kernel only when a caller redispatches to it on purpose).
inline std::string device_of(const Tensor& t) {
  if (t.is_cpu()) {
    return "cpu";
  }
  if (t.is_cuda()) {
    return "cuda:" + std::to_string(t.get_device_index());
  }
  return "a device other than CPU and CUDA";
}

inline bool is_floating(ScalarType type) {
  return type == ScalarType::Float || type == ScalarType::Double ||
         type == ScalarType::Half || type == ScalarType::BFloat16;
}

// The CPU kernels want every tensor on the CPU; the CUDA kernels want anchor
// on a GPU and every other tensor on anchor's GPU. `op` and `name` (the
// argument's name) are for the message. (Which tensor is anchor is known by
// position, not by address: the boxed call gives each argument its own
// Tensor, even where Python passed one tensor twice.)
inline void check_anchor_device(const Tensor& anchor, Backend backend) {
  if (backend == Backend::CPU) {
    STD_TORCH_CHECK(anchor.is_cpu(),
                    "triplet_hinge_loss: anchor must be on the CPU (this is the CPU kernel), "
                    "got ",
                    device_of(anchor));
  } else {
    STD_TORCH_CHECK(anchor.is_cuda(),
                    "triplet_hinge_loss: anchor must be a CUDA tensor (this is the CUDA "
                    "kernel), got ",
                    device_of(anchor));
  }
}

inline void check_same_device(const char* op, const char* name, const Tensor& tensor,
                              const Tensor& anchor, Backend backend) {
  if (backend == Backend::CPU) {
    STD_TORCH_CHECK(tensor.is_cpu(), op, ": ", name,
                    " must be on the CPU (this is the CPU kernel), got ", device_of(tensor));
  } else {
    STD_TORCH_CHECK(
        tensor.is_cuda() && tensor.get_device_index() == anchor.get_device_index(), op, ": ",
        name, " must be on anchor's device (", device_of(anchor), "), got ", device_of(tensor));
  }
}

// The backward's extra input: one value per row for reduction='none', a
// single value otherwise, in anchor's dtype (its device: check_inputs).
inline void check_grad_output(const char* op, const Tensor& grad_output, const Tensor& anchor,
                              std::string_view reduction) {
  const int64_t batch = anchor.size(0);
  if (reduction == "none") {
    STD_TORCH_CHECK(grad_output.dim() == 1 && grad_output.size(0) == batch, op,
                    ": grad_output must have shape (", batch, ",) for reduction='none', got ",
                    shape_of(grad_output));
  } else {
    STD_TORCH_CHECK(grad_output.numel() == 1, op,
                    ": grad_output must be a scalar for reduction='", std::string(reduction),
                    "', got shape ", shape_of(grad_output));
  }
  STD_TORCH_CHECK(grad_output.scalar_type() == anchor.scalar_type(), op,
                  ": grad_output must have the dtype of anchor (",
                  torch::headeronly::toString(anchor.scalar_type()), "), got ",
                  torch::headeronly::toString(grad_output.scalar_type()));
}

// The dtype of the saved squared distances: the kernels' accumulation type,
// float32 (also for float16 and bfloat16 inputs) and float64 for float64.
inline ScalarType distance_dtype(ScalarType input) {
  return input == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

// The distances the forward saved, as triplet_hinge_loss_backward_from_distances
// reads them: (batch, 2) in distance_dtype (its device: check_inputs). Any
// strides: the kernels read a contiguous copy, which for the forward's own
// output is the tensor itself.
inline void check_distances(const Tensor& distances, const Tensor& anchor) {
  STD_TORCH_CHECK(distances.dim() == 2 && distances.size(0) == anchor.size(0) &&
                      distances.size(1) == 2,
                  "triplet_hinge_loss_backward_from_distances: distances must have shape (",
                  anchor.size(0), ", 2), got ", shape_of(distances));
  const ScalarType expected = distance_dtype(anchor.scalar_type());
  STD_TORCH_CHECK(distances.scalar_type() == expected,
                  "triplet_hinge_loss_backward_from_distances: distances must have dtype ",
                  torch::headeronly::toString(expected), " for ",
                  torch::headeronly::toString(anchor.scalar_type()), " inputs, got ",
                  torch::headeronly::toString(distances.scalar_type()));
}

// Everything a kernel needs of its arguments: grad_output is null for the
// forwards, distances null but for triplet_hinge_loss_backward_from_distances.
// The devices are checked last.
inline void check_inputs(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                         double t1, double t2, double beta, std::string_view reduction,
                         Backend backend, const Tensor* grad_output = nullptr,
                         const Tensor* distances = nullptr) {
  const char* backward_op = distances != nullptr ? "triplet_hinge_loss_backward_from_distances"
                                                 : "triplet_hinge_loss_backward";
  const std::pair<const char*, const Tensor*> inputs[] = {
      {"anchor", &anchor}, {"positive", &positive}, {"negative", &negative}};
  for (const auto& [name, tensor] : inputs) {
    STD_TORCH_CHECK(tensor->dim() == 2, "triplet_hinge_loss: ", name,
                    " must be 2-D (batch, dim), got ", tensor->dim(), "-D with shape ",
                    shape_of(*tensor));
    STD_TORCH_CHECK(is_floating(tensor->scalar_type()), "triplet_hinge_loss: ", name,
                    " must have a floating-point dtype (float32, float64, float16 or "
                    "bfloat16), got ",
                    torch::headeronly::toString(tensor->scalar_type()));
  }
  for (const auto& [name, tensor] : {inputs[1], inputs[2]}) {
    STD_TORCH_CHECK(tensor->size(0) == anchor.size(0) && tensor->size(1) == anchor.size(1),
                    "triplet_hinge_loss: ", name, " must have the same shape as anchor ",
                    shape_of(anchor), ", got ", shape_of(*tensor));
    STD_TORCH_CHECK(tensor->scalar_type() == anchor.scalar_type(), "triplet_hinge_loss: ",
                    name, " must have the same dtype as anchor (",
                    torch::headeronly::toString(anchor.scalar_type()), "), got ",
                    torch::headeronly::toString(tensor->scalar_type()));
  }
  STD_TORCH_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none",
                  "triplet_hinge_loss: reduction must be 'mean', 'sum' or 'none', got '",
                  std::string(reduction), "'");
  STD_TORCH_CHECK(std::isfinite(t1) && std::isfinite(t2) && std::isfinite(beta),
                  "triplet_hinge_loss: t1, t2 and beta must be finite, got t1=", t1,
                  ", t2=", t2, ", beta=", beta);
  if (grad_output != nullptr) {
    check_grad_output(backward_op, *grad_output, anchor, reduction);
  }
  if (distances != nullptr) {
    check_distances(*distances, anchor);
  }
  check_anchor_device(anchor, backend);
  for (const auto& [name, tensor] : {inputs[1], inputs[2]}) {
    check_same_device("triplet_hinge_loss", name, *tensor, anchor, backend);
  }
  if (grad_output != nullptr) {
    check_same_device(backward_op, "grad_output", *grad_output, anchor, backend);
  }
  if (distances != nullptr) {
    check_same_device(backward_op, "distances", *distances, anchor, backend);
  }
}

}  // namespace extending_pytorch_stable
