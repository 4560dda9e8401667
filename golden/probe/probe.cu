// tcore silicon probe: run tiles through the tensor core and dump WMMA fragment layouts.
//
//   probe tiles IN OUT T    IN: T tiles of a (uint16 16x16), b (uint16 16x16), c (uint32 16x16),
//                           c16 (uint16 16x16), each array contiguous over all tiles.
//                           OUT: six arrays of T tiles: mma.sync m16n8k16 (two per tile, n 0..7
//                           and 8..15) for f32.f16.f16.f32, f32.bf16.bf16.f32, f16.f16.f16.f16,
//                           then WMMA 16x16x16 for the same three.
//   probe layout OUT        OUT: text, the storage index each lane holds in each fragment slot
//                           after load_matrix_sync of a 16x16 buffer holding 0, 1, 2, ...
//
// Fragments for mma.sync are built by hand from the PTX ISA's m16n8k16 layout
// (g = lane / 4, t = lane % 4), so the probe does not depend on WMMA's opaque layout.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "probe: %s: %s\n", #x, cudaGetErrorString(e_)); exit(3); } } while (0)

__device__ int a_row(int g, int i) { return g + ((i & 2) ? 8 : 0); }
__device__ int a_col(int t, int i) { return 2 * t + (i & 1) + ((i & 4) ? 8 : 0); }

template <int KIND>   // 0: f32.f16.f16.f32, 1: f32.bf16.bf16.f32, 2: f16.f16.f16.f16
__global__ void mma_tiles(const uint16_t* A, const uint16_t* B, const uint32_t* C,
                          const uint16_t* C16, uint32_t* D32, uint16_t* D16, int T) {
    int tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    if (tile >= T) return;
    const uint16_t* a = A + tile * 256;
    const uint16_t* b = B + tile * 256;
    uint32_t ra[4];
    for (int r = 0; r < 4; r++) {
        int i = 2 * r;
        ra[r] = a[a_row(g, i) * 16 + a_col(t, i)] | (uint32_t(a[a_row(g, i + 1) * 16 + a_col(t, i + 1)]) << 16);
    }
    for (int nh = 0; nh < 2; nh++) {
        uint32_t rb[2];
        for (int r = 0; r < 2; r++) {
            int k0 = 2 * t + ((r & 1) ? 8 : 0);
            int n = g + 8 * nh;
            rb[r] = b[k0 * 16 + n] | (uint32_t(b[(k0 + 1) * 16 + n]) << 16);
        }
        // C/D element i: row g (+8 for i >= 2), column 2t + (i & 1) + 8 nh.
        int idx[4];
        for (int i = 0; i < 4; i++) idx[i] = tile * 256 + (g + ((i & 2) ? 8 : 0)) * 16 + 2 * t + (i & 1) + 8 * nh;
        if (KIND == 2) {
            uint32_t rc0 = C16[idx[0]] | (uint32_t(C16[idx[1]]) << 16);
            uint32_t rc1 = C16[idx[2]] | (uint32_t(C16[idx[3]]) << 16);
            uint32_t d0, d1;
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
                         : "=r"(d0), "=r"(d1)
                         : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "r"(rc0), "r"(rc1));
            D16[idx[0]] = d0 & 0xFFFF; D16[idx[1]] = d0 >> 16;
            D16[idx[2]] = d1 & 0xFFFF; D16[idx[3]] = d1 >> 16;
        } else {
            float c[4], d[4];
            for (int i = 0; i < 4; i++) c[i] = __uint_as_float(C[idx[i]]);
            if (KIND == 0)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                             : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                               "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
            else
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                             : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                               "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
            for (int i = 0; i < 4; i++) D32[idx[i]] = __float_as_uint(d[i]);
        }
    }
}

template <int KIND>
__global__ void wmma_tiles(const uint16_t* A, const uint16_t* B, const uint32_t* C,
                           const uint16_t* C16, uint32_t* D32, uint16_t* D16, int T) {
    int tile = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (tile >= T) return;
    const uint16_t* a = A + tile * 256;
    const uint16_t* b = B + tile * 256;
    if (KIND == 1) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
        wmma::load_matrix_sync(fa, (const __nv_bfloat16*)a, 16);
        wmma::load_matrix_sync(fb, (const __nv_bfloat16*)b, 16);
        wmma::load_matrix_sync(fc, (const float*)(C + tile * 256), 16, wmma::mem_row_major);
        wmma::mma_sync(fc, fa, fb, fc);
        wmma::store_matrix_sync((float*)(D32 + tile * 256), fc, 16, wmma::mem_row_major);
    } else {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, (const half*)a, 16);
        wmma::load_matrix_sync(fb, (const half*)b, 16);
        if (KIND == 0) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
            wmma::load_matrix_sync(fc, (const float*)(C + tile * 256), 16, wmma::mem_row_major);
            wmma::mma_sync(fc, fa, fb, fc);
            wmma::store_matrix_sync((float*)(D32 + tile * 256), fc, 16, wmma::mem_row_major);
        } else {
            wmma::fragment<wmma::accumulator, 16, 16, 16, half> fc;
            wmma::load_matrix_sync(fc, (const half*)(C16 + tile * 256), 16, wmma::mem_row_major);
            wmma::mma_sync(fc, fa, fb, fc);
            wmma::store_matrix_sync((half*)(D16 + tile * 256), fc, 16, wmma::mem_row_major);
        }
    }
}

