/* Second scan query for bench/scan_json_raw.py: request all 16 lineitem columns (every value
 * converted, as the raw simdjson baseline does) and emit nothing. Isolates the scan's parsing and
 * conversion cost from filtering and output. */
#include "jg.h"

#define COL(name, type, p, s) {name, sizeof(name) - 1, type, p, s}

static const jg_column columns[] = {
    COL("l_orderkey", JG_INT64, 0, 0),      COL("l_partkey", JG_INT64, 0, 0),
    COL("l_suppkey", JG_INT64, 0, 0),       COL("l_linenumber", JG_INT32, 0, 0),
    COL("l_quantity", JG_DECIMAL, 12, 2),   COL("l_extendedprice", JG_DECIMAL, 12, 2),
    COL("l_discount", JG_DECIMAL, 12, 2),   COL("l_tax", JG_DECIMAL, 12, 2),
    COL("l_returnflag", JG_STRING, 0, 0),   COL("l_linestatus", JG_STRING, 0, 0),
    COL("l_shipdate", JG_DATE, 0, 0),       COL("l_commitdate", JG_DATE, 0, 0),
    COL("l_receiptdate", JG_DATE, 0, 0),    COL("l_shipinstruct", JG_STRING, 0, 0),
    COL("l_shipmode", JG_STRING, 0, 0),     COL("l_comment", JG_STRING, 0, 0),
};

static int row(jg_ctx *ctx, const jg_val *r) {
  (void)ctx;
  return r[0].null ? JG_ROW_ERROR : JG_ROW_OK; /* every generated line has an order key */
}

const jg_query JG_QUERY = {columns, sizeof columns / sizeof columns[0], 0, row};
