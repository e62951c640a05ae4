// SPDX-License-Identifier: MIT
/* quadgrid-bench: The result line and the helpers every workload shares (bench.h). */
#include "bench.h"

/* Output                                                                   */


static int column_width(const field *f) {
    int w = (int)strlen(f->key);
    int min = f->type == F_STR ? 18 : f->type == F_HEX ? 16 : 9;
    if (strcmp(f->key, "workload") == 0 || strcmp(f->key, "index_bytes_how") == 0 ||
        strcmp(f->key, "scene") == 0)
        min = 10;
    if (f->type == F_RATIO || strcmp(f->key, "status") == 0) min = 7;
    return w > min ? w : min;
}

static void format_value(char *buf, size_t size, const field *f) {
    switch (f->type) {
    case F_STR: snprintf(buf, size, "%s", f->s); break;
    case F_INT: snprintf(buf, size, "%" PRId64, f->i); break;
    case F_MS: snprintf(buf, size, "%.3f", f->d); break;
    case F_HEX: snprintf(buf, size, "%016" PRIx64, f->u); break;
    case F_RATIO: snprintf(buf, size, "%.2f", f->d); break;
    }
}

/* One result line. The table and CSV print a header before the first line of
 * each workload; JSON lines stand alone. */
void emit(const options *o, const field *fs, int count) {
    emit_line(o->format, o->wl, fs, count);
}

/* One result line of workload `wl`: the table and CSV print a header before
 * the first line of each workload; JSON lines stand alone. */
void emit_line(out_format format, workload wl, const field *fs, int count) {
    static int header_for = -1;
    char buf[64];
    bool header = header_for != (int)wl;
    header_for = (int)wl;
    if (format == OUT_JSON) {
        putchar('{');
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            bool quoted = fs[i].type == F_STR || fs[i].type == F_HEX;
            printf("%s\"%s\":%s%s%s", i ? "," : "", fs[i].key, quoted ? "\"" : "", buf,
                   quoted ? "\"" : "");
        }
        puts("}");
    } else if (format == OUT_CSV) {
        if (header) {
            for (int i = 0; i < count; i++) printf("%s%s", i ? "," : "", fs[i].key);
            putchar('\n');
        }
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            printf("%s%s", i ? "," : "", buf);
        }
        putchar('\n');
    } else {
        if (header) {
            putchar('\n');
            for (int i = 0; i < count; i++) {
                int w = column_width(&fs[i]);
                printf(fs[i].type == F_STR ? "%-*s " : "%*s ", w, fs[i].key);
            }
            putchar('\n');
        }
        for (int i = 0; i < count; i++) {
            format_value(buf, sizeof buf, &fs[i]);
            printf(fs[i].type == F_STR ? "%-*s " : "%*s ", column_width(&fs[i]), buf);
        }
        putchar('\n');
    }
    fflush(stdout);
}

