// Chapter 4, section 5: what an extension compiled against another torch release
// looks like to the dynamic loader. It calls a c10 function that the running
// torch's libc10.so does not export. The declaration below stands in for a header
// of that other release; the library compiles and links (a shared library may
// leave symbols undefined), and fails only when it is loaded.
#include <c10/macros/Export.h>

namespace c10 {
C10_API int function_of_another_torch_release(int);
}  // namespace c10

extern "C" int call_it(int x) { return c10::function_of_another_torch_release(x); }
