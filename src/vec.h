// SPDX-License-Identifier: MIT
// The portable vectors of the hand-vectorised kernels: GCC/clang vector
// extensions (vector_size(16): SSE2 on x86-64, NEON on aarch64, SIMD128 on
// WebAssembly with -msimd128), plus the two operations the extensions lack
// or lower badly, with each platform's instruction and a generic fallback:
// a lane mask (movemask) and a narrowing of 32-bit lanes to 16 bits (SSE2
// has no even-lane shuffle; GCC's lowering of one takes seven
// instructions where packssdw takes one).
//
// QV_HAVE is defined where the kernels are worth running: a platform with
// a 128-bit integer unit. -DQV_GENERIC forces the generic fallbacks (the
// extensions alone) on any GCC/clang target, to test them. -DQV_SCALAR
// turns every vector form off (the AVX2 ones too: qg_cpu_avx2), so the
// scalar forms that a platform without a vector unit runs can be tested and
// timed on any machine.
//
// Two families: sixteen-bit lanes (qv_i16, the point grid's pair kernels)
// and four-lane floats (qv_f32, the boxes' tests and cell mappings of
// every kind). The float family's operations are the SSE2 instructions the
// kernels were first written with, so the x86-64 objects did not change
// when the kernels moved onto this header.
#ifndef QG_VEC_H
#define QG_VEC_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(QV_GENERIC) && !defined(QV_SCALAR)
#if defined(__SSE2__)
#include <emmintrin.h>
#define QV_SSE2 1
#elif defined(__ARM_NEON) && defined(__aarch64__) && defined(__ARM_ARCH_ISA_A64) && !defined(__ARM_BIG_ENDIAN)
#include <arm_neon.h>
#define QV_NEON 1
#elif defined(__wasm_simd128__)
#include <wasm_simd128.h>
#define QV_WASM 1
#endif
#endif

#if defined(QV_SSE2) || defined(QV_NEON) || defined(QV_WASM) || (defined(__GNUC__) && defined(QV_GENERIC) && !defined(QV_SCALAR))
#define QV_HAVE 1

/// Eight 16-bit lanes (signed: the kernels compare coordinates), eight
/// unsigned ones, four unsigned 32-bit ones.
typedef int16_t qv_i16 __attribute__((vector_size(16)));
typedef uint16_t qv_u16 __attribute__((vector_size(16)));
typedef uint32_t qv_u32 __attribute__((vector_size(16)));

/// Bits per lane in a qv_mask2 mask: NEON's narrowing shift gives four
/// (cheaper than summing weighted lanes), the others one.
#if defined(QV_NEON)
#define QV_LANE_BITS 4
#define QV_ALL16 (~(uint64_t)0)
#else
#define QV_LANE_BITS 1
#define QV_ALL16 ((uint64_t)0xFFFF)
#endif

/// The mask of the first n lanes of sixteen (n from 0 to 16).
static inline uint64_t qv_first(int32_t n)
{
    return n >= 16 ? QV_ALL16 : (((uint64_t)1) << (QV_LANE_BITS * n)) - 1u;
}

static inline qv_i16 qv_load_i16(const void *p)
{
    qv_i16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline qv_u32 qv_load_u32(const void *p)
{
    qv_u32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void qv_store_i16(void *p, qv_i16 v)
{
    memcpy(p, &v, sizeof v);
}

static inline qv_i16 qv_set1(int32_t x)
{
    const int16_t h = (int16_t)x;
    return (qv_i16){h, h, h, h, h, h, h, h};
}

/// The lanes of a and then b, each below 65536, as sixteen-bit lanes.
static inline qv_i16 qv_narrow(qv_u32 a, qv_u32 b)
{
#if defined(QV_SSE2)
    return (qv_i16)_mm_packs_epi32((__m128i)a, (__m128i)b); // the kernels' lanes are below 32768
#elif defined(QV_NEON)
    return (qv_i16)vcombine_u16(vmovn_u32((uint32x4_t)a), vmovn_u32((uint32x4_t)b));
#elif defined(QV_WASM)
    return (qv_i16)wasm_u16x8_narrow_i32x4((v128_t)a, (v128_t)b);
#else
    const qv_i16 x = (qv_i16)a, y = (qv_i16)b;
    return (qv_i16){x[0], x[2], x[4], x[6], y[0], y[2], y[4], y[6]}; // little-endian lanes
#endif
}

/// The lanes of lo and then hi that are true (all ones; the rest are zero)
/// as a mask of QV_LANE_BITS bits per lane, lane 0 lowest.
static inline uint64_t qv_mask2(qv_i16 lo, qv_i16 hi)
{
#if defined(QV_SSE2)
    return (uint32_t)_mm_movemask_epi8(_mm_packs_epi16((__m128i)lo, (__m128i)hi));
#elif defined(QV_NEON)
    const uint8x16_t b = vcombine_u8(vmovn_u16((uint16x8_t)lo), vmovn_u16((uint16x8_t)hi));
    return vget_lane_u64(vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(b), 4)), 0);
#elif defined(QV_WASM)
    return (uint32_t)wasm_i8x16_bitmask(wasm_i8x16_narrow_i16x8((v128_t)lo, (v128_t)hi));
#else
    uint64_t m = 0;
    for (int i = 0; i < 8; ++i)
        m |= (uint64_t)(lo[i] & 1) << i | (uint64_t)(hi[i] & 1) << (i + 8);
    return m;
#endif
}

