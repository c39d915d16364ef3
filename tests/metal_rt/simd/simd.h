// <simd/simd.h>, which naga includes: nothing of it is used by the kernels (tests/metal_rt).
#pragma once
