/* The smallest query for `make check`: reads int64 column "a" and writes nothing (no outputs).
 * The check only needs the runtime, the driver and simdjson to link and to speak the protocol. */
#include "jg.h"

static const jg_column columns[] = {{"a", 1, JG_INT64, 0, 0}};

static int row(jg_ctx *ctx, const jg_val *r) {
  (void)ctx;
  return r[0].null || r[0].v.i > 0 ? JG_ROW_OK : JG_ROW_ERROR;
}

const jg_query JG_QUERY = {columns, 1, 0, row};
