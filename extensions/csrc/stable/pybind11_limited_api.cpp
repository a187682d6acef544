// A minimal pybind11 module, compiled by chapter 7 (section 3) twice with
// -fsyntax-only: against CPython's full C API, and with Py_LIMITED_API as a
// py_limited_api=True build defines it. pybind11 is written against the full
// API, so the second compile fails inside pybind11's own headers. Not part of
// any build.
#include <pybind11/pybind11.h>

int answer() { return 42; }

PYBIND11_MODULE(limited_api_probe, m) { m.def("answer", &answer); }
