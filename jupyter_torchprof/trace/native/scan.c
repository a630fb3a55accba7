/*
 * One pass over a chunk of Kineto JSON (an array of events) into columns.
 *
 * Plain C (no Python headers), loaded with ctypes by `native/__init__.py`.
 * For one chunk it writes what the typed msgspec decode + `_Builder._digest`
 * would read from it: per complete (X) event its numbers and the local codes
 * of its strings and raw JSON values, per instant event and flow event the
 * same, and the raw-table codes of metadata (M) events. Strings and raw values
 * are deduplicated into small per-chunk tables of (offset, length) into the
 * chunk; Python turns each distinct one into its global code once.
 *
 * The rule that keeps results identical: whenever anything in the chunk is
 * not exactly what the typed schema (`schema.py`) accepts, or is anything the
 * scanner does not fully understand (a value type the schema rejects, a key
 * given twice, an escaped key, a number out of range, invalid UTF-8,
 * NaN/Infinity, deep nesting, an unknown phase), the chunk is REFUSED with a
 * non-zero code and Python digests it the pure-Python way. Refusing is always
 * safe; accepting is only allowed where the typed decode would succeed with
 * the same values.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- result codes (kept in step with native/__init__.py) ---- */
enum {
    TP_OK = 0,
    TP_SYNTAX = 1,   /* not valid JSON (or not what the scanner reads) */
    TP_TYPE = 2,     /* a value of a type the typed schema rejects */
    TP_DUP = 3,      /* a known key given twice */
    TP_RANGE = 4,    /* an integer outside int64 */
    TP_DEPTH = 5,    /* nested deeper than MAX_DEPTH */
    TP_UTF8 = 6,     /* invalid UTF-8 or a lone surrogate escape */
    TP_PHASE = 7,    /* no "ph", or one the schema does not know */
    TP_CAPACITY = 8, /* the output arrays are too small: retry larger */
    TP_KEY = 9,      /* a key with escapes */
    TP_NUMBER = 10,  /* a number this scanner does not convert itself */
    TP_NOT_OBJECT = 11,
};

#define MAX_DEPTH 64

/* ---- output columns (order shared with native/__init__.py COLUMNS) ---- */
enum {
    X_NAME, X_CAT, X_PID, X_TID, X_TS, X_DUR, X_EXT, X_CORR, X_DEVICE, X_STREAM,
    X_BYTES, X_REGISTERS, X_SHARED, X_OCCUPANCY, X_BPS, X_WPS,
    X_GRID, X_BLOCK, X_DIMS, X_TYPES, X_CONC, X_KF, X_CS, X_MH, X_PYID, X_PYPID,
    X_SEQ, X_FLAGS, X_PID_S, X_TID_S, X_STREAM_S,
    M_NAME, M_TS, M_PID, M_TID, M_BYTES, M_ALLOC, M_RES, M_DTYPE, M_DID, M_FLAGS, M_PID_S, M_TID_S,
    F_CAT, F_ID, F_START, F_PID, F_TID, F_TS, F_FLAGS, F_PID_S, F_TID_S,
    MD_RAW,
    S_OFF, S_LEN, S_ESC,
    R_OFF, R_LEN,
    S_SLOTS, R_SLOTS,
    N_COLUMNS
};

/* counts[] written back */
enum { C_X, C_MEM, C_FLOW, C_META, C_STR, C_RAW, C_UNREAD, C_ERRPOS, N_COUNTS };
/* caps[] given */
enum { CAP_EV, CAP_STR, CAP_RAW, CAP_SSLOTS, CAP_RSLOTS, N_CAPS };

/* ---- values as scanned ---- */
enum { V_ABSENT = 0, V_STR, V_INT, V_FLOAT, V_NULL, V_BOOL, V_ARRAY, V_OBJECT };

typedef struct {
    uint8_t t;
    uint8_t esc;           /* string with escapes */
    const uint8_t *s, *e;  /* strings: the content; others: the value's text */
    const uint8_t *rs, *re; /* the value's whole text (with quotes) */
} Val;

enum { K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_ID, K_ARGS, N_TOP };

enum {
    A_EXT, A_CORR, A_DEVICE, A_STREAM, A_BYTES, A_GRID, A_BLOCK, A_REGISTERS, A_SHARED,
    A_OCCUPANCY, A_BPS, A_WPS, A_DIMS, A_TYPES, A_CONC, A_CS, A_MH, A_KF, A_PYID, A_PYPID,
    A_MBYTES, A_TALLOC, A_TRES, A_DTYPE, A_DID, A_SEQ, N_ARGS
};

