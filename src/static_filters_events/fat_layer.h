// SPDX-License-Identifier: MIT
// The fat layer: the dynamic elements of an index with static ones, kept by
// the engine instead of the kind, so a frame costs what moves (Box2D's
// broad phase: fat boxes, and the pairs of fat boxes kept across frames,
// here made exact).
//
// Why: in a level (static_layer.h, static_cache.h) the statics cost nothing
// a frame, and what was left was the kind's move and its pair search over
// the agents, most of whose moves change nothing and most of whose pair
// tests find nothing (`level` at 100,000: 155 instructions a move, 114 an
// agent in the pair search). Here a move stores the box and checks it
// against a fat box; a frame's pairs walk each element's list of partners
// (the elements whose fat boxes overlap its own), usually empty.
//
// Where elements live. An element of the layer is dynamic, out of the
// kind's sight (its base slot's min_x NaN, as a static in the static layer),
// its box in the engine's per-position array `dbox` (the join and refill of
// the static caches read it there, in order, for every dynamic element).
// Each has a fat box containing its box, filed in a hashed grid under the
// up to 4 cells it covers, on the finest of QG_FAT_LEVELS levels of cells
// 4x apart where it covers no more (the static layer's levels, for boxes
// that move: mixed sizes cost no more than one size), or on a list of huge
// ones; and a list of up to QG_FAT_PARTS partners. The finest cell is a
// power of two about the fat boxes' mean extent.
//
// Dynamic elements enter the layer at qg_cleanup while the index has static
// elements, and leave it when they are removed, made static, or moved once
// the index has no static element left or the layer is off. It is off where
// the movers are too close for it (a list walked a frame costs more than
// the kind's search once most elements have partners; a pile or a dense
// crowd would search the grid every frame): when a sample of 64 fat boxes,
// each searched in the kind, overlaps more than 1 other element in 10 (or 1
// in 8 of them more than 3), or, every 16 cleanups, when more than 2 in 5
// of the layer's elements have partners or more than 1 in 100 is crowded
// (engine.c: fat_crowded, fat_unsuited). It looks again 256 cleanups on,
// twice as long each time it turns off.
//
// Exactness. Invariant: two listed (not crowded) elements whose fat boxes
// overlap each list the other (by position in the engine's dyn[]). A list
// may also hold positions that are no longer partners (or whose element
// left): each pair is tested on the
// boxes before it is reported, so extra entries cost a test, never an
// error. An element whose partners do not fit is crowded: its pairs come
// from a search of the grid with its box every frame (it reports a pair
// with another crowded element only when its position is the smaller one;
// listed elements skip crowded partners; a crowded element is no one's
// partner, so one with a huge fat box crowds no one). Elements in the kind (dynamic,
// or pending static) search the grid with their boxes too. A move that
// leaves the fat box makes a new one and files it at once (no allocation),
// so the layer is exact between any two calls, qg_cleanup or not.
//
// A move inside the fat box tests one box (engine.h: inner, the fat box
// cut to the static cache's), stores the box and returns.
//
// Memory: 113 bytes a dynamic element (a 64-byte entry, 16 bytes of grid
// buckets, its 16-byte box and inner box in the engine and a busy byte), with the static
// caches (allocated only while the index has static elements or elements
// in this layer); the kind then holds none of them.
#ifndef QG_FAT_LAYER_H
#define QG_FAT_LAYER_H

#include "../kind.h"

/// Partners an entry lists (the entry is 64 bytes).
#define QG_FAT_PARTS 5
/// npart of a crowded entry.
#define QG_FAT_CROWDED 255
/// Grid buckets reserved a dynamic element.
#define QG_FAT_BUCKETS 4
/// Levels of cells, 4x apart (the coarsest 4^7 = 16384 times the finest).
#define QG_FAT_LEVELS 8
/// busy: a listed element (it has partners) and a searching one (crowded,
/// or in the kind).
#define QG_FAT_LISTED 1
#define QG_FAT_SEARCH 2
/// qg_cleanup calls between two looks at whether the layer should be off.
#define QG_FAT_RETRY 256
/// `in` of an entry on the huge list.
#define QG_FAT_HUGE (QG_FAT_LEVELS + 1)

typedef struct qg_fat_entry {
    qg_rect fat;       ///< contains the element's box
    int32_t next[4];   ///< per filed cell: the next entry id (position * 4 + cell) in its bucket, -1 at the end
    int32_t cx0, cy0;  ///< the first cell the fat box covers, on its level
    uint8_t cw, ch;    ///< cells covered across and down (cw * ch <= 4)
    uint8_t npart;     ///< partners listed, or QG_FAT_CROWDED
    uint8_t in;        ///< 0: not in the layer; its level + 1; or QG_FAT_HUGE
    int32_t part[QG_FAT_PARTS]; ///< the partners' positions
} qg_fat_entry;

