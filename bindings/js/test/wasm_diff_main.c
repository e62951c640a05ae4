// SPDX-License-Identifier: MIT
// The differential tests for WebAssembly (run under Node): the test programs
// use cmocka, which has no wasm build, so this drives fuzz/fuzz_ops.c (an
// operation sequence run on one kind and on the brute-force oracle side by
// side, answers compared and qg_validate after every step; it aborts on any
// difference) with seeded random inputs, every kind in turn.
//
//   node build/wasm_diff-simd.js [runs per kind] [seed]
#include <quadgrid.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
    const long runs = argc > 1 ? strtol(argv[1], NULL, 10) : 200;
    const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261128u;
    printf("wasm_diff: %ld runs per kind, seed %llu\n", runs, (unsigned long long)seed);
    static uint8_t data[8192];
    long total_ops = 0;
    for (int kind = 0; kind < QG_KIND_COUNT; ++kind) {
        if (!qg_kind_available((qg_kind)kind))
            continue;
        uint64_t s = seed ^ (uint64_t)kind * 0xD1B54A32D192ED03ull;
        for (long r = 0; r < runs; ++r) {
            // Lengths from a few operations to a few thousand bytes; the
            // first byte is the kind (fuzz_ops takes it modulo the count).
            const size_t size = 16 + (size_t)(next(&s) % (r % 8 == 7 ? 8000 : 1500));
            for (size_t i = 0; i < size; i += 8) {
                const uint64_t v = next(&s);
                for (size_t j = 0; j < 8 && i + j < size; ++j)
                    data[i + j] = (uint8_t)(v >> (8 * j));
            }
            data[0] = (uint8_t)kind;
            LLVMFuzzerTestOneInput(data, size);
            total_ops += (long)size;
        }
        printf("wasm_diff: %-16s %ld runs agree with brute_force\n", qg_kind_name((qg_kind)kind), runs);
    }
    printf("wasm_diff: ok (%ld input bytes)\n", total_ops);
    return 0;
}
