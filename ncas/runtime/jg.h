/* Jumpgate software-NCA runtime: the interface between generated query code and the precompiled
 * runtime library (libjgrt.a).
 *
 * Split of work:
 *   - The runtime owns everything that is the same for every query: the process's control channel
 *     (stdin commands / stdout events, see control.c), input parsing (JSON Lines on simdjson,
 *     NTF over TCP), the TCP transport of contract §3, buffering, timing and counters.
 *   - Generated code (one C file per query, from Jinja2 templates over typed trees) provides the
 *     query's description (`jg_query`) and a row function that evaluates filters and projections
 *     over one input row and writes output tuples.
 *
 * Rows reach generated code as an array of `jg_val`, one per input column, so the same generated
 * expression code works whatever the input format is. Nothing from request text is ever pasted
 * into generated source: string literals (and the column names a scan looks up) appear only as
 * byte arrays, error messages only as numbers (jg_message).
 */
#ifndef JG_H
#define JG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ types (contract §1) */
enum jg_type {
  JG_BOOLEAN = 0,
  JG_INT32 = 1,
  JG_INT64 = 2,
  JG_FLOAT64 = 3,
  JG_DECIMAL = 4, /* unscaled int64 at the column's scale */
  JG_STRING = 5,  /* UTF-8 bytes, not NUL-terminated */
  JG_DATE = 6,    /* days since 1970-01-01 */
  JG_DECIMAL128 = 7 /* decimal of 19..38 digits: unscaled __int128 at the column's scale (v.w) */
};

/* A 128-bit value stored at 8-byte alignment, so that jg_val keeps its v1 size (24 bytes). */
typedef __int128 jg_i128 __attribute__((aligned(8)));

typedef struct {
  const char *p;
  uint32_t n;
} jg_str;

/* One value of one column of the current row. */
typedef struct {
  union {
    int64_t i; /* boolean (0/1), int32, int64, decimal (unscaled), date (days) */
    double f;  /* float64 */
    jg_str s;  /* string */
    jg_i128 w; /* wide decimal (unscaled) */
  } v;
  uint8_t null; /* 1 when SQL NULL */
} jg_val;
#ifdef __cplusplus
static_assert(sizeof(jg_val) == 24, "jg_val keeps its size");
#else
_Static_assert(sizeof(jg_val) == 24, "jg_val keeps its size");
#endif

/* A column the input parser must produce. For JSON, `name` is the key (raw bytes). */
typedef struct {
  const char *name;
  uint32_t name_len;
  uint8_t type;      /* enum jg_type */
  uint8_t precision; /* decimals */
  uint8_t scale;     /* decimals */
} jg_column;

/* ------------------------------------------------------------------ per-thread context */
typedef struct jg_out jg_out;   /* an output port's sender (one per thread per port) */
typedef struct jg_ctx jg_ctx;   /* a worker thread's state */

/* Scratch memory for strings built while evaluating one row (lower, upper, casts).
 * Reset by the runtime before every row. */
char *jg_scratch(jg_ctx *ctx, size_t n);

/* Output port `port` of this worker. */
jg_out *jg_output(jg_ctx *ctx, int port);

/* Reserve one tuple of `len` bytes (fixed part + variable bytes) on `out`, zeroed; returns
 * the tuple's first byte. The length prefix is written by the runtime. The pointer is valid
 * until the next call on the same `out`. */
uint8_t *jg_emit(jg_out *out, uint32_t len);

/* Report a data error for the current row (overflow, invalid cast, ...). The row function must
 * then return JG_ROW_ERROR; the runtime adds file and record and fails the job. `msg` is
 * copied. */
void jg_fail(jg_ctx *ctx, const char *msg);

/* Message `k` of the NCA's message table, for jg_fail and jg_fail_text. Data-error messages name
 * the request's operations and columns, which differ between requests of one shape (clients
 * name columns after per-run ids), so generated code holds only their numbers and the control
 * plane sends the texts with the configuration (`param msg.K TEXT`, docs/nca-process-protocol.md):
 * requests that differ only in names share one generated source and one binary. A number that
 * was not sent reads as "data error (message K of the NCA's message table was not sent)". */
const char *jg_message(jg_ctx *ctx, uint32_t k);

