/* The outermost host events of a set of kinds (analysis.steps._outermost) in one pass.
 *
 * numpy finds them with a mask per kind, the rows' parents gathered, the
 * parents' kinds, starts and ends gathered and compared: on the 9M events
 * of a 4 GB trace a dozen arrays of every host event, ~0.17 s. One pass
 * reading each event's kind, parent, start and duration gives the same rows.
 *
 * `kind` holds the categorical codes of the events' kinds (-1: none);
 * `member` has 256 entries, indexed by a code as an unsigned byte (code -1
 * reads entry 255), nonzero for the kinds of the set. A member row is kept
 * unless its parent (`parent`, -1: none) is a member too and encloses it:
 * start >= the parent's start and start + duration <= the parent's, in
 * double precision as numpy adds them (a NaN compares false: kept). Writes
 * the kept rows, in order, to `out` (n slots) and returns how many, or -1
 * if a parent lies at or beyond n.
 */

#include <stdint.h>

int64_t tp_outermost(const int8_t *kind, const uint8_t *member, const int64_t *parent, const double *ts,
                     const double *dur, int64_t n, int64_t *out) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!member[(uint8_t)kind[i]]) continue;
        const int64_t p = parent[i];
        if (p >= n) return -1;
        if (p >= 0 && member[(uint8_t)kind[p]]) {
            const double end = ts[i] + dur[i];
            const double parent_end = ts[p] + dur[p];
            if (ts[i] >= ts[p] && end <= parent_end) continue;
        }
        out[count++] = i;
    }
    return count;
}

int tp_steps_abi(void) { return 1; }
