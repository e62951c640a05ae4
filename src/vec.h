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
// extensions alone) on any GCC/clang target, to test them.
#ifndef QG_VEC_H
#define QG_VEC_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(QV_GENERIC)
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

#if defined(QV_SSE2) || defined(QV_NEON) || defined(QV_WASM) || (defined(__GNUC__) && defined(QV_GENERIC))
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

#endif
#endif
