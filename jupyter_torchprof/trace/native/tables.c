/* Loops of the op table and its notes that numpy can only do with sorts or hashing.
 *
 * tp_group_sum: pandas' grouped float sum (DataFrame.groupby(...).sum(),
 * pandas/_libs/groupby.pyx group_sum), the same compensated additions in
 * row order, so the figures are the same bits. Through pandas, a column of
 * ten million rows is also factorized again and checked for order: a few
 * hundred milliseconds for what one pass does.
 *
 * tp_code_order: np.argsort(codes, kind="stable") of small integer codes
 * (a counting sort), and where each code's rows start in that order.
 *
 * Every function checks the values it uses as positions and returns -1 on
 * one outside its table (nothing written past a buffer).
 */

#include <math.h>
#include <stdint.h>

/* Adds `values[at[i]]` (or `values[i]` where `at` is NULL) for the n rows
 * into `sum` by `group` (n rows, each in [0, groups)), with pandas'
 * compensation: a NaN value is skipped, and a compensation that is not
 * finite (an infinite value, or a sum that overflowed) is reset to 0. Reading through `at` spares the
 * caller a gathered copy of each column. `sum` and `comp` are zeroed by
 * the caller; `m` is the length of `values`. Returns 1 where the groups
 * never decrease (pandas then sums by np.add.reduceat instead: the caller
 * must not use these sums), 0 where they do, -1 if a group or a position
 * lies outside. */
int64_t tp_group_sum(const int64_t *group, const int64_t *at, const double *values, int64_t n, int64_t m,
                     int64_t groups, double *sum, double *comp) {
    int64_t sorted = 1, last = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t g = group[i];
        if (g < 0 || g >= groups) return -1;
        if (g < last) sorted = 0;
        last = g;
        const int64_t row = at ? at[i] : i;
        if (row < 0 || row >= m) return -1;
        const double v = values[row];
        if (v != v) continue;
        const double y = v - comp[g];
        const double t = sum[g] + y;
        double c = t - sum[g] - y;
        if (!isfinite(c)) c = 0.0;
        comp[g] = c;
        sum[g] = t;
    }
    return sorted;
}

static int64_t code_at(const void *codes, int width, int64_t i) {
    switch (width) {
    case 1: return ((const int8_t *)codes)[i];
    case 2: return ((const int16_t *)codes)[i];
    case 4: return ((const int32_t *)codes)[i];
    default: return ((const int64_t *)codes)[i];
    }
}

/* Rows ordered by code (codes of `width` bytes, each in [-1, ncodes)), ties
 * in row order, into `order` (n); `bounds` (ncodes + 1): where code c's rows
 * start in that order (np.searchsorted(sorted codes, arange(ncodes + 1))),
 * the rows of code -1 first. Returns 0, or -1 if a code lies outside. */
int64_t tp_code_order(const void *codes, int width, int64_t n, int64_t ncodes, int64_t *order,
                      int64_t *bounds) {
    /* bounds[c + 1] counts code c; bounds[0] the rows of code -1 (shifted below). */
    for (int64_t c = 0; c <= ncodes; c++) bounds[c] = 0;
    int64_t missing = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = code_at(codes, width, i);
        if (c < -1 || c >= ncodes) return -1;
        if (c < 0)
            missing++;
        else
            bounds[c + 1]++;
    }
    /* Starts: code c's rows follow the missing ones and every lower code's. */
    bounds[0] = missing;
    for (int64_t c = 1; c <= ncodes; c++) bounds[c] += bounds[c - 1];
    int64_t next_missing = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = code_at(codes, width, i);
        if (c < 0)
            order[next_missing++] = i;
        else
            order[bounds[c]++] = i;
    }
    /* Each start moved to the next code's: shift back. */
    for (int64_t c = ncodes; c > 0; c--) bounds[c] = bounds[c - 1];
    bounds[0] = missing;
    return 0;
}

/* Levels up to which tp_subtree_sums scans every node per level (each scan
 * reads the depths once) rather than ordering them all by level. */
#define SCAN_LEVELS 8

/* Node i's total (when not 0) into its parent's sum for this level. */
static void add_to_parent(int64_t i, const int64_t *parent, const double *total, double *acc, uint8_t *mark,
                          int64_t *touched, int64_t *count) {
    const int64_t p = parent[i];
    if (p < 0 || !(total[i] != 0)) return;
    if (!mark[p]) {
        mark[p] = 1;
        touched[(*count)++] = p;
    }
    acc[p] += total[i];
}

/* After a level: each parent that received a sum adds it to its total. */
static void apply_to_parents(double *total, double *acc, uint8_t *mark, const int64_t *touched, int64_t count) {
    for (int64_t t = 0; t < count; t++) {
        const int64_t p = touched[t];
        total[p] += acc[p];
        acc[p] = 0.0;
        mark[p] = 0;
    }
}