/// Sixteen 32-bit lanes (of a, b, c, d in turn) that are zero, as a mask of
/// QV_LANE_BITS bits per lane: the saturating narrowings keep a nonzero
/// lane nonzero.
static inline uint64_t qv_zero32_mask4(qv_u32 a, qv_u32 b, qv_u32 c, qv_u32 d)
{
#if defined(QV_SSE2)
    const __m128i h = _mm_packs_epi16(_mm_packs_epi32((__m128i)a, (__m128i)b), _mm_packs_epi32((__m128i)c, (__m128i)d));
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(h, _mm_setzero_si128()));
#elif defined(QV_NEON)
    const int16x8_t lo = vcombine_s16(vqmovn_s32((int32x4_t)a), vqmovn_s32((int32x4_t)b));
    const int16x8_t hi = vcombine_s16(vqmovn_s32((int32x4_t)c), vqmovn_s32((int32x4_t)d));
    const uint8x16_t z = vceqzq_s8(vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    return vget_lane_u64(vreinterpret_u64_u8(vshrn_n_u16(vreinterpretq_u16_u8(z), 4)), 0);
#elif defined(QV_WASM)
    const v128_t h = wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4((v128_t)a, (v128_t)b),
                                             wasm_i16x8_narrow_i32x4((v128_t)c, (v128_t)d));
    return (uint32_t)wasm_i8x16_bitmask(wasm_i8x16_eq(h, wasm_i8x16_splat(0)));
#else
    const qv_u32 z = {0, 0, 0, 0};
    return qv_mask2(qv_narrow((qv_u32)(a == z), (qv_u32)(b == z)), qv_narrow((qv_u32)(c == z), (qv_u32)(d == z)));
#endif
}

/// Four 32-bit lanes of x.
static inline qv_u32 qv_set1_u32(uint32_t x)
{
    return (qv_u32){x, x, x, x};
}

/// Lanes 0-3 of a and b interleaved (a0, b0, a1, b1, ...), and lanes 4-7.
#if defined(__clang__) || __GNUC__ >= 12
#define qv_zip_lo(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define qv_zip_hi(a, b) __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#else
#define qv_zip_lo(a, b) __builtin_shuffle(a, b, (qv_i16){0, 8, 1, 9, 2, 10, 3, 11})
#define qv_zip_hi(a, b) __builtin_shuffle(a, b, (qv_i16){4, 12, 5, 13, 6, 14, 7, 15})
#endif

/// The lane of mask m's lowest set lane (m nonzero), and m without it.
static inline int32_t qv_next(uint64_t *m)
{
    const int b = __builtin_ctzll(*m);
    *m &= ~((((uint64_t)1 << QV_LANE_BITS) - 1u) << b);
    return b / QV_LANE_BITS;
}

/// Four floats and four 32-bit lane masks (all ones or zero) of comparing
/// them.
typedef float qv_f32 __attribute__((vector_size(16)));
typedef int32_t qv_i32 __attribute__((vector_size(16)));

#if defined(__clang__) || __GNUC__ >= 12
#define QV_SHUFFLE4(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#define QV_SHUFFLE4(a, b, i, j, k, l) __builtin_shuffle(a, b, (qv_i32){i, j, k, l})
#endif

/// (a, b, c, d). On x86-64 built from two 8-byte halves joined in
/// registers (unpcklpd): a box passed by value arrives in two registers,
/// and the four floats' usual build spills them and reloads 16 bytes,
/// which stalls on store forwarding (GCC and clang).
static inline qv_f32 qv_f4(float a, float b, float c, float d)
{
#if defined(QV_SSE2)
    typedef float qv_f2 __attribute__((vector_size(8)));
    const qv_f2 lo = {a, b}, hi = {c, d};
    double dl, dh;
    memcpy(&dl, &lo, sizeof dl);
    memcpy(&dh, &hi, sizeof dh);
    return (qv_f32)_mm_castpd_ps(_mm_setr_pd(dl, dh));
#else
    return (qv_f32){a, b, c, d};
#endif
}

