# SPDX-License-Identifier: MIT
"""cffi (API mode) build of quadgrid._quadgrid: the library's own C sources,
found by walking up from this file to the repository root (pip builds a local
directory in place), compiled with the C build's flags, plus the binding's
batched loops in bindings/python/src/qg_py.c."""
import glob
import os
import re
import shutil
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)  # bindings/python


def find_root():
    """The quadgrid checkout whose sources are compiled in."""
    env = os.environ.get("QUADGRID_SOURCE_DIR")
    candidates = [env] if env else []
    d = PKG
    for _ in range(6):
        candidates.append(d)
        d = os.path.dirname(d)
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "include", "quadgrid.h")) and os.path.isdir(
            os.path.join(c, "src")
        ):
            return os.path.abspath(c)
    sys.exit(
        "quadgrid: cannot find the library's sources (include/quadgrid.h and src/) above %s; "
        "build from a checkout (pip install ./bindings/python) or set QUADGRID_SOURCE_DIR "
        "to the repository root" % PKG
    )


ROOT = find_root()


def header_version():
    """The library's version, from include/quadgrid.h's QG_VERSION_* macros:
    the one version every package (CMake, pkg-config, this one, npm) carries."""
    with open(os.path.join(ROOT, "include", "quadgrid.h")) as f:
        text = f.read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define QG_VERSION_%s (\d+)$" % part, text, re.M)
        if not m:
            sys.exit("quadgrid: include/quadgrid.h has no QG_VERSION_%s" % part)
        parts.append(m.group(1))
    return ".".join(parts)


def stage_sources():
    """Copies include/ and src/ into build/csrc beside setup.py: setuptools
    takes only relative source paths, and objects of paths that climb out
    (../../src) would land outside the build folder. Returns the C files
    (every .c under src/, however it is arranged in folders) as paths
    relative to the package folder, which is the build's working directory."""
    stage = os.path.join(PKG, "build", "csrc")
    for sub in ("include", "src"):
        dst = os.path.join(stage, sub)
        if os.path.isdir(dst):
            shutil.rmtree(dst)  # files the checkout no longer has must go
        shutil.copytree(os.path.join(ROOT, sub), dst)
    files = sorted(glob.glob(os.path.join(stage, "src", "**", "*.c"), recursive=True))
    if not files:
        sys.exit("quadgrid: no C sources under %s" % os.path.join(ROOT, "src"))
    return stage, [os.path.relpath(f, PKG) for f in files]


os.chdir(PKG)
STAGE, SOURCES = stage_sources()
SOURCES.append(os.path.join("src", "qg_py.c"))