typedef struct qg_fat_layer {
    qg_fat_entry *entry; ///< per dynamic position (the engine's dyn[])
    int32_t entry_cap;
    /// Per position: what a frame's pairs do there: 0 nothing,
    /// QG_FAT_LISTED its list, QG_FAT_SEARCH a search of the grid (crowded,
    /// or in the kind). The pair loop reads them 16 at a time and visits
    /// the others by their bits (a branch a position mispredicts when a
    /// third of them are busy). Capacity: positions + 16.
    uint8_t *busy;
    int32_t busy_cap;
    int32_t *heads;      ///< bucket heads; heads[0..mask] in use
    int32_t heads_cap;
    uint32_t mask;
    bool built;          ///< the grid's cell and mask are set
    float cell;          ///< the finest level's
    double inv[QG_FAT_LEVELS]; ///< 1 / each level's cell
    int32_t filed[QG_FAT_LEVELS]; ///< entries on each level
    int32_t top;         ///< levels in use: 1 + the highest with entries (0: none)
    int32_t huge;        ///< first huge entry (linked by next[0]), -1: none
    int32_t huges;
    int32_t count;       ///< elements in the layer
    int32_t crowded;     ///< of them crowded
    uint32_t age;        ///< qg_cleanup calls since the grid was laid out
    /// Too crowded for the layer: none enters, and those in it go back to
    /// the kind as they move. Asked again every QG_FAT_RETRY qg_cleanup calls.
    bool off;
    uint32_t retry;      ///< qg_cleanup calls until it is asked again
    uint32_t backoff;    ///< the next retry's wait: doubles each time the layer turns off
    uint32_t watch;      ///< qg_cleanup calls since the layer's lists were last looked at
} qg_fat_layer;

struct qg_engine;

/// Resets the layer to empty (its arrays kept).
void qg_fat_reset(qg_fat_layer *fl);
/// Position p holds an element of the kind (not of the layer).
static inline void qg_fat_out(qg_fat_layer *fl, int32_t p)
{
    fl->entry[p].in = 0;
    fl->busy[p] = QG_FAT_SEARCH;
}
/// Position p (the engine's dyn[p], box box[p]) enters the layer; the grid
/// must be laid out (qg_fat_layout) with room.
void qg_fat_admit(struct qg_engine *e, int32_t p);
/// Position p leaves the layer (its partners forget it).
void qg_fat_leave(struct qg_engine *e, int32_t p);
/// The element at position p moved from `old` to box[p] and left its fat
/// box: a new one is made and filed.
void qg_fat_refit(struct qg_engine *e, int32_t p, qg_rect old);
/// The entry of position `from` moved to position `to` (the engine's dyn[]
/// is kept dense); `to`'s entry, if in the layer, has left it.
void qg_fat_moved_pos(struct qg_engine *e, int32_t from, int32_t to);
/// Lays the grid out again (cell size from the fat boxes, buckets from what
/// heads holds) when it is due: at first, when the buckets changed, and
/// every 256 calls (one a qg_cleanup) when the fat boxes' sizes call for
/// another cell.
void qg_fat_layout(struct qg_engine *e);
/// Pairs of the dynamic positions [b, end): layer elements with layer
/// elements (lists, crowded searches), kind dynamics with layer elements,
/// and, when `statics` is true, pending statics (in the kind) with layer
/// elements. False when fn stopped it.
bool qg_fat_pairs(const qg_index *index, int32_t b, int32_t end, bool statics, const qg_filter *filters,
                  qg_pair_fn *fn, void *user, qg_query_stats *stats);
/// The fat box the layer gives `box` moving (vx, vy) a frame, stretched
/// at most `cap` the way it goes (2 finest cells: a jump is not a motion).
qg_rect qg_fat_box(qg_rect box, float vx, float vy, float cap);
/// Visits each element's fat box (depth 0, one element), for drawing.
void qg_fat_visit(const struct qg_engine *e, qg_visit_fn *fn, void *user);
/// The layer's share of a query; false when fn stopped it.
bool qg_fat_query(const struct qg_engine *e, qg_rect area, qg_query_fn *fn, void *user, qg_query_stats *stats);
/// Checks the grid, the entries and the partner invariant.
bool qg_fat_validate(const struct qg_engine *e);

#endif