// Layout dump: value of every slot of every lane after load_matrix_sync of 0, 1, 2, ...
template <typename Frag, typename T, bool ACC>
__global__ void dump(const T* buf, float* out, wmma::layout_t acc_layout) {
    Frag f;
    if constexpr (ACC) wmma::load_matrix_sync(f, buf, 16, acc_layout);
    else wmma::load_matrix_sync(f, buf, 16);
    int lane = threadIdx.x;
    for (int i = 0; i < f.num_elements; i++) out[lane * f.num_elements + i] = float(f.x[i]);
}

template <typename Frag, typename T, bool ACC>
void dump_one(FILE* f, const char* heading, wmma::layout_t acc_layout = wmma::mem_row_major) {
    std::vector<T> h(256);
    for (int i = 0; i < 256; i++) h[i] = T(float(i));
    T* dbuf; float* dout;
    CHECK(cudaMalloc(&dbuf, 256 * sizeof(T)));
    CHECK(cudaMalloc(&dout, 32 * 16 * sizeof(float)));
    CHECK(cudaMemcpy(dbuf, h.data(), 256 * sizeof(T), cudaMemcpyHostToDevice));
    dump<Frag, T, ACC><<<1, 32>>>(dbuf, dout, acc_layout);
    CHECK(cudaGetLastError());
    int n = Frag::num_elements;
    std::vector<float> o(32 * n);
    CHECK(cudaMemcpy(o.data(), dout, o.size() * sizeof(float), cudaMemcpyDeviceToHost));
    fprintf(f, "# %s num_elements=%d (value = storage index in the 16x16 buffer)\n", heading, n);
    for (int lane = 0; lane < 32; lane++) {
        fprintf(f, "lane %2d:", lane);
        for (int i = 0; i < n; i++) fprintf(f, " %3d", int(o[lane * n + i]));
        fprintf(f, "\n");
    }
    cudaFree(dbuf); cudaFree(dout);
}

static std::vector<char> slurp(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "probe: cannot read %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    std::vector<char> v(n);
    if (fread(v.data(), 1, n, f) != size_t(n)) { fprintf(stderr, "probe: short read\n"); exit(2); }
    fclose(f);
    return v;
}

int main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "layout") {
        FILE* f = fopen(argv[2], "w");
        using namespace wmma;
        dump_one<fragment<matrix_a, 16, 16, 16, half, row_major>, half, false>(f, "matrix_a row_major");
        dump_one<fragment<matrix_a, 16, 16, 16, half, col_major>, half, false>(f, "matrix_a col_major");
        dump_one<fragment<matrix_b, 16, 16, 16, half, row_major>, half, false>(f, "matrix_b row_major");
        dump_one<fragment<matrix_b, 16, 16, 16, half, col_major>, half, false>(f, "matrix_b col_major");
        dump_one<fragment<accumulator, 16, 16, 16, float>, float, true>(f, "accumulator mem_row_major", mem_row_major);
        dump_one<fragment<accumulator, 16, 16, 16, float>, float, true>(f, "accumulator mem_col_major", mem_col_major);
        fclose(f);
        return 0;
    }
    if (argc != 5 || std::string(argv[1]) != "tiles") {
        fprintf(stderr, "usage: probe tiles IN OUT T | probe layout OUT\n");
        return 2;
    }
    int T = atoi(argv[4]);
    std::vector<char> in = slurp(argv[2]);
    size_t n = size_t(T) * 256;
    if (in.size() != n * (2 + 2 + 4 + 2)) { fprintf(stderr, "probe: input size does not match T\n"); return 2; }
    char *din, *dout;
    size_t out_bytes = n * (4 + 4 + 2) * 2;
    CHECK(cudaMalloc(&din, in.size()));
    CHECK(cudaMalloc(&dout, out_bytes));
    CHECK(cudaMemcpy(din, in.data(), in.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0, out_bytes));
    const uint16_t* A = (const uint16_t*)din;
    const uint16_t* B = A + n;
    const uint32_t* C = (const uint32_t*)(B + n);
    const uint16_t* C16 = (const uint16_t*)(C + n);
    uint32_t* m32 = (uint32_t*)dout;          // mma f16_f32, then bf16_f32
    uint16_t* m16 = (uint16_t*)(m32 + 2 * n); // mma f16_f16
    uint32_t* w32 = (uint32_t*)(m16 + n);     // wmma f16_f32, bf16_f32
    uint16_t* w16 = (uint16_t*)(w32 + 2 * n); // wmma f16_f16
    int threads = 128, blocks = (T * 32 + threads - 1) / threads;
    mma_tiles<0><<<blocks, threads>>>(A, B, C, C16, m32, nullptr, T);
    mma_tiles<1><<<blocks, threads>>>(A, B, C, C16, m32 + n, nullptr, T);
    mma_tiles<2><<<blocks, threads>>>(A, B, C, C16, nullptr, m16, T);
    wmma_tiles<0><<<blocks, threads>>>(A, B, C, C16, w32, nullptr, T);
    wmma_tiles<1><<<blocks, threads>>>(A, B, C, C16, w32 + n, nullptr, T);
    wmma_tiles<2><<<blocks, threads>>>(A, B, C, C16, nullptr, w16, T);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<char> out(out_bytes);
    CHECK(cudaMemcpy(out.data(), dout, out_bytes, cudaMemcpyDeviceToHost));
    FILE* f = fopen(argv[3], "wb");
    fwrite(out.data(), 1, out_bytes, f);
    fclose(f);
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    printf("%s|sm_%d%d|%d|%d\n", p.name, p.major, p.minor, drv, rt);
    return 0;
}
