/* The scan NCA's query for bench/scan_json_raw.py, hand-written to jg.h in the shape generated
 * code takes: a TPC-H Q1-like filter and projection over lineitem-like JSON Lines.
 *
 *   SELECT l_orderkey, l_returnflag, l_extendedprice * (1 - l_discount) AS disc_price
 *   WHERE l_shipdate <= DATE '1998-09-02'
 *
 * Output NTF: null vector 8, l_orderkey int64 @8, l_returnflag string @16, disc_price
 * decimal(18,4) @24; fixed_size 32, then the flag's bytes.
 */
#include <string.h>

#include "jg.h"

static const jg_column columns[] = {
    {"l_orderkey", 10, JG_INT64, 0, 0},      {"l_returnflag", 12, JG_STRING, 0, 0},
    {"l_extendedprice", 15, JG_DECIMAL, 12, 2}, {"l_discount", 10, JG_DECIMAL, 12, 2},
    {"l_shipdate", 10, JG_DATE, 0, 0},
};

#define SHIPDATE_MAX 10471 /* 1998-09-02 */

static int row(jg_ctx *ctx, const jg_val *r) {
  if (r[4].null || r[4].v.i > SHIPDATE_MAX) return JG_ROW_OK;
  int64_t price = 0;
  int null_price = r[2].null || r[3].null;
  if (!null_price && __builtin_mul_overflow(r[2].v.i, 100 - r[3].v.i, &price)) {
    jg_fail(ctx, "decimal overflow in disc_price");
    return JG_ROW_ERROR;
  }
  uint32_t var = r[1].null ? 0 : r[1].v.s.n;
  uint8_t *t = jg_emit(jg_output(ctx, 0), 32 + var);
  if (r[0].null) t[0] |= 1;
  else memcpy(t + 8, &r[0].v.i, 8);
  if (r[1].null) t[0] |= 2;
  else {
    uint32_t off = 32, n = r[1].v.s.n;
    memcpy(t + 16, &off, 4);
    memcpy(t + 20, &n, 4);
    memcpy(t + 32, r[1].v.s.p, n);
  }
  if (null_price) t[0] |= 4;
  else memcpy(t + 24, &price, 8);
  return JG_ROW_OK;
}

const jg_query JG_QUERY = {columns, 5, 1, row};
