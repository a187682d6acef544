// Python bindings of scale_add with pybind11. torch/extension.h brings pybind11
// and the conversions between torch.Tensor and at::Tensor.
#include <torch/extension.h>

#include "scale_add.h"

// TORCH_EXTENSION_NAME is the module name the build gives: "_scale_add" when
// built by setup.py, the `name` argument of torch.utils.cpp_extension.load().
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "z = 2x + y, forward and backward";
  m.def("forward", &extending_pytorch::scale_add_forward, "z = 2x + y", py::arg("x"),
        py::arg("y"));
  m.def("backward", &extending_pytorch::scale_add_backward,
        "gradients (2 g, g) of z = 2x + y", py::arg("grad_z"));
}
