// runtime.cpp: simt.h's runtime (the scheduler, the collectives, the reports),
// compiled once per build mode and linked into every module the emulator
// builds (extending_pytorch/emulator/toolchain.py), so that a kernel's build
// compiles only the kernel, its launch glue and the templates it uses. The
// modules define SIMT_SEPARATE_RUNTIME too, and see declarations only.
#define SIMT_RUNTIME_DEFINITIONS 1
#include "simt.h"
