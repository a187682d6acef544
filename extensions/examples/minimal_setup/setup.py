# The smallest setup.py that builds chapter 4's z = 2x + y extension.
# It sits in a folder with the three scale_add sources of extensions/csrc (the chapter copies
# them beside it) and builds with: pip install --no-build-isolation <that folder>
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="scale_add_minimal",
    ext_modules=[CppExtension("scale_add_minimal", ["scale_add.cpp", "scale_add_bindings.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
