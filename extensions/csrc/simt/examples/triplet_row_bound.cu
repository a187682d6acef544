// A deliberately broken copy of triplet.cu's forward kernel, for chapter 5's
// "show the failure, then the fix". Cut down to float rows with unit column
// stride; the mapping is the book's: one warp per row, 8 warps per block, a
// grid-stride loop over the rows. The bug: the loop's bound is `row <= batch`,
// so one warp takes a row past the last one and reads outside the inputs.
// In the emulator's memory mode (AddressSanitizer) that is reported at the
// line of the read; in fast mode it may well go unnoticed.
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;

// Sum over the 32 lanes of a warp; every lane receives the total.
__device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

__global__ void triplet_forward_rows(const float* anchor, const float* positive,
                                     const float* negative, float* out, long long batch,
                                     long long dim, float t1, float t2, float beta) {
  const int lane = threadIdx.x % kWarpSize;
  const long long step = static_cast<long long>(gridDim.x) * kWarpsPerBlock;
  const long long first = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  for (long long row = first; row <= batch; row += step) {  // BROKEN: should be row < batch
    const float* a = anchor + row * dim;
    const float* p = positive + row * dim;
    const float* n = negative + row * dim;
    float sum_p = 0, sum_n = 0;
    for (long long j = lane; j < dim; j += kWarpSize) {
      const float dp = a[j] - p[j];
      const float dn = a[j] - n[j];
      sum_p += dp * dp;
      sum_n += dn * dn;
    }
    const float d_ap = warp_sum(sum_p);
    const float d_an = warp_sum(sum_n);
    if (lane == 0) {
      out[row] = fmaxf(d_ap - d_an, t1) + beta * fmaxf(d_ap, t2);
    }
  }
}
