// SPDX-License-Identifier: MIT
/* The same answers in the same order everywhere: every kind runs the world
 * of rollback_driver.h (with static elements, filters and events, from
 * qg_default_config) and its frames' order-sensitive hashes are folded into
 * one value per kind, which must equal the golden value committed in
 * tests/golden/order.txt. CI runs this on every platform it covers: x86-64
 * with AVX2 and without (QG_NO_AVX2=1), gcc and clang, ARM64 under qemu,
 * WebAssembly scalar and SIMD128 under Node. Every platform also reads the
 * snapshots committed in tests/golden/<kind>.qgs (written on x86-64 at
 * frame 40 of a second world, the same without the engine's calls, whose
 * state is a few kilobytes rather than a few hundred) and runs the frames
 * after it: their hash is the second golden value, so a snapshot written on
 * one platform continues bit-identically on every other.
 *
 *   order_check check <dir>   compare with <dir>/order.txt and <dir>/<kind>.qgs
 *   order_check write <dir>   write both (after a change of the format or
 *                             of an answer's order, which is a change users
 *                             see: say so in CHANGELOG.md)
 *
 * Public header only, no test framework: it builds with emcc as it is. */
#include "rollback_driver.h"

#include <stdio.h>

#define AGENTS 700
#define FRAMES 90
#define SNAP_AT 40

static rb_world world;

static void start(bool engine)
{
    rb_init(&world, 20261202, AGENTS, 220.0f, engine);
}

/* Frames [world.frame, FRAMES) on ix, folded into one hash. */
static uint64_t run(qg_index *ix, uint64_t h)
{
    while (world.frame < FRAMES) {
        qg_status s;
        const int32_t f = world.frame;
        const uint64_t fh = rb_frame(&world, ix, &s);
        if (s != QG_OK) {
            fprintf(stderr, "order_check: frame %d: %s\n", f, qg_status_name(s));
            exit(1);
        }
        h = rb_mix(h, fh);
    }
    return h;
}

static qg_index *fresh(qg_kind kind)
{
    qg_config c = qg_default_config(kind);
    qg_index *ix = NULL;
    if (qg_create(&c, &ix) != QG_OK || rb_fill(&world, ix) != QG_OK) {
        fprintf(stderr, "order_check: cannot build %s\n", qg_kind_name(kind));
        exit(1);
    }
    return ix;
}

/* The whole run's hash (with the engine's calls). */
static uint64_t whole(qg_kind kind)
{
    start(true);
    qg_index *ix = fresh(kind);
    const uint64_t h = run(ix, 0);
    qg_destroy(ix);
    return h;
}

/* The snapshot at SNAP_AT of the world without them, into *snap (malloc'd). */
static void snapshot_at(qg_kind kind, unsigned char **snap, size_t *len)
{
    start(false);
    qg_index *ix = fresh(kind);
    while (world.frame < SNAP_AT) {
        qg_status s;
        rb_frame(&world, ix, &s);
        if (s != QG_OK)
            exit(1);
    }
    *len = qg_snapshot_size(ix);
    *snap = malloc(*len);
    if (*snap == NULL || qg_snapshot_write(ix, *snap, *len) != QG_OK) {
        fprintf(stderr, "order_check: %s: no snapshot\n", qg_kind_name(kind));
        exit(1);
    }
    qg_destroy(ix);
}

/* The frames after SNAP_AT from a snapshot's bytes. */
static int continued(qg_kind kind, const unsigned char *buf, size_t len, uint64_t *h)
{
    qg_index *ix = NULL;
    const qg_status s = qg_snapshot_read(buf, len, NULL, &ix);
    if (s != QG_OK) {
        fprintf(stderr, "order_check: %s: the snapshot reads as %s\n", qg_kind_name(kind), qg_status_name(s));
        return 1;
    }
    /* The world as it was at SNAP_AT: run it there on a scratch index. */
    start(false);
    qg_index *scratch = fresh(kind);
    while (world.frame < SNAP_AT) {
        qg_status st;
        rb_frame(&world, scratch, &st);
    }
    qg_destroy(scratch);
    *h = run(ix, 0);
    qg_destroy(ix);
    return 0;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *b = realloc(buf, cap *= 2);
            if (b == NULL)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "write") != 0)) {
        fprintf(stderr, "usage: order_check check|write <dir>\n");
        return 2;
    }
    const bool write = strcmp(argv[1], "write") == 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/order.txt", argv[2]);
    FILE *golden = fopen(path, write ? "w" : "r");
    if (golden == NULL) {
        fprintf(stderr, "order_check: cannot open %s\n", path);
        return 2;
    }
    if (write)
        fprintf(golden, "# kind, hash of %d frames, hash of the frames after the snapshot at %d "
                        "(tests/order_check.c)\n", FRAMES, SNAP_AT);
    int bad = 0, checked = 0;
    for (int k = 0; k < QG_KIND_COUNT; ++k) {
        const qg_kind kind = (qg_kind)k;
        if (!qg_kind_available(kind))
            continue;
        unsigned char *snap;
        size_t len;
        const uint64_t h = whole(kind);
        snapshot_at(kind, &snap, &len);
        uint64_t after = 0;
        snprintf(path, sizeof path, "%s/%s.qgs", argv[2], qg_kind_name(kind));
        if (write) {
            if (continued(kind, snap, len, &after) != 0)
                return 1;
            FILE *f = fopen(path, "wb");
            if (f == NULL || fwrite(snap, 1, len, f) != len || fclose(f) != 0) {
                fprintf(stderr, "order_check: cannot write %s\n", path);
                return 1;
            }
            fprintf(golden, "%s %016llx %016llx\n", qg_kind_name(kind), (unsigned long long)h,
                    (unsigned long long)after);
            printf("%s: %016llx %016llx, snapshot %zu bytes\n", qg_kind_name(kind), (unsigned long long)h,
                   (unsigned long long)after, len);
        } else {
            char name[64];
            unsigned long long want = 0, want_after = 0;
            bool found = false;
            rewind(golden);
            char line[256];
            while (fgets(line, sizeof line, golden) != NULL)
                if (sscanf(line, "%63s %llx %llx", name, &want, &want_after) == 3 &&
                    strcmp(name, qg_kind_name(kind)) == 0) {
                    found = true;
                    break;
                }
            size_t flen = 0;
            unsigned char *file = slurp(path, &flen);
            if (!found || file == NULL) {
                fprintf(stderr, "order_check: %s: no golden value or snapshot in %s\n", qg_kind_name(kind),
                        argv[2]);
                bad++;
            } else {
                const int fail = continued(kind, file, flen, &after);
                const bool ok = fail == 0 && h == want && after == want_after;
                printf("%s: %016llx %016llx %s\n", qg_kind_name(kind), (unsigned long long)h,
                       (unsigned long long)after, ok ? "as golden" : "DIFFERS");
                if (!ok) {
                    fprintf(stderr, "order_check: %s: golden %016llx %016llx\n", qg_kind_name(kind), want,
                            want_after);
                    bad++;
                }
            }
            free(file);
        }
        free(snap);
        checked++;
    }
    fclose(golden);
    if (!write)
        printf("order_check: %d kinds, %d differ\n", checked, bad);
    return bad ? 1 : 0;
}
