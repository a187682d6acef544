// Makes the shared library importable as the Python module extending_pytorch._C.
// The operators register themselves (TORCH_LIBRARY) when the library loads, so
// the module itself is empty. No pybind11 is needed, which keeps the build fast.
#include <Python.h>

extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {
      PyModuleDef_HEAD_INIT,
      "_C",
      "C++ operators of extending_pytorch (registered on import).",
      -1,
      nullptr,
  };
  return PyModule_Create(&module);
}
