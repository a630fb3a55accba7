/* The call-tree stack walk (analysis.tree.nest_stack) in one pass over sorted intervals.
 *
 * The numpy form of the walk (analysis.tree.nest) needs a dozen passes of
 * random access over every event; on a trace of ten million events that is
 * seconds, where this single pass is tens of milliseconds. Same definition,
 * same doubles: an interval that starts at or after the top of the stack's
 * end, or ends more than `tolerance` past it, pops it; what is left on top
 * is its parent and the stack's height its depth. `stack_pos` and
 * `stack_end` are the caller's scratch arrays of n elements.
 */

#include <stdint.h>

int tp_nest_abi(void) { return 5; }

/* The walk over intervals visited in `order` (sorted by lane, start, -end),
 * reading them where they lie and writing each one's parent and depth at
 * its own position: no gathers into sorted copies and no scatters back
 * (eight passes of random access over every interval, a fifth of a second
 * on ten million). Parents are positions in the input
 * (-1 for none); a lane begins where `lane` changes along `order`.
 */
void tp_nest_ordered(const int64_t *order, const int64_t *lane, const double *start, const double *end,
                     int64_t n, double tolerance, int64_t *par, int32_t *dep, int64_t *stack_pos,
                     double *stack_end) {
    int64_t top = 0;
    int64_t last_lane = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = order[k];
        const double sk = start[i], ek = end[i];
        if (k == 0 || lane[i] != last_lane) top = 0;
        last_lane = lane[i];
        while (top > 0 && (sk >= stack_end[top - 1] || ek > stack_end[top - 1] + tolerance))
            top--;
        par[i] = top > 0 ? stack_pos[top - 1] : -1;
        dep[i] = (int32_t)top;
        stack_pos[top] = i;
        stack_end[top] = ek;
        top++;
    }
}