/* The raw bytes of the input tuple the row function is called for, when the driver reads NTF
 * (ntf_relay): `*len` gets its length. NULL (and *len = 0) for drivers whose input is not NTF
 * tuples (scans). Valid until the row function returns. Lets a query forward its input tuple
 * unchanged (the shuffle) instead of re-encoding it. */
const uint8_t *jg_input_tuple(jg_ctx *ctx, uint32_t *len);

/* Runtime filters (docs/runtime-filters.md, jg_rfilter.h): the probe-side scan of a hash join
 * tests each row that passed its own filters against the filter the join's build side made (slot
 * `slot` of this NCA, handed over with the `rfilter` command). `null` is 1 when a key is NULL (the
 * row can match nothing), `hash` jg_hash v1 of the key tuple (when no key is NULL), `ints` the key
 * values as int64 (integral keys; anything for the others). Returns 1 to keep the row, 0 to drop
 * it. A slot without a filter (none came: switched off, or the build side too large) keeps every
 * row. Counts rows tested and removed in the worker's stats. */
int jg_rf_test(jg_ctx *ctx, uint32_t slot, int null, uint64_t hash, const int64_t *ints);

#define JG_ROW_OK 0
#define JG_ROW_ERROR (-1)
/* jg_query.tuples only: a tuple does not fit its NTF layout (*why says how) */
#define JG_TUPLE_MALFORMED (-2)

/* ------------------------------------------------------------------ the generated query */
typedef int (*jg_row_fn)(jg_ctx *ctx, const jg_val *row);

typedef struct {
  /* input columns the parser must fill, in `row` index order */
  const jg_column *columns;
  uint32_t ncolumns;
  /* number of output ports (one per downstream edge of the NCA's last operation) */
  uint32_t noutputs;
  /* called once per input row */
  jg_row_fn row;
  /* optional (NULL: nothing): called once per worker after its last input row, before its
   * outputs end; may emit (an aggregation emits its groups). JG_ROW_OK, or JG_ROW_ERROR after
   * jg_fail. Every driver calls it (jgr_call_finish). */
  int (*finish)(jg_ctx *ctx);
  /* optional (NULL: `row` for each row): called instead of `row` by drivers that decode rows in
   * batches (the NTF relay) with `n` rows of `ncolumns` values each, one after the other; their
   * strings stay valid during the call and scratch memory is reset once per call. An aggregation
   * hashes a batch of keys and prefetches their table slots before probing any. */
  int (*rows)(jg_ctx *ctx, const jg_val *rows, uint32_t n);
  /* optional (0: none): the runtime filters the row function tests with jg_rf_test (docs/
   * runtime-filters.md): filter slot s has rf_nkeys[s] keys, the `row` indexes rf_keys[s][0..) in
   * key order. A columnar scan tests them before converting a row's other columns, and the row
   * function's own test then keeps the row at once. */
  uint32_t nrf;
  const uint32_t *rf_nkeys;
  const uint32_t *const *rf_keys;
  /* optional (NULL: `rows` or `row`): called instead by the NTF relay with `n` tuples of the
   * layout of `columns`, which it reads itself with loads generated for that layout (only the
   * columns it uses; no jg_val rows built by the runtime, no per-field type dispatch). As `rows`,
   * or JG_TUPLE_MALFORMED with *why set when a tuple does not fit the layout. */
  int (*tuples)(jg_ctx *ctx, const uint8_t *const *tuples, const uint32_t *lens, uint32_t n, const char **why);
} jg_query;

/* Defined by generated code. */
extern const jg_query JG_QUERY;

/* A shared scan (docs/shared-scans.md) runs the queries of several jobs over one read of the same
 * files: each member is a scan query compiled under its own name, its output ports, message
 * numbers and runtime filter slots placed after the members' before it. The generated file of a
 * shared scan defines `jg_shared_members` and `jg_shared_nmembers`; the runtime's shared_scan.cpp
 * defines JG_QUERY from them. */
typedef struct {
  const jg_query *query;
  uint32_t port_base, msg_base, rf_base;
} jg_shared_member;

/* ------------------------------------------------------------------ helpers for generated code
 * (implemented in the runtime so that generated files stay small and compile fast) */