/* Notes go to stderr so stdout stays machine-readable in --json/--csv mode. */
void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("quadgrid-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}


progress progress_start(void) {
    progress p = {isatty(STDERR_FILENO) == 1, false, qgw_now_ns(), 0};
    return p;
}

void progress_update(progress *p, const char *what, const char *kind, int64_t done,
                            int64_t total) {
    if (!p->tty) return;
    uint64_t now = qgw_now_ns();
    if (now - p->start < UINT64_C(1000000000) || now - p->last < UINT64_C(100000000)) return;
    p->last = now;
    p->shown = true;
    fprintf(stderr, "\r%s: %s %" PRId64 "/%" PRId64 "   ", kind, what, done, total);
    fflush(stderr);
}

void progress_end(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
    p->shown = false;
}

/* ------------------------------------------------------------------------ */
/* Measurement helpers                                                      */

int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

double median_ms(uint64_t *ns, int32_t count) {
    if (count <= 0) return 0.0;
    qsort(ns, (size_t)count, sizeof *ns, cmp_u64);
    double m = count % 2 ? (double)ns[count / 2]
                         : ((double)ns[count / 2 - 1] + (double)ns[count / 2]) / 2.0;
    return m / 1e6;
}


mem_probe mem_begin(void) {
    mem_probe m;
    qgw_heap_trim();
    qgw_peak_rss_reset();
    m.heap0 = qgw_heap_in_use(&m.heap_known);
    return m;
}

size_t mem_index_bytes(const mem_probe *m, const bench_peer *p, bench_impl *impl) {
    if (p->bytes_how == BENCH_BYTES_EXACT) return p->vt->bytes(impl);
    bool known;
    size_t now = qgw_heap_in_use(&known);
    return known && m->heap_known && now > m->heap0 ? now - m->heap0 : 0;
}

const char *bytes_how_name(const bench_peer *p, const mem_probe *m) {
    if (p->bytes_how == BENCH_BYTES_EXACT) return "exact";
    return m->heap_known ? "heap_delta" : "unknown";
}

int impl_failed(const bench_peer *p, bench_impl *impl, const char *step) {
    const char *e = impl ? p->vt->error(impl) : NULL;
    note("%s: %s failed%s%s", p->name, step, e ? ": " : "", e ? e : "");
    return 1;
}


static bool collect_pair(qg_handle a, qg_handle b, void *user) {
    pair_list *l = user;
    if (l->len == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        uint64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->nomem = true;
            return false;
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->len++] = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    return true;
}

void print_pair_diff(const bench_peer *p, bench_impl *impl, qgw_sweep *ref) {
    pair_list got = {0}, want = {0};
    p->vt->pairs(impl, collect_pair, &got);
    qgw_sweep_pairs(ref, collect_pair, &want);
    if (got.nomem || want.nomem) {
        note("  (out of memory listing the differing pairs)");
    } else {
        qsort(got.v, got.len, sizeof *got.v, cmp_u64);
        qsort(want.v, want.len, sizeof *want.v, cmp_u64);
        size_t i = 0, j = 0;
        int shown = 0;
        while ((i < got.len || j < want.len) && shown < 10) {
            if (j == want.len || (i < got.len && got.v[i] < want.v[j])) {
                note("  extra pair   (%u, %u)", (unsigned)(got.v[i] >> 32), (unsigned)got.v[i]);
                i++, shown++;
            } else if (i == got.len || want.v[j] < got.v[i]) {
                note("  missing pair (%u, %u)", (unsigned)(want.v[j] >> 32), (unsigned)want.v[j]);
                j++, shown++;
            } else {
                i++, j++;
            }
        }
    }
    free(got.v);
    free(want.v);
}


answer answers[MAX_ANSWERS];
int answer_count;

void record_answer(const char *name, uint64_t count, uint64_t checksum) {
    if (answer_count < (int)(sizeof answers / sizeof answers[0]))
        answers[answer_count++] = (answer){name, count, checksum};
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                  */

/* The threads an implementation actually uses: --threads for quadgrid, one
 * for the peers, which have no parallel calls. */
int32_t threads_of(const options *o, const bench_peer *p) {
    return o->jobs && p->vt->pairs_parts ? o->threads : 1;
}


/* Step 3 of a frame: every pair into *sum. With --threads, each part of
 * qg_pairs_parallel sums its own pairs; the sums add up (the checksum is a
 * sum too), so the answer is the one-thread answer. */
bool bench_pairs(const options *o, const bench_peer *p, bench_impl *impl, qgw_sum *sum) {
    *sum = (qgw_sum){0, 0};
    if (threads_of(o, p) == 1) return p->vt->pairs(impl, qgw_sum_pair, sum);
    qgw_sum parts[MAX_THREADS];
    void *users[MAX_THREADS];
    for (int32_t i = 0; i < o->threads; i++) {
        parts[i] = (qgw_sum){0, 0};
        users[i] = &parts[i];
    }
    if (!p->vt->pairs_parts(impl, qgw_sum_pair, users)) return false;
    for (int32_t i = 0; i < o->threads; i++) {
        sum->count += parts[i].count;
        sum->checksum += parts[i].checksum;
    }
    return true;
}

static void move_agents_task(int32_t begin, int32_t end, int32_t worker, void *context) {
    (void)worker;
    qgw_agents_move_range(context, begin, end);
}

/* Step 1 of a frame: the workload's own motion, on the same workers. */
void move_agents(const options *o, qgw_agents *a) {
    if (o->jobs)
        o->jobs->run(move_agents_task, a->n, a, o->jobs->user);
    else
        qgw_agents_move(a);
}


bool sum_hit(qg_handle box, void *user) {
    hit_sum *h = user;
    h->hits++;
    h->checksum += qgw_pair_term(h->query, box);
    return true;
}

const char *workload_name(workload w) {
    static const char *names[] = {"agents", "mixed", "static", "sparse", "insert", "check", "scenes", "drift", "rays", "knn", "level", "knobs", "rollback"};
    return names[w];
}
