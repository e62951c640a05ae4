// SPDX-License-Identifier: MIT
// The engine's part of the state walk (state.h).
#include "../state.h"
#include "engine.h"

void qg_engine_state(qg_state *s, qg_index *d, const qg_index *src)
{
    bool drop;
    if (qg_st_struct(s, (void **)&d->engine, src->engine, sizeof(qg_engine), &drop)) {
        qg_st_fail(s, QG_ERR_INVALID); // not yet walked
        return;
    }
    if (drop)
        qg_engine_destroy(d);
}
