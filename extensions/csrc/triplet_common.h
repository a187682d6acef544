// What every backend of extending_pytorch::triplet_hinge_loss shares: the
// input checks (each TORCH_CHECK names the argument, what was expected and
// what was given) and the reduction of the per-triplet losses.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <optional>
#include <string_view>

namespace extending_pytorch {

// The dtypes the kernels are compiled for. at::isFloatingType also accepts the
// 8-bit float types (float8_e4m3fn, ...), which the kernels have no code for:
// they are refused here with the same message as integers.
inline bool is_supported_dtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
         dtype == at::kBFloat16;
}

inline void check_triplet_inputs(const at::Tensor& anchor, const at::Tensor& positive,
                                 const at::Tensor& negative, double t1, double t2,
                                 double beta, std::string_view reduction) {
  const std::pair<const char*, const at::Tensor*> inputs[] = {
      {"anchor", &anchor}, {"positive", &positive}, {"negative", &negative}};
  for (const auto& [name, tensor] : inputs) {
    TORCH_CHECK(tensor->dim() == 2, "triplet_hinge_loss: ", name,
                " must be 2-D (batch, dim), got ", tensor->dim(), "-D with shape ",
                tensor->sizes());
    TORCH_CHECK(is_supported_dtype(tensor->scalar_type()), "triplet_hinge_loss: ", name,
                " must have a floating-point dtype (float32, float64, float16 or bfloat16), got ",
                tensor->scalar_type());
  }
  for (const auto& [name, tensor] : {inputs[1], inputs[2]}) {
    TORCH_CHECK(tensor->sizes() == anchor.sizes(), "triplet_hinge_loss: ", name,
                " must have the same shape as anchor ", anchor.sizes(), ", got ",
                tensor->sizes());
    TORCH_CHECK(tensor->scalar_type() == anchor.scalar_type(), "triplet_hinge_loss: ",
                name, " must have the same dtype as anchor (", anchor.scalar_type(),
                "), got ", tensor->scalar_type());
    TORCH_CHECK(tensor->device() == anchor.device(), "triplet_hinge_loss: ", name,
                " must be on the same device as anchor (", anchor.device(), "), got ",
                tensor->device());
  }
  TORCH_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none",
              "triplet_hinge_loss: reduction must be 'mean', 'sum' or 'none', got '",
              reduction, "'");
  TORCH_CHECK(std::isfinite(t1) && std::isfinite(t2) && std::isfinite(beta),
              "triplet_hinge_loss: t1, t2 and beta must be finite, got t1=", t1,
              ", t2=", t2, ", beta=", beta);
}

inline void check_grad_output(const at::Tensor& grad_output, const at::Tensor& anchor,
                              std::string_view reduction) {
  if (reduction == "none") {
    TORCH_CHECK(grad_output.dim() == 1 && grad_output.size(0) == anchor.size(0),
                "triplet_hinge_loss_backward: grad_output must have shape (",
                anchor.size(0), ",) for reduction='none', got ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1,
                "triplet_hinge_loss_backward: grad_output must be a scalar for reduction='",
                reduction, "', got shape ", grad_output.sizes());
  }
  TORCH_CHECK(grad_output.scalar_type() == anchor.scalar_type(),
              "triplet_hinge_loss_backward: grad_output must have the dtype of anchor (",
              anchor.scalar_type(), "), got ", grad_output.scalar_type());
  TORCH_CHECK(grad_output.device() == anchor.device(),
              "triplet_hinge_loss_backward: grad_output must be on the device of anchor (",
              anchor.device(), "), got ", grad_output.device());
}

// "none" keeps the per-triplet losses; "mean" and "sum" reduce them with ATen,
// which is deterministic and matches the reference's own reduction.
inline at::Tensor reduce_losses(const at::Tensor& per_triplet, std::string_view reduction) {
  if (reduction == "none") {
    return per_triplet;
  }
  return reduction == "sum" ? per_triplet.sum() : per_triplet.mean();
}