static inline qv_f32 qv_splat(float x)
{
    return (qv_f32){x, x, x, x};
}

static inline qv_i32 qv_splat_i32(int32_t x)
{
    return (qv_i32){x, x, x, x};
}

static inline qv_f32 qv_loadf(const float *p)
{
    qv_f32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void qv_storef(float *p, qv_f32 v)
{
    memcpy(p, &v, sizeof v);
}

static inline qv_i32 qv_load_i32(const void *p)
{
    qv_i32 v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void qv_store_i32(void *p, qv_i32 v)
{
    memcpy(p, &v, sizeof v);
}

/// Lane masks of a <= b and a < b: false where either lane is NaN.
static inline qv_i32 qv_le(qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_cmple_ps((__m128)a, (__m128)b);
#else
    return (qv_i32)(a <= b);
#endif
}

static inline qv_i32 qv_lt(qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_cmplt_ps((__m128)a, (__m128)b);
#else
    return (qv_i32)(a < b);
#endif
}

static inline qv_i32 qv_eq(qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_cmpeq_ps((__m128)a, (__m128)b);
#else
    return (qv_i32)(a == b);
#endif
}

/// The sign bits of four 32-bit lanes as bits 0-3 (lane 0 lowest): for
/// lane masks, the lanes that are true.
static inline int qv_bits(qv_i32 m)
{
#if defined(QV_SSE2)
    return _mm_movemask_ps((__m128)m);
#elif defined(QV_NEON)
    // Each lane all ones where its sign is set (arithmetic shift), then its
    // bit: shifting to 0/1 first and masking would leave only lane 0's.
    const uint32x4_t w = {1, 2, 4, 8};
    return (int)vaddvq_u32(vandq_u32(vreinterpretq_u32_s32(vshrq_n_s32((int32x4_t)m, 31)), w));
#elif defined(QV_WASM)
    return (int)wasm_i32x4_bitmask((v128_t)m);
#else
    return (int)(((uint32_t)m[0] >> 31) | ((uint32_t)m[1] >> 31) << 1 | ((uint32_t)m[2] >> 31) << 2 |
                 ((uint32_t)m[3] >> 31) << 3);
#endif
}

/// Lanes of a where m is true, else of b.
static inline qv_f32 qv_select(qv_i32 m, qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_or_ps(_mm_and_ps((__m128)m, (__m128)a), _mm_andnot_ps((__m128)m, (__m128)b));
#elif defined(QV_NEON)
    return (qv_f32)vbslq_f32((uint32x4_t)m, (float32x4_t)a, (float32x4_t)b);
#elif defined(QV_WASM)
    return (qv_f32)wasm_v128_bitselect((v128_t)a, (v128_t)b, (v128_t)m);
#else
    return (qv_f32)(((qv_i32)a & m) | ((qv_i32)b & ~m));
#endif
}

/// a < b ? a : b and a > b ? a : b lane by lane: SSE2's minps and maxps
/// (b where either is NaN). The kernels give them finite lanes only.
static inline qv_f32 qv_min(qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_min_ps((__m128)a, (__m128)b);
#elif defined(QV_WASM)
    return (qv_f32)wasm_f32x4_pmin((v128_t)b, (v128_t)a); // pmin(x, y) is y < x ? y : x
#else
    return qv_select(qv_lt(a, b), a, b);
#endif
}

static inline qv_f32 qv_max(qv_f32 a, qv_f32 b)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_max_ps((__m128)a, (__m128)b);
#elif defined(QV_WASM)
    return (qv_f32)wasm_f32x4_pmax((v128_t)b, (v128_t)a);
#else
    return qv_select(qv_lt(b, a), a, b);
#endif
}

/// Lanes truncated toward zero to int32 (each within int32's range) and
/// int32 lanes as floats.
static inline qv_i32 qv_trunc(qv_f32 v)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_cvttps_epi32((__m128)v);
#else
    return __builtin_convertvector(v, qv_i32);
#endif
}

static inline qv_f32 qv_float(qv_i32 v)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_cvtepi32_ps((__m128i)v);
#else
    return __builtin_convertvector(v, qv_f32);
#endif
}

/// (v2, v3, v2, v3) and (v0, v1, v0, v1): SSE2's movhlps and movlhps.
static inline qv_f32 qv_high2(qv_f32 v)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_movehl_ps((__m128)v, (__m128)v);
#else
    return QV_SHUFFLE4(v, v, 2, 3, 2, 3);