static const char *const ARG_KEYS[N_ARGS] = {
    "External id", "correlation", "device", "stream", "bytes", "grid", "block",
    "registers per thread", "shared memory", "est. achieved occupancy %", "blocks per SM",
    "warps per SM", "Input Dims", "Input type", "Concrete Inputs", "Call stack",
    "Module Hierarchy", "kernel_file", "Python id", "Python parent id",
    "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id", "Sequence number",
};

typedef struct {
    const uint8_t *p, *end, *base;
    void **col;
    int64_t *cnt;
    const int64_t *cap;
    int read_flows;  /* 0: flow events are only counted (schema.UnreadFlowStart) */
    int read_events; /* 0: only flow events are read (the flows-only pass, schema._FLOWS_ONLY) */
    int c_locale;    /* strtod reads '.' as the decimal point */
} Ctx;

typedef struct {
    Val top[N_TOP];
    Val args[N_ARGS];
    uint8_t set[N_TOP + N_ARGS]; /* which were set (top: k, args: N_TOP + k), to reset them */
    int nset;
} Ev;

/* ---- scanning primitives ---- */

static inline void skip_ws(Ctx *c) {
    const uint8_t *p = c->p, *end = c->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    c->p = p;
}

static inline int hexval(uint8_t ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_u4(const uint8_t *p, const uint8_t *end, unsigned *out) {
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return 0;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence starting at p (p[0] >= 0x80); returns its length or 0. */
static inline int utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t a = p[0];
    if (a >= 0xC2 && a <= 0xDF) {
        if (end - p < 2 || (p[1] & 0xC0) != 0x80) return 0;
        return 2;
    }
    if (a >= 0xE0 && a <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (a == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (a == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (a >= 0xF0 && a <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if (a == 0xF0 && p[1] < 0x90) return 0;
        if (a == 0xF4 && p[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* Whether a word holds a zero byte (exact for the existence of one). */
#define HAS_ZERO(x) (((x) - ONES) & ~(x) & HIGHS)

/* Whether any byte of w is '"', '\\', below 0x20 or at/above 0x80. */
static inline uint64_t special8(uint64_t w) {
    uint64_t below = (w - 0x20 * ONES) & ~w & HIGHS; /* a byte < 0x20 (exact when none >= 0x80) */
    return (w & HIGHS) | below | HAS_ZERO(w ^ (0x22 * ONES)) | HAS_ZERO(w ^ (0x5C * ONES));
}

/* A string at c->p (a '"'); fills v. */
static int scan_string(Ctx *c, Val *v) {
    const uint8_t *p = c->p + 1, *end = c->end;
    int esc = 0;
    v->rs = c->p;
    v->s = p;
    for (;;) {
        /* Eight bytes at a time while none is special (quote, backslash, control, non-ASCII). */
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t m = special8(w);
            if (m) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                /* The lowest flagged byte is the first special one (each
                   test's lowest hit is exact), so jump straight to it. */
                p += __builtin_ctzll(m) >> 3;
#endif
                break;
            }
            p += 8;
        }
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) p++;
        if (p >= end) return TP_SYNTAX;
        uint8_t ch = *p;
        if (ch == '"') break;
        if (ch < 0x20) return TP_SYNTAX;
        if (ch == '\\') {
            esc = 1;
            if (end - p < 2) return TP_SYNTAX;
            uint8_t e = p[1];
            if (e == 'u') {
                unsigned u;
                if (!read_u4(p + 2, end, &u)) return TP_SYNTAX;
                p += 6;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !read_u4(p + 2, end, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return TP_UTF8;
                    p += 6;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    return TP_UTF8;
                }
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't') {
                p += 2;
                continue;
            }
            return TP_SYNTAX;
        }
        int n = utf8_len(p, end);
        if (!n) return TP_UTF8;
        p += n;
    }
    v->e = p;
    v->esc = (uint8_t)esc;
    v->t = V_STR;
    c->p = p + 1;
    v->re = c->p;
    return TP_OK;
}

/* A number at c->p (JSON grammar); fills v with V_INT or V_FLOAT. */
static int scan_number(Ctx *c, Val *v) {
    const uint8_t *p = c->p, *end = c->end;
    int is_int = 1;
    v->rs = v->s = p;
    if (p < end && *p == '-') p++;
    if (p >= end) return TP_SYNTAX;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return TP_SYNTAX;
    }
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return TP_SYNTAX;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return TP_SYNTAX;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    v->t = is_int ? V_INT : V_FLOAT;
    v->e = v->re = p;
    c->p = p;
    return TP_OK;
}

static int scan_value(Ctx *c, Val *v, int depth);

static int scan_container(Ctx *c, int depth) {
    uint8_t open = *c->p;
    Val tmp;
    int rc;
    if (depth > MAX_DEPTH) return TP_DEPTH;
    c->p++;
    skip_ws(c);
    if (c->p >= c->end) return TP_SYNTAX;
    uint8_t close = open == '[' ? ']' : '}';
    if (*c->p == close) {
        c->p++;
        return TP_OK;
    }
    for (;;) {
        if (open == '{') {
            if (*c->p != '"') return TP_SYNTAX;
            if ((rc = scan_string(c, &tmp))) return rc;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return TP_SYNTAX;
            c->p++;
            skip_ws(c);
        }
        if ((rc = scan_value(c, &tmp, depth + 1))) return rc;
        skip_ws(c);
        if (c->p >= c->end) return TP_SYNTAX;
        if (*c->p == ',') {
            c->p++;
            skip_ws(c);
            if (c->p >= c->end) return TP_SYNTAX;
            continue;
        }
        if (*c->p == close) {
            c->p++;
            return TP_OK;
        }
        return TP_SYNTAX;
    }
}

static int literal(Ctx *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return TP_SYNTAX;
    c->p += n;
    return TP_OK;
}

/* Any JSON value at c->p (whitespace already skipped). */
static int scan_value(Ctx *c, Val *v, int depth) {
    int rc;
    if (c->p >= c->end) return TP_SYNTAX;
    uint8_t ch = *c->p;
    v->esc = 0;
    v->rs = v->s = c->p;
    switch (ch) {
    case '"':
        return scan_string(c, v);
    case '{':
    case '[':
        if ((rc = scan_container(c, depth))) return rc;
        v->t = ch == '{' ? V_OBJECT : V_ARRAY;
        break;
    case 't':
        if ((rc = literal(c, "true", 4))) return rc;
        v->t = V_BOOL;
        break;
    case 'f':
        if ((rc = literal(c, "false", 5))) return rc;
        v->t = V_BOOL;
        break;
    case 'n':
        if ((rc = literal(c, "null", 4))) return rc;
        v->t = V_NULL;
        break;
    default:
        if (ch == '-' || (ch >= '0' && ch <= '9')) return scan_number(c, v);
        return TP_SYNTAX; /* NaN, Infinity and anything else */
    }
    v->e = v->re = c->p;
    return TP_OK;
}

/* ---- numbers ---- */

static int to_int(const Val *v, int64_t *out) {
    if (v->t != V_INT) return TP_TYPE;
    const uint8_t *p = v->s;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    uint64_t w = 0;
    if (v->e - p > 19) return TP_RANGE;
    for (; p < v->e; p++) w = w * 10 + (uint64_t)(*p - '0');
    if (w > (uint64_t)INT64_MAX) return TP_RANGE;
    *out = neg ? -(int64_t)w : (int64_t)w;
    return TP_OK;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static const uint64_t POW10_U64[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
    1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
    1000000000000000000ULL, 10000000000000000000ULL};

/* w / d correctly rounded (to nearest, ties to even) into a double, for a
   quotient in [1, 2^53): 53 significant bits by one exact integer division.
   0 when the quotient is out of that range or there is no 128-bit integer
   type (the caller then uses strtod). */
static int exact_quotient(uint64_t w, uint64_t d, double *out) {
#ifdef __SIZEOF_INT128__
    uint64_t q = w / d;
    if (q == 0 || q >= (1ULL << 53)) return 0;
    int bits = 64 - __builtin_clzll(q);
    int shift = 53 - bits; /* the quotient times 2^shift lies in [2^52, 2^53) */
    unsigned __int128 n = (unsigned __int128)w << shift;
    uint64_t m = (uint64_t)(n / d), r = (uint64_t)(n % d);
    /* Round half to even: compare 2r with d without overflow (r < d). */
    if (r > d - r || (r == d - r && (m & 1))) m++;
    *out = ldexp((double)m, -shift); /* m <= 2^53: exact, as is the scaling */
    return 1;
#else
    (void)w;
    (void)d;
    (void)out;
    return 0;
#endif
}

/* `c_locale`: whether strtod reads '.' as the decimal point (checked per scan). */
static int to_float(const Val *v, double *out, int c_locale) {
    if (v->t != V_INT && v->t != V_FLOAT) return TP_TYPE;
    const uint8_t *p = v->s, *e = v->e;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    /* The mantissa [p, mend), its '.', and the written exponent. */
    const uint8_t *mend = p, *dot = NULL;
    while (mend < e && *mend != 'e' && *mend != 'E') {
        if (*mend == '.') dot = mend;
        mend++;
    }
    if (!dot) dot = mend;
    long exp10 = 0;
    if (mend < e) {
        const uint8_t *q = mend + 1;
        int eneg = 0;
        if (*q == '+' || *q == '-') eneg = *q++ == '-';
        for (; q < e; q++) {
            exp10 = exp10 * 10 + (*q - '0');
            if (exp10 > 100000) return TP_NUMBER;
        }
        if (eneg) exp10 = -exp10;
    }
    /* Significant digits: leading and trailing zeros do not count. */
    const uint8_t *fs = p, *ls = mend - 1;
    while (fs < mend && (*fs == '0' || *fs == '.')) fs++;
    while (ls >= fs && (*ls == '0' || *ls == '.')) ls--;
    if (fs > ls) { /* zero; msgspec reads the integer "-0" as 0, then 0.0 */
        *out = neg && v->t == V_FLOAT ? -0.0 : 0.0;
        return TP_OK;
    }
    uint64_t w = 0;
    int digits = 0;
    for (const uint8_t *q = fs; q <= ls; q++) {
        if (*q == '.') continue;
        if (++digits > 19) goto slow;
        w = w * 10 + (uint64_t)(*q - '0');
    }
    exp10 += ls < dot ? (long)(dot - ls - 1) : -(long)(ls - dot);
    if (w <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        /* Both operands exact, one rounding: correctly rounded, as msgspec is. */
        double d = (double)w;
        d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
        *out = neg ? -d : d;
        return TP_OK;
    }
    if (exp10 < 0 && exp10 >= -19 && exact_quotient(w, POW10_U64[-exp10], out)) {
        /* ns timestamps in µs ("1712195495519689.047": 19 digits) */
        if (neg) *out = -*out;
        return TP_OK;
    }
slow:;
    /* Beyond the exact fast path: correctly rounded strtod, as msgspec rounds
       (unless a locale changed the decimal point, which tp_scan checks). */
    if (!c_locale) return TP_NUMBER;
    char buf[64];
    size_t n = (size_t)(v->e - v->s);
    if (n >= sizeof buf) return TP_NUMBER;
    memcpy(buf, v->s, n);
    buf[n] = 0;
    char *stop;
    double d = strtod(buf, &stop);
    if (stop != buf + n || !isfinite(d)) return TP_NUMBER;
    if (v->t == V_INT && d == 0) d = 0.0;
    *out = d;
    return TP_OK;
}

/* ---- per-chunk tables of distinct strings / raw values ---- */

static inline uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 29;
    return h;
}

static int intern(Ctx *c, const uint8_t *s, const uint8_t *e, int esc, int raw, int32_t *code) {
    size_t n = (size_t)(e - s);
    int64_t *off = c->col[raw ? R_OFF : S_OFF], *len = c->col[raw ? R_LEN : S_LEN];
    int32_t *slots = c->col[raw ? R_SLOTS : S_SLOTS];
    int64_t mask = c->cap[raw ? CAP_RSLOTS : CAP_SSLOTS] - 1;
    int64_t *count = &c->cnt[raw ? C_RAW : C_STR];
    int64_t i = (int64_t)(hash_bytes(s, n) & (uint64_t)mask);
    int64_t at = s - c->base;
    for (;;) {
        int32_t k = slots[i];
        if (k < 0) break;
        if ((size_t)len[k] == n && memcmp(c->base + off[k], s, n) == 0) {
            *code = k;
            return TP_OK;
        }
        i = (i + 1) & mask;
    }
    if (*count >= c->cap[raw ? CAP_RAW : CAP_STR] || *count * 2 >= mask) return TP_CAPACITY;
    int32_t k = (int32_t)(*count)++;
    slots[i] = k;
    off[k] = at;
    len[k] = (int64_t)n;
    if (!raw) ((uint8_t *)c->col[S_ESC])[k] = (uint8_t)esc;
    *code = k;
    return TP_OK;
}

/* ---- field readers: the typed schema's rules ---- */

/* str | None (name, cat): -1 for absent, null and "". */
static int opt_str(Ctx *c, const Val *v, int32_t *code) {
    *code = -1;
    if (v->t == V_ABSENT || v->t == V_NULL) return TP_OK;
    if (v->t != V_STR) return TP_TYPE;
    if (v->e == v->s) return TP_OK;
    return intern(c, v->s, v->e, v->esc, 0, code);
}

/* str with default "" (Call stack, kernel_file ...). */
static int req_str(Ctx *c, const Val *v, int32_t *code) {
    *code = -1;
    if (v->t == V_ABSENT) return TP_OK;
    if (v->t != V_STR) return TP_TYPE;
    if (v->e == v->s) return TP_OK;
    return intern(c, v->s, v->e, v->esc, 0, code);
}

/* int | str (pid, tid, stream): flag bit set and string code when a string. */
static int id_or_str(Ctx *c, const Val *v, int64_t *out, uint8_t *flags, uint8_t bit, int32_t *scode) {
    *scode = -1;
    if (v->t == V_ABSENT) {
        *out = -1;
        return TP_OK;
    }
    if (v->t == V_STR) {
        *out = -1;
        *flags |= bit;
        if (v->e == v->s) return TP_OK;
        return intern(c, v->s, v->e, v->esc, 0, scode);
    }
    return to_int(v, out);
}

static int opt_int(const Val *v, int64_t *out) {
    if (v->t == V_ABSENT) {
        *out = -1;
        return TP_OK;
    }
    return to_int(v, out);
}

static int opt_float(const Ctx *c, const Val *v, double dflt, double *out) {
    if (v->t == V_ABSENT) {
        *out = dflt;
        return TP_OK;
    }
    return to_float(v, out, c->c_locale);
}

static int opt_raw(Ctx *c, const Val *v, int32_t *code) {
    *code = -1;
    if (v->t == V_ABSENT) return TP_OK;
    return intern(c, v->rs, v->re, 0, 1, code);
}

#define TRY(x)                   \
    do {                         \
        int rc_ = (x);           \
        if (rc_) return rc_;     \
    } while (0)
#define COL(k, T) ((T *)c->col[k])

static int args_ok(const Ev *ev) {
    uint8_t t = ev->top[K_ARGS].t;
    return t == V_ABSENT || t == V_OBJECT;
}

static int emit_x(Ctx *c, const Ev *ev) {
    int64_t i = c->cnt[C_X];
    const Val *a = ev->args;
    uint8_t flags = 0;
    if (i >= c->cap[CAP_EV]) return TP_CAPACITY;
    if (!args_ok(ev)) return TP_TYPE;
    TRY(opt_str(c, &ev->top[K_NAME], &COL(X_NAME, int32_t)[i]));
    TRY(opt_str(c, &ev->top[K_CAT], &COL(X_CAT, int32_t)[i]));
    TRY(id_or_str(c, &ev->top[K_PID], &COL(X_PID, int64_t)[i], &flags, 1, &COL(X_PID_S, int32_t)[i]));
    TRY(id_or_str(c, &ev->top[K_TID], &COL(X_TID, int64_t)[i], &flags, 2, &COL(X_TID_S, int32_t)[i]));
    TRY(opt_float(c, &ev->top[K_TS], NAN, &COL(X_TS, double)[i]));
    TRY(opt_float(c, &ev->top[K_DUR], 0.0, &COL(X_DUR, double)[i]));
    TRY(opt_int(&a[A_EXT], &COL(X_EXT, int64_t)[i]));
    TRY(opt_int(&a[A_CORR], &COL(X_CORR, int64_t)[i]));
    TRY(opt_int(&a[A_DEVICE], &COL(X_DEVICE, int64_t)[i]));
    TRY(id_or_str(c, &a[A_STREAM], &COL(X_STREAM, int64_t)[i], &flags, 4, &COL(X_STREAM_S, int32_t)[i]));
    TRY(opt_float(c, &a[A_BYTES], NAN, &COL(X_BYTES, double)[i]));
    TRY(opt_float(c, &a[A_REGISTERS], NAN, &COL(X_REGISTERS, double)[i]));
    TRY(opt_float(c, &a[A_SHARED], NAN, &COL(X_SHARED, double)[i]));
    TRY(opt_float(c, &a[A_OCCUPANCY], NAN, &COL(X_OCCUPANCY, double)[i]));
    TRY(opt_float(c, &a[A_BPS], NAN, &COL(X_BPS, double)[i]));
    TRY(opt_float(c, &a[A_WPS], NAN, &COL(X_WPS, double)[i]));
    TRY(opt_raw(c, &a[A_GRID], &COL(X_GRID, int32_t)[i]));
    TRY(opt_raw(c, &a[A_BLOCK], &COL(X_BLOCK, int32_t)[i]));
    TRY(opt_raw(c, &a[A_DIMS], &COL(X_DIMS, int32_t)[i]));
    TRY(opt_raw(c, &a[A_TYPES], &COL(X_TYPES, int32_t)[i]));
    TRY(opt_raw(c, &a[A_CONC], &COL(X_CONC, int32_t)[i]));
    TRY(req_str(c, &a[A_KF], &COL(X_KF, int32_t)[i]));
    TRY(req_str(c, &a[A_CS], &COL(X_CS, int32_t)[i]));
    TRY(req_str(c, &a[A_MH], &COL(X_MH, int32_t)[i]));
    TRY(opt_int(&a[A_PYID], &COL(X_PYID, int64_t)[i]));
    TRY(opt_int(&a[A_PYPID], &COL(X_PYPID, int64_t)[i]));
    TRY(opt_int(&a[A_SEQ], &COL(X_SEQ, int64_t)[i]));
    COL(X_FLAGS, uint8_t)[i] = flags;
    c->cnt[C_X] = i + 1;
    return TP_OK;
}

static int emit_instant(Ctx *c, const Ev *ev) {
    int64_t i = c->cnt[C_MEM];
    const Val *a = ev->args;
    uint8_t flags = 0;
    if (i >= c->cap[CAP_EV]) return TP_CAPACITY;
    if (!args_ok(ev)) return TP_TYPE;
    TRY(opt_str(c, &ev->top[K_NAME], &COL(M_NAME, int32_t)[i]));
    TRY(id_or_str(c, &ev->top[K_PID], &COL(M_PID, int64_t)[i], &flags, 1, &COL(M_PID_S, int32_t)[i]));
    TRY(id_or_str(c, &ev->top[K_TID], &COL(M_TID, int64_t)[i], &flags, 2, &COL(M_TID_S, int32_t)[i]));
    TRY(opt_float(c, &ev->top[K_TS], NAN, &COL(M_TS, double)[i]));
    TRY(opt_float(c, &a[A_MBYTES], NAN, &COL(M_BYTES, double)[i]));
    TRY(opt_float(c, &a[A_TALLOC], NAN, &COL(M_ALLOC, double)[i]));
    TRY(opt_float(c, &a[A_TRES], NAN, &COL(M_RES, double)[i]));
    TRY(opt_int(&a[A_DTYPE], &COL(M_DTYPE, int64_t)[i]));
    TRY(opt_int(&a[A_DID], &COL(M_DID, int64_t)[i]));
    COL(M_FLAGS, uint8_t)[i] = flags;
    c->cnt[C_MEM] = i + 1;
    return TP_OK;
}

static int emit_flow(Ctx *c, const Ev *ev, int start) {
    int64_t i = c->cnt[C_FLOW];
    uint8_t flags = 0;
    if (!c->read_flows) {
        c->cnt[C_UNREAD]++;
        return TP_OK;
    }
    if (i >= c->cap[CAP_EV]) return TP_CAPACITY;
    TRY(opt_str(c, &ev->top[K_CAT], &COL(F_CAT, int32_t)[i]));
    TRY(opt_int(&ev->top[K_ID], &COL(F_ID, int64_t)[i]));
    TRY(id_or_str(c, &ev->top[K_PID], &COL(F_PID, int64_t)[i], &flags, 1, &COL(F_PID_S, int32_t)[i]));
    TRY(id_or_str(c, &ev->top[K_TID], &COL(F_TID, int64_t)[i], &flags, 2, &COL(F_TID_S, int32_t)[i]));
    TRY(opt_float(c, &ev->top[K_TS], NAN, &COL(F_TS, double)[i]));
    COL(F_START, uint8_t)[i] = (uint8_t)start;
    COL(F_FLAGS, uint8_t)[i] = flags;
    c->cnt[C_FLOW] = i + 1;
    return TP_OK;
}

/* Phases of the typed union that nothing reads (schema._IGNORED). */
static int ignored_phase(uint8_t ph) {
    return ph && strchr("BECbentPONDRVvc", ph) != NULL;
}

/* A metadata event, by its code in the raw table: a trace can repeat the
   same few metadata events hundreds of thousands of times (HTA's MTIA
   trace: 310k of 456k items, 22 distinct), and Python decodes each distinct
   one once. */
static int push_meta(Ctx *c, const uint8_t *start, const uint8_t *end) {
    int64_t i = c->cnt[C_META];
    if (i >= c->cap[CAP_EV]) return TP_CAPACITY;
    int32_t k;
    int rc = intern(c, start, end, 0, 1, &k);
    if (rc) return rc;
    COL(MD_RAW, int64_t)[i] = k;
    c->cnt[C_META] = i + 1;
    return TP_OK;
}

/* The last few metadata events scanned in a run of them: an event whose
   bytes equal one of these is that same event again (the same bytes scan
   the same), so it is not scanned a second time. */
#define N_REPEATS 8
typedef struct {
    int64_t off[N_REPEATS], len[N_REPEATS];
    uint64_t head[N_REPEATS]; /* the first 8 bytes: most mismatches end here */
    int n, next;
} Repeats;

static uint64_t head8(const uint8_t *p, const uint8_t *end) {
    uint64_t w = 0;
    memcpy(&w, p, end - p < 8 ? (size_t)(end - p) : 8);
    return w;
}

/* The index in `r` of the event at c->p, or -1. */
static int repeat_at(const Ctx *c, const Repeats *r) {
    uint64_t h = head8(c->p, c->end);
    for (int k = 0; k < r->n; k++) {
        if (r->head[k] == h && c->end - c->p >= r->len[k] &&
            memcmp(c->p, c->base + r->off[k], (size_t)r->len[k]) == 0)
            return k;
    }
    return -1;
}

static void remember(Repeats *r, const Ctx *c, const uint8_t *start) {
    int k = r->next;
    r->off[k] = start - c->base;
    r->len[k] = c->p - start;
    r->head[k] = head8(start, c->end);
    r->next = (k + 1) % N_REPEATS;
    if (r->n < N_REPEATS) r->n++;
}

static int dispatch(Ctx *c, const Ev *ev, const uint8_t *start, const uint8_t *end) {
    const Val *ph = &ev->top[K_PH];
    if (ph->t != V_STR || ph->esc || ph->e - ph->s != 1) return TP_PHASE;
    uint8_t p = ph->s[0];
    if (!c->read_events && (p == 'X' || p == 'i' || p == 'I' || p == 'M'))
        return TP_OK; /* placeholders that read nothing (schema._UNREAD_OTHERS) */
    switch (p) {
    case 'X':
        return emit_x(c, ev);
    case 's':
        return emit_flow(c, ev, 1);
    case 'f':
        return emit_flow(c, ev, 0);
    case 'i':
    case 'I':
        return emit_instant(c, ev);
    case 'M':
        return push_meta(c, start, end);
    default:
        return ignored_phase(p) ? TP_OK : TP_PHASE;
    }
}

static int top_key(const uint8_t *s, size_t n) {
    switch (n) {
    case 2:
        if (!memcmp(s, "ph", 2)) return K_PH;
        if (!memcmp(s, "ts", 2)) return K_TS;
        if (!memcmp(s, "id", 2)) return K_ID;
        return -1;
    case 3:
        if (!memcmp(s, "cat", 3)) return K_CAT;
        if (!memcmp(s, "pid", 3)) return K_PID;
        if (!memcmp(s, "tid", 3)) return K_TID;
        if (!memcmp(s, "dur", 3)) return K_DUR;
        return -1;
    case 4:
        if (!memcmp(s, "name", 4)) return K_NAME;
        if (!memcmp(s, "args", 4)) return K_ARGS;
        return -1;
    default:
        return -1;
    }
}

/* The args keys by length, as index + 1 (0 ends a list): a key costs one or two memcmp.
 * Constant, so concurrent scans (ctypes drops the GIL) share it without a race. */
#define MAX_ARG_LEN 25
#define K1(k) ((int8_t)((k) + 1))
static const int8_t ARGS_BY_LEN[MAX_ARG_LEN + 1][5] = {
    [4] = {K1(A_GRID)},
    [5] = {K1(A_BYTES), K1(A_BLOCK), K1(A_MBYTES)},
    [6] = {K1(A_DEVICE), K1(A_STREAM)},
    [9] = {K1(A_PYID), K1(A_DID)},
    [10] = {K1(A_DIMS), K1(A_TYPES), K1(A_CS)},
    [11] = {K1(A_EXT), K1(A_CORR), K1(A_KF), K1(A_DTYPE)},
    [12] = {K1(A_WPS)},
    [13] = {K1(A_SHARED), K1(A_BPS)},
    [14] = {K1(A_TRES)},
    [15] = {K1(A_CONC), K1(A_TALLOC), K1(A_SEQ)},
    [16] = {K1(A_MH), K1(A_PYPID)},
    [20] = {K1(A_REGISTERS)},
    [25] = {K1(A_OCCUPANCY)},
};

static int arg_key(const uint8_t *s, size_t n) {
    if (n > MAX_ARG_LEN) return -1;
    for (const int8_t *k = ARGS_BY_LEN[n]; *k; k++)
        if (!memcmp(s, ARG_KEYS[*k - 1], n)) return *k - 1;
    return -1;
}

/*
 * The members of an object at c->p ('{'): known keys (top level, or args
 * when `args` is set) are kept in `vals`; everything else is only checked.
 */
static int scan_members(Ctx *c, Val *vals, int is_args, Ev *ev) {
    Val key;
    int rc;
    c->p++;
    skip_ws(c);
    if (c->p >= c->end) return TP_SYNTAX;
    if (*c->p == '}') {
        c->p++;
        return TP_OK;
    }
    for (;;) {
        if (*c->p != '"') return TP_SYNTAX;
        if ((rc = scan_string(c, &key))) return rc;
        if (key.esc) return TP_KEY;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return TP_SYNTAX;
        c->p++;
        skip_ws(c);
        size_t n = (size_t)(key.e - key.s);
        int k = is_args ? arg_key(key.s, n) : top_key(key.s, n);
        if (k < 0) {
            Val tmp;
            if ((rc = scan_value(c, &tmp, 2))) return rc;
        } else {
            Val *v = &vals[k];
            if (v->t != V_ABSENT) return TP_DUP;
            ev->set[ev->nset++] = (uint8_t)(is_args ? N_TOP + k : k);
            if (!is_args && k == K_ARGS && c->p < c->end && *c->p == '{') {
                v->rs = c->p;
                if ((rc = scan_members(c, ev->args, 1, ev))) return rc;
                v->t = V_OBJECT;
                v->re = v->e = c->p;
            } else if ((rc = scan_value(c, v, 2))) {
                return rc;
            }
        }
        skip_ws(c);
        if (c->p >= c->end) return TP_SYNTAX;
        if (*c->p == ',') {
            c->p++;
            skip_ws(c);
            if (c->p >= c->end) return TP_SYNTAX;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            return TP_OK;
        }
        return TP_SYNTAX;
    }
}


/* The members of the event at c->p, into `ev` (cleared of the last one's first). */
static int scan_event(Ctx *c, Ev *ev) {
    for (int k = 0; k < ev->nset; k++) {
        int j = ev->set[k];
        if (j < N_TOP)
            ev->top[j].t = V_ABSENT;
        else
            ev->args[j - N_TOP].t = V_ABSENT;
    }
    ev->nset = 0;
    return scan_members(c, ev->top, 0, ev);
}

/*
 * Scan one chunk. `mode`: bit 0 read flow events, bit 1 read the others,
 * bit 2 the chunk is bare: events separated by commas without the array's
 * brackets (a slice of the file, scanned where it lies instead of copied
 * into a bracketed array).
 * `col` holds N_COLUMNS pointers (see the enum), `cap` the
 * capacities, `cnt` receives N_COUNTS counts. Returns TP_OK or a refusal.
 */
int tp_scan(const uint8_t *data, int64_t n, int mode, void **col, const int64_t *cap, int64_t *cnt) {
    Ctx ctx = {data, data + n, data, col, cnt, cap, mode & 1, (mode >> 1) & 1, strtod("0.5", NULL) == 0.5};
    Ctx *c = &ctx;
    int rc = TP_OK;
    Ev ev;
    Repeats repeats;
    int in_meta_run = 0;
    memset(&ev, 0, sizeof ev);
    repeats.n = repeats.next = 0;
    memset(cnt, 0, sizeof(int64_t) * N_COUNTS);
    memset(col[S_SLOTS], 0xFF, sizeof(int32_t) * (size_t)cap[CAP_SSLOTS]);
    memset(col[R_SLOTS], 0xFF, sizeof(int32_t) * (size_t)cap[CAP_RSLOTS]);
    int bare = (mode >> 2) & 1;
    skip_ws(c);
    if (!bare) {
        if (c->p >= c->end || *c->p != '[') return TP_SYNTAX;
        c->p++;
        skip_ws(c);
    }
    if (!bare && c->p < c->end && *c->p == ']') {
        c->p++;
    } else {
        for (;;) {
            if (c->p >= c->end) {
                rc = TP_SYNTAX;
                break;
            }
            if (*c->p != '{') {
                rc = TP_NOT_OBJECT;
                break;
            }
            const uint8_t *start = c->p;
            /* Looked for only within a run of metadata events, so that
               other events pay nothing for it. */
            int again = in_meta_run ? repeat_at(c, &repeats) : -1;
            if (again >= 0) {
                c->p += repeats.len[again];
                if ((rc = push_meta(c, start, c->p))) break;
            } else {
                if ((rc = scan_event(c, &ev))) break;
                if ((rc = dispatch(c, &ev, start, c->p))) break;
                const Val *ph = &ev.top[K_PH];
                in_meta_run = c->read_events && ph->s[0] == 'M';
                if (in_meta_run) remember(&repeats, c, start);
            }
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                skip_ws(c);
                continue;
            }
            if (bare ? c->p >= c->end : c->p < c->end && *c->p == ']') {
                c->p += !bare;
                break;
            }
            rc = TP_SYNTAX;
            break;
        }
    }
    if (!rc) {
        skip_ws(c);
        if (c->p != c->end) rc = TP_SYNTAX;
    }
    cnt[C_ERRPOS] = c->p - c->base;
    return rc;
}

/* For the loader: the layout this library was built with, or -1 if its key table is wrong. */
int tp_abi(void) {
    for (int k = 0; k < N_ARGS; k++)
        if (arg_key((const uint8_t *)ARG_KEYS[k], strlen(ARG_KEYS[k])) != k) return -1;
    return N_COLUMNS * 1000 + N_COUNTS * 100 + N_CAPS;
}