/* SQL LIKE with % and _ (one UTF-8 character); case-sensitive; no escape character. */
int jg_like(jg_str s, const char *pat, uint32_t pat_len);
/* Character (code point) length of UTF-8 text. */
int64_t jg_utf8_length(jg_str s);
/* substr(s, start[, len]) with 1-based start in characters; `has_len` = 0 for two-argument. */
jg_str jg_substr(jg_str s, int64_t start, int64_t len, int has_len);
/* lower/upper of UTF-8 text into scratch memory (simple case mapping). */
jg_str jg_lower(jg_ctx *ctx, jg_str s);
jg_str jg_upper(jg_ctx *ctx, jg_str s);
/* three-way compare of byte strings (memcmp order, which is code point order for UTF-8) */
int jg_strcmp(jg_str a, jg_str b);

/* Dates. */
void jg_civil_from_days(int64_t days, int64_t *y, int64_t *m, int64_t *d);
/* Parse 'YYYY-MM-DD'; returns 0 on success. */
int jg_parse_date(const char *p, size_t n, int64_t *days);

/* Decimals (unscaled int64). 10^k for 0 <= k <= 18. */
extern const int64_t jg_pow10[19];
/* Rescale unscaled `v` from scale `from` to `to` (to >= from); returns 0 on overflow. */
int jg_dec_upscale(int64_t v, int from, int to, int64_t *out);
/* Parse a decimal number text (digits, optional sign, point, exponent) to unscaled int64 at
 * `scale`, rounding half away from zero; fails (returns non-zero) when it does not fit
 * `precision` digits. */
int jg_parse_decimal(const char *p, size_t n, int precision, int scale, int64_t *out);
/* Casts between numeric text and values; return non-zero when the text is not a number. */
int jg_parse_int64(const char *p, size_t n, int64_t *out);
int jg_parse_float64(const char *p, size_t n, double *out);
/* Format into scratch memory (for CAST(... AS string)). */
jg_str jg_format_int64(jg_ctx *ctx, int64_t v);
jg_str jg_format_decimal(jg_ctx *ctx, int64_t v, int scale);
jg_str jg_format_float64(jg_ctx *ctx, double v);
jg_str jg_format_date(jg_ctx *ctx, int64_t days);
/* jg_fail with the offending value quoted (for invalid casts). */
void jg_fail_text(jg_ctx *ctx, const char *msg, jg_str value);
/* CAST(string AS boolean): true/false, t/f, yes/no, y/n, 1/0 in any case. */
int jg_parse_bool(const char *p, size_t n, int64_t *out);
/* Round half to even (float64 -> integer casts). */
double jg_round_even(double v);
/* float64 -> decimal(precision, scale), rounding half away from zero; non-zero if it does not fit. */
int jg_float_to_dec(double v, int precision, int scale, int64_t *out);
/* Rescale a 128-bit unscaled value between scales (rounding half away from zero when reducing)
 * and check it fits `precision` digits; non-zero when it does not. */
int jg_dec_rescale(__int128 v, int from, int to, int precision, int64_t *out);

/* Wide decimals (19..38 digits, unscaled __int128; expr_support.c). Each returns non-zero when the
 * result does not fit `precision` digits (or 128 bits on the way); nothing is written then. */
/* Rescale between scales (0..38), rounding half away from zero when the scale shrinks. */
int jg_dec128_rescale(__int128 v, int from, int to, int precision, __int128 *out);
/* Three-way compare of a (scale sa) and b (scale sb), exact for every pair of scales. */
int jg_dec128_cmp(__int128 a, int sa, __int128 b, int sb);
/* As jg_parse_decimal, to 128 bits. */
int jg_parse_decimal128(const char *p, size_t n, int precision, int scale, __int128 *out);
/* As jg_float_to_dec, to 128 bits. */
int jg_float_to_dec128(double v, int precision, int scale, __int128 *out);
/* v / 10^scale as a double: the integer part plus the fraction (as DuckDB converts). */
double jg_dec128_to_double(__int128 v, int scale);
jg_str jg_format_decimal128(jg_ctx *ctx, __int128 v, int scale);

#ifdef __cplusplus
}
#endif
#endif /* JG_H */