/* Each node's own value plus its descendants' (analysis.tree.subtree_sums),
 * with that function's additions: level by level from the deepest (a
 * node's level is max(depth, 0); level 0 passes nothing up), each node of
 * the level whose total is not 0 adds it, in row order, into a sum per
 * parent started at 0.0; after the level, each parent that received one
 * adds it to its total. `total` holds the own values and is summed in
 * place. Scratch from the caller: `order` (n), `starts` (levels + 1, zeroed,
 * `levels` = max level + 1), `acc` (n, zeroed), `mark` (n, zeroed),
 * `touched` (n). Returns 0, or -1 if a parent lies outside [-1, n) or a
 * depth above `levels` - 1. */
int64_t tp_subtree_sums(const int64_t *parent, const int32_t *depth, int64_t n, int64_t levels, double *total,
                        int64_t *order, int64_t *starts, double *acc, uint8_t *mark, int64_t *touched) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t lv = depth[i] > 0 ? depth[i] : 0;
        if (lv >= levels || parent[i] < -1 || parent[i] >= n) return -1;
        starts[lv + 1]++;
    }
    if (levels <= SCAN_LEVELS) {
        /* A shallow tree: one pass over the nodes per level finds its
         * nodes in row order, without the order of every node. */
        for (int64_t lv = levels - 1; lv >= 1; lv--) {
            int64_t count = 0;
            for (int64_t i = 0; i < n; i++) {
                if ((depth[i] > 0 ? depth[i] : 0) != lv) continue;
                add_to_parent(i, parent, total, acc, mark, touched, &count);
            }
            apply_to_parents(total, acc, mark, touched, count);
        }
        return 0;
    }
    for (int64_t lv = 1; lv <= levels; lv++) starts[lv] += starts[lv - 1];
    /* Nodes by level, row order within one (a counting sort); starts[lv]
     * ends at the next level's start, so level lv spans
     * [starts[lv - 1], starts[lv]) afterwards, level 0 [0, starts[0]). */
    for (int64_t i = 0; i < n; i++) {
        const int64_t lv = depth[i] > 0 ? depth[i] : 0;
        order[starts[lv]++] = i;
    }
    for (int64_t lv = levels - 1; lv >= 1; lv--) {
        int64_t count = 0;
        for (int64_t k = starts[lv - 1]; k < starts[lv]; k++) add_to_parent(order[k], parent, total, acc, mark, touched, &count);
        apply_to_parents(total, acc, mark, touched, count);
    }
    return 0;
}

/* Where torch's key_averages() folds each event (analysis.tree.folded_into):
 * a node with a parent (both on the host tree: parent >= 0, depth >= 0)
 * that is its parent's only such child and has its name (code >= 0, codes
 * of `width` bytes) is folded; `out` gets, for each folded node, its
 * nearest ancestor that is not folded (-1 for none), and -1 elsewhere.
 * Scratch from the caller: `children` (n, zeroed), `folded` (n, zeroed).
 * Returns 0, or -1 if a parent lies outside [-1, n) or the parents loop. */
int64_t tp_folded_into(const int64_t *parent, const int32_t *depth, const void *codes, int width, int64_t n,
                       int32_t *children, uint8_t *folded, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = parent[i];
        if (p < -1 || p >= n) return -1;
        if (p >= 0 && depth[i] >= 0 && children[p] < 2) children[p]++;
    }
    int64_t any = 0;
    for (int64_t i = 0; i < n; i++) {
        out[i] = -1;
        const int64_t p = parent[i];
        if (p < 0 || depth[i] < 0 || children[p] != 1) continue;
        const int64_t c = code_at(codes, width, i);
        if (c >= 0 && c == code_at(codes, width, p)) {
            folded[i] = 1;
            any = 1;
        }
    }
    if (!any) return 0;
    for (int64_t i = 0; i < n; i++) {
        if (!folded[i]) continue;
        int64_t a = parent[i], steps = 0;
        while (a >= 0 && folded[a]) {
            a = parent[a];
            if (++steps > n) return -1;
        }
        out[i] = a;
    }
    return 0;
}

/* Marks in `out` (n flags, zeroed) each of `rows` and every ancestor of one
 * (NoteContext.launches_work: an op launched device work at or below it).
 * A walk stops at a node marked already: its ancestors are marked too, so
 * every node is marked once. Returns 0, or -1 if a row or a parent lies
 * outside [0, n) (a parent may be -1). */
int64_t tp_mark_up(const int64_t *parent, int64_t n, const int64_t *rows, int64_t count, uint8_t *out) {
    for (int64_t k = 0; k < count; k++) {
        int64_t r = rows[k];
        if (r < 0 || r >= n) return -1;
        if (out[r]) continue;
        out[r] = 1;
        r = parent[r];
        while (r >= 0 && r < n && !out[r]) {
            out[r] = 1;
            r = parent[r];
        }
        if (r < -1 || r >= n) return -1;
    }
    return 0;
}

