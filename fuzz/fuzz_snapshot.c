// SPDX-License-Identifier: MIT
// libFuzzer target: hostile snapshots for qg_snapshot_read. The input
// changes bytes of a real snapshot (one per kind, of a world with static
// elements, filters and events, made once) and then, as an attacker who read
// docs/rollback.md would, makes the checksum agree, so the reads get past it
// to the structure's own checks; an input whose first byte is odd is read as
// a snapshot as it is. Every read must be refused, or give an index that
// passes qg_validate and runs frames of every call; ASan and UBSan watch
// the reads and the frames. QG_FUZZ_KIND=name picks the kind (CI gives each
// its own time); otherwise the second byte does.
//
//   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DQG_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_snapshot
//   QG_FUZZ_KIND=point_grid build-fuzz/fuzz/fuzz_snapshot -max_total_time=60
#include "rollback_driver.h"

#include <stdio.h>

/// docs/rollback.md's checksum.
static uint64_t checksum(const unsigned char *p, size_t n)
{
    const uint64_t m = 0x9E3779B97F4A7C15ull;
    uint64_t h[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull, 0x082EFA98EC4E6C89ull};
    for (size_t i = 0; i < n; i += 32) {
        unsigned char q[32] = {0};
        memcpy(q, p + i, n - i < 32 ? n - i : 32);
        for (int k = 0; k < 4; ++k) {
            uint64_t v = 0;
            for (int b = 7; b >= 0; --b)
                v = v << 8 | q[8 * k + b];
            h[k] = (h[k] ^ v) * m;
            h[k] ^= h[k] >> 29;
        }
    }
    uint64_t r = (uint64_t)n * m;
    for (int k = 0; k < 4; ++k) {
        r = (r ^ h[k]) * m;
        r ^= r >> 31;
    }
    return r;
}

static unsigned char *snap[QG_KIND_COUNT];
static size_t snap_len[QG_KIND_COUNT];
static rb_world world;

static void make_snapshot(qg_kind kind)
{
    qg_config c = qg_default_config(kind);
    qg_index *ix = NULL;
    if (qg_create(&c, &ix) != QG_OK)
        abort();
    rb_init(&world, 7, 150, 120.0f, true);
    qg_status s = rb_fill(&world, ix);
    for (int f = 0; f < 8 && s == QG_OK; ++f)
        rb_frame(&world, ix, &s);
    if (s != QG_OK)
        abort();
    snap_len[kind] = qg_snapshot_size(ix);
    snap[kind] = malloc(snap_len[kind]);
    if (snap[kind] == NULL || qg_snapshot_write(ix, snap[kind], snap_len[kind]) != QG_OK)
        abort();
    qg_destroy(ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    qg_kind kind = (qg_kind)(data[1] % QG_KIND_COUNT);
    const char *name = getenv("QG_FUZZ_KIND");
    if (name != NULL && qg_kind_from_name(name, &kind) != QG_OK)
        abort();
    if (!qg_kind_available(kind))
        return 0;
    if (snap[kind] == NULL)
        make_snapshot(kind);
    unsigned char *buf;
    size_t len;
    if (data[0] & 1) {
        len = size - 2;
        buf = malloc(len ? len : 1);
        memcpy(buf, data + 2, len);
    } else {
        // Changes: (position: 3 bytes, value: 1 byte) each; a last short
        // one cuts the snapshot there.
        len = snap_len[kind];
        buf = malloc(len);
        memcpy(buf, snap[kind], len);
        size_t i = 2;
        for (; i + 4 <= size; i += 4) {
            const size_t at = ((size_t)data[i] << 16 | (size_t)data[i + 1] << 8 | data[i + 2]) % len;
            buf[at] = data[i + 3];
        }
        if (i < size && data[i] < 32)
            len = (size_t)data[i] * len / 32;
        if (len >= 32) {
            const uint64_t sum = checksum(buf + 32, len - 32);
            for (int b = 0; b < 8; ++b)
                buf[24 + b] = (unsigned char)(sum >> (8 * b));
        }
    }
    qg_index *ix = NULL;
    const qg_status s = qg_snapshot_read(buf, len, NULL, &ix);
    free(buf);
    if (s != QG_OK) {
        if (ix != NULL || (s != QG_ERR_INVALID && s != QG_ERR_NOMEM))
            abort();
        return 0;
    }
    if (qg_validate(ix) != QG_OK)
        abort();
    // A read that passed runs like any index: frames of every call on it.
    rb_init(&world, 9, 40, 60.0f, true);
    qg_status st = rb_fill(&world, ix);
    for (int f = 0; f < 3 && st == QG_OK; ++f)
        rb_frame(&world, ix, &st);
    if ((st != QG_OK && st != QG_ERR_HANDLE) || qg_validate(ix) != QG_OK)
        abort();
    qg_destroy(ix);
    return 0;
}