#endif
}

static inline qv_f32 qv_low2(qv_f32 v)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_movelh_ps((__m128)v, (__m128)v);
#else
    return QV_SHUFFLE4(v, v, 0, 1, 0, 1);
#endif
}

/// v with the sign of each lane flipped where `flip` has its sign bit set.
static inline qv_f32 qv_flip(qv_f32 v, qv_i32 flip)
{
#if defined(QV_SSE2)
    return (qv_f32)_mm_xor_ps((__m128)v, (__m128)flip);
#else
    return (qv_f32)((qv_i32)v ^ flip);
#endif
}

/// The 16 bytes at p that are not zero, as bits 0-15 (byte 0 lowest).
static inline uint32_t qv_nonzero8(const void *p)
{
    typedef uint8_t qv_u8 __attribute__((vector_size(16)));
    qv_u8 v;
    memcpy(&v, p, sizeof v);
#if defined(QV_SSE2)
    return ~(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8((__m128i)v, _mm_setzero_si128())) & 0xFFFFu;
#elif defined(QV_NEON)
    const uint8x16_t w = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t t = vandq_u8(vtstq_u8((uint8x16_t)v, (uint8x16_t)v), w);
    return (uint32_t)vaddv_u8(vget_low_u8(t)) | (uint32_t)vaddv_u8(vget_high_u8(t)) << 8;
#elif defined(QV_WASM)
    return (uint32_t)wasm_i8x16_bitmask(wasm_v128_not(wasm_i8x16_eq((v128_t)v, wasm_i8x16_splat(0))));
#else
    uint32_t m = 0;
    for (int i = 0; i < 16; ++i)
        m |= (uint32_t)(v[i] != 0) << i;
    return m;
#endif
}

/// Nonzero when every lane of v is zero.
static inline int qv_none(qv_i32 v)
{
#if defined(QV_SSE2)
    return _mm_movemask_epi8(_mm_cmpeq_epi32((__m128i)v, _mm_setzero_si128())) == 0xFFFF;
#elif defined(QV_NEON)
    return vmaxvq_u32((uint32x4_t)v) == 0;
#elif defined(QV_WASM)
    return !wasm_v128_any_true((v128_t)v);
#else
    return (v[0] | v[1] | v[2] | v[3]) == 0;
#endif
}

/// The four uint16 at p, zero-extended to 32-bit lanes (the point grid's
/// quantized offsets: SSE2's unpack of an 8-byte load against zero).
static inline qv_i32 qv_load_u16x4(const void *p)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_unpacklo_epi16(_mm_loadl_epi64((const __m128i *)p), _mm_setzero_si128());
#elif defined(QV_NEON)
    uint16_t h[4];
    memcpy(h, p, sizeof h);
    return (qv_i32)vmovl_u16(vld1_u16(h));
#elif defined(QV_WASM)
    return (qv_i32)wasm_u32x4_load16x4(p);
#else
    typedef uint16_t qv_u16x4 __attribute__((vector_size(8)));
    qv_u16x4 h;
    memcpy(&h, p, sizeof h);
    return __builtin_convertvector(h, qv_i32);
#endif
}

/// ~a & b: SSE2's pandn, NEON's bic. Spelled with operators, GCC folds
/// ~(x == y) & z into a compare of x == y against zero and an and.
static inline qv_i32 qv_andnot(qv_i32 a, qv_i32 b)
{
#if defined(QV_SSE2)
    return (qv_i32)_mm_andnot_si128((__m128i)a, (__m128i)b);
#elif defined(QV_NEON)
    return (qv_i32)vbicq_s32((int32x4_t)b, (int32x4_t)a);
#elif defined(QV_WASM)
    return (qv_i32)wasm_v128_andnot((v128_t)b, (v128_t)a);
#else
    return ~a & b;
#endif
}

/// Nonzero when every lane of lane mask m is true (a grid's two cell ranges
/// equal).
static inline int qv_all(qv_i32 m)
{
#if defined(QV_SSE2)
    return _mm_movemask_epi8((__m128i)m) == 0xFFFF;
#elif defined(QV_NEON)
    return vminvq_u32((uint32x4_t)m) != 0u;
#elif defined(QV_WASM)
    return wasm_i32x4_all_true((v128_t)m);
#else
    return (m[0] & m[1] & m[2] & m[3]) != 0;
#endif
}

#endif

/// Waits a moment in a spin loop (x86 pause, ARM yield).
static inline void qv_pause(void)
{
#if defined(QV_SSE2)
    _mm_pause();
#elif defined(__aarch64__) && defined(__GNUC__)
    __asm__ __volatile__("yield");
#endif
}

#endif