/* Each host node's value minus its host children's (a self time or self
 * memory: analysis.ops.event_costs), 0.0 off the host tree (depth < 0):
 * the children's values added in row order into a sum started at 0.0 (as
 * np.bincount adds), then subtracted from the node's own. `out` (n) is
 * zeroed by the caller. Returns 0, or -1 if a parent lies outside [-1, n). */
int64_t tp_self_values(const int64_t *parent, const int32_t *depth, const double *values, int64_t n,
                       double *out) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = parent[i];
        if (p < -1 || p >= n) return -1;
        if (p >= 0) out[p] += depth[i] >= 0 ? values[i] : 0.0;
    }
    for (int64_t i = 0; i < n; i++) out[i] = depth[i] >= 0 ? values[i] - out[i] : 0.0;
    return 0;
}

/* The op table's groups (analysis.ops._group_codes over the keys of the
 * counted rows) read where the keys lie: row k is event rows[k] (each in
 * [0, events)), or event k where `rows` is NULL (then n = events); key j's value there is its code (of widths[j] bytes at
 * codes[j]), passed through remaps[j] where that is not NULL (code -1
 * reading its last entry, remap_lens[j] - 1), and must lie in
 * [-1, spans[j]). The tuple of values, as sum((value + 1) * strides[j]) in
 * [0, total), is numbered by first appearance into `number` (n), each
 * number's first row into `first`; `slot` (total) is scratch. Returns how
 * many groups, or -1 if a row, code or value lies outside. */
int64_t tp_group_keys(const int64_t *rows, int64_t n, int64_t events, int64_t nkeys, const int64_t *codes,
                      const int32_t *widths, const int64_t *remaps, const int64_t *remap_lens,
                      const int64_t *spans, const int64_t *strides, int64_t total, int64_t *slot,
                      int64_t *number, int64_t *first) {
    for (int64_t s = 0; s < total; s++) slot[s] = -1;
    int64_t count = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t r = rows ? rows[k] : k;
        if (r < 0 || r >= events) return -1;
        int64_t key = 0;
        for (int64_t j = 0; j < nkeys; j++) {
            int64_t v = code_at((const void *)(intptr_t)codes[j], widths[j], r);
            if (remaps[j]) {
                const int64_t len = remap_lens[j];
                if (v < -1 || v >= len - 1) return -1;
                v = ((const int64_t *)(intptr_t)remaps[j])[v < 0 ? len - 1 : v];
            }
            if (v < -1 || v >= spans[j]) return -1;
            key += (v + 1) * strides[j];
        }
        if (key < 0 || key >= total) return -1;
        int64_t g = slot[key];
        if (g < 0) {
            g = slot[key] = count;
            first[count++] = k;
        }
        number[k] = g;
    }
    return count;
}

/* numpy's order of doubles: NaN after every number. */
static int before(double a, double b) { return a < b || (b != b && a == a); }

/* Whether ordered[j] is counted for x: lies before it (side left), or not after it (side right). */
static int counted(double e, double x, int right) { return right ? !before(x, e) : before(e, x); }

/* np.searchsorted(ordered, wanted, side) for `ordered` sorted in numpy's
 * order (NaN last): how many of the m values lie before each wanted value
 * (side left), or not after it (side right). Each search starts from the
 * previous answer and gallops (1, 2, 4 ... steps) before halving, so
 * wanted values that come in runs near each other (one thread's events)
 * cost a few steps each, where a binary search over every value misses
 * the cache at each step. Values in no such order would cost more than
 * the caller's sort: past 12 steps a value on average (and 4096 spare),
 * it stops and returns 1 (the counts are then not all written); else 0. */
int64_t tp_count_before(const double *ordered, int64_t m, const double *wanted, int64_t n, int right,
                        int64_t *out) {
    int64_t at = 0; /* the previous answer: the first value not counted */
    int64_t steps = 0;
    for (int64_t i = 0; i < n; i++) {
        if (steps > 12 * i + 4096) return 1;
        const double x = wanted[i];
        int64_t lo, hi; /* counted below lo, not counted at hi and above */
        if (at < m && counted(ordered[at], x, right)) {
            int64_t step = 1;
            lo = at + 1;
            hi = at + 1;
            while (hi < m && counted(ordered[hi], x, right)) {
                steps++;
                lo = hi + 1;
                hi = at + (step <<= 1);
                if (hi > m) hi = m;
            }
        } else {
            int64_t step = 1;
            hi = at;
            lo = at;
            while (lo > 0 && !counted(ordered[lo - 1], x, right)) {
                steps++;
                hi = lo - 1;
                lo = at - (step <<= 1);
                if (lo < 0) lo = 0;
            }
        }
        /* The answer lies in [lo, hi]: the first not counted. */
        while (lo < hi) {
            steps++;
            const int64_t mid = lo + (hi - lo) / 2;
            if (counted(ordered[mid], x, right))
                lo = mid + 1;
            else
                hi = mid;
        }
        out[i] = at = lo;
    }
    return 0;
}