# The kinds are not listed here: the enum's "..." lets the compiler give
# QG_KIND_COUNT, and the package names the kinds through qg_kind_name, so a
# kind added to QG_KIND_LIST reaches Python with no edit here.
CDEF = """
typedef struct qg_rect { float min_x, min_y, max_x, max_y; } qg_rect;
typedef int32_t qg_handle;
typedef enum qg_status { QG_OK = 0, QG_ERR_INVALID = -1, QG_ERR_HANDLE = -2, QG_ERR_NOMEM = -3,
    QG_ERR_CAPACITY = -4 } qg_status;
typedef struct qg_index qg_index;
typedef enum qg_kind { QG_KIND_COUNT, ... } qg_kind;
typedef struct qg_allocator { void *(*realloc)(void *, size_t, size_t, void *); void *user; } qg_allocator;
typedef struct qg_config {
    qg_kind kind; qg_rect bounds; float element_size; float max_element_size;
    int max_depth; int leaf_capacity; float cell_size; qg_allocator allocator; bool fixed_sizes;
    ...;
} qg_config;
typedef struct qg_stats {
    size_t memory_bytes; int32_t elements, nodes, leaves, max_depth_reached;
    float element_size, size_bound, cell_size; int32_t max_depth; qg_rect world; int32_t retunes;
    ...;
} qg_stats;

#define QG_VERSION_MAJOR ...
#define QG_VERSION_MINOR ...
#define QG_VERSION_PATCH ...

qg_config qg_default_config(qg_kind kind);
int32_t qg_count(const qg_index *index);
qg_stats qg_get_stats(const qg_index *index);
const char *qg_kind_name(qg_kind kind);
const char *qg_status_name(qg_status status);
bool qg_kind_available(qg_kind kind);
qg_status qg_validate(const qg_index *index);
int32_t qg_cpu_count(void);
bool qg_is_static(const qg_index *index, qg_handle handle);
void qg_clear(qg_index *index);

typedef struct qgpy { qg_index *index; ...; } qgpy;
int qgpy_open(const qg_config *config, qgpy **out);
void qgpy_close(qgpy *s);
int64_t qgpy_bad_box(const float *boxes, int64_t n);
int64_t qgpy_bad_area(const float *boxes, int64_t n);
int qgpy_check_handles(const qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row);
int qgpy_insert(qgpy *s, const float *boxes, int64_t n, int32_t *handles, int64_t *bad_row);
int qgpy_move(qgpy *s, const int32_t *handles, const float *boxes, int64_t n, int32_t threads,
              int64_t *bad_row, int *bad_what);
int qgpy_remove(qgpy *s, const int32_t *handles, int64_t n, int64_t *bad_row);
void qgpy_cleanup(qgpy *s, int32_t threads);
int64_t qgpy_pairs(qgpy *s, int32_t threads);
void qgpy_pairs_copy(qgpy *s, int32_t *out);
int qgpy_query_many(qgpy *s, const float *areas, int64_t n, int64_t *offsets, int64_t *bad_row);
int qgpy_raycast_many(qgpy *s, const float *origins, const float *dirs, const float *max_t, int64_t n,
                      bool closest, int32_t *best_h, float *best_t, int64_t *offsets, int64_t *bad_row);
void qgpy_out_copy(const qgpy *s, int32_t *out);
void qgpy_out2_copy(const qgpy *s, int32_t *out);
int64_t qgpy_out_len(const qgpy *s);
int64_t qgpy_out2_len(const qgpy *s);
int qgpy_nearest_many(const qgpy *s, const float *points, int64_t n, int32_t k, float max_distance2,
                      int32_t *handles, float *distances2, int64_t *bad_row);
int qgpy_pair_events(qgpy *s);
int qgpy_set_static(qgpy *s, const int32_t *handles, const uint8_t *flags, int64_t n, int64_t *bad_row);
int qgpy_set_filter(qgpy *s, const int32_t *handles, const uint32_t *category, const uint32_t *mask,
                    int64_t n, int64_t *bad_row);
int qgpy_get_boxes(const qgpy *s, const int32_t *handles, int64_t n, float *boxes, int64_t *bad_row);
int qgpy_clone(const qgpy *src, qgpy **out);
int qgpy_copy(qgpy *dst, const qgpy *src);
int64_t qgpy_snapshot_size(const qgpy *s);
int qgpy_snapshot_write(const qgpy *s, void *buf, int64_t len);
int qgpy_snapshot_read(const void *buf, int64_t len, qgpy **out, int32_t *kind);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "quadgrid._quadgrid",
    '#include "qg_py.h"\n',
    sources=SOURCES,
    include_dirs=[os.path.join(STAGE, "include"), os.path.join(STAGE, "src"), os.path.join(PKG, "src")],
    # The C build's (CMake Release: -O3 -DNDEBUG) flags, after Python's own
    # (-fno-wrapv undoes its -fwrapv): strict IEEE floats (no contraction,
    # no fast-math), C11. The AVX2 kernels carry target("avx2") attributes
    # and are picked at run time, so no -mavx2 here.
    extra_compile_args=["-std=c11", "-O3", "-fno-wrapv", "-ffp-contract=off", "-pthread"],
    define_macros=[("QUADGRID_BUILDING", None), ("NDEBUG", None)],
    libraries=["m"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