// ---- Fewer bytes: saved distances, gradients computed in the forward ----

// The dtype of the saved squared distances: the kernels' accumulation type.
inline at::ScalarType distance_dtype(at::ScalarType input) {
  return input == at::kDouble ? at::kDouble : at::kFloat;
}

// The (batch, 2) distances triplet_hinge_loss_with_distances returned.
inline void check_distances(const at::Tensor& distances, const at::Tensor& anchor) {
  TORCH_CHECK(distances.dim() == 2 && distances.size(0) == anchor.size(0) &&
                  distances.size(1) == 2,
              "triplet_hinge_loss_backward_from_distances: distances must have shape (",
              anchor.size(0), ", 2), got ", distances.sizes());
  TORCH_CHECK(distances.scalar_type() == distance_dtype(anchor.scalar_type()),
              "triplet_hinge_loss_backward_from_distances: distances must have dtype ",
              distance_dtype(anchor.scalar_type()), " for ", anchor.scalar_type(),
              " inputs, got ", distances.scalar_type());
  TORCH_CHECK(distances.device() == anchor.device(),
              "triplet_hinge_loss_backward_from_distances: distances must be on the device of "
              "anchor (", anchor.device(), "), got ", distances.device());
  TORCH_CHECK(distances.is_contiguous(),
              "triplet_hinge_loss_backward_from_distances: distances must be contiguous");
}

// The gradients triplet_scale_gradients_ multiplies in place: contiguous,
// (batch, dim), grad_output's dtype and device; at least one of them.
inline void check_saved_gradients(const at::Tensor& grad_output,
                                  const std::optional<at::Tensor>* gradients,
                                  std::string_view reduction) {
  TORCH_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none",
              "triplet_scale_gradients_: reduction must be 'mean', 'sum' or 'none', got '",
              reduction, "'");
  TORCH_CHECK(is_supported_dtype(grad_output.scalar_type()),
              "triplet_scale_gradients_: grad_output must have a floating-point dtype (float32, "
              "float64, float16 or bfloat16), got ", grad_output.scalar_type());
  const char* names[] = {"grad_anchor", "grad_positive", "grad_negative"};
  const at::Tensor* first = nullptr;
  for (int k = 0; k < 3; ++k) {
    if (!gradients[k].has_value() || !gradients[k]->defined()) continue;
    const at::Tensor& g = *gradients[k];
    if (first == nullptr) first = &g;
    for (int other = 0; other < k; ++other) {
      // The same memory twice would be scaled twice.
      TORCH_CHECK(!gradients[other].has_value() || !gradients[other]->defined() ||
                      !g.is_alias_of(*gradients[other]),
                  "triplet_scale_gradients_: ", names[k], " and ", names[other],
                  " must be different tensors");
    }
    TORCH_CHECK(g.dim() == 2 && g.is_contiguous() && g.sizes() == first->sizes(),
                "triplet_scale_gradients_: ", names[k],
                " must be a contiguous (batch, dim) tensor shaped like the others, got shape ",
                g.sizes());
    TORCH_CHECK(g.scalar_type() == grad_output.scalar_type() &&
                    g.device() == grad_output.device(),
                "triplet_scale_gradients_: ", names[k], " must have grad_output's dtype (",
                grad_output.scalar_type(), ") and device (", grad_output.device(), "), got ",
                g.scalar_type(), " on ", g.device());
  }
  if (first == nullptr) return;
  if (reduction == "none") {
    TORCH_CHECK(grad_output.dim() == 1 && grad_output.size(0) == first->size(0),
                "triplet_scale_gradients_: grad_output must have shape (", first->size(0),
                ",) for reduction='none', got ", grad_output.sizes());
  } else {
    TORCH_CHECK(grad_output.numel() == 1,
                "triplet_scale_gradients_: grad_output must be a scalar for reduction='",
                reduction, "', got shape ", grad_output.sizes());
  }
}

}  // namespace extending_pytorch
