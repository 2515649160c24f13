/* NTF decoding (contract §2): one tuple -> jg_val[], driven by a layout table, so NCAs that read
 * NTF from the network run the same generated row functions as the scans. */
#include <stdlib.h>
#include <string.h>

#include "jgrt.h"

static uint32_t field_size(uint8_t type) {
  switch (type) {
    case JG_BOOLEAN: return 1;
    case JG_INT32:
    case JG_DATE: return 4;
    case JG_DECIMAL128: return 16; /* wide decimal: 128-bit unscaled value */
    default: return 8; /* int64, float64, decimal, string (u32 offset + u32 length) */
  }
}

int jgr_ntf_layout_from_columns(jgr_ntf_layout *l, const jg_column *cols, uint32_t n) {
  memset(l, 0, sizeof *l);
  l->fields = calloc(n ? n : 1, sizeof *l->fields);
  if (!l->fields) return -1;
  l->nfields = n;
  l->null_bytes = (n + 63) / 64 * 8;
  uint32_t off = l->null_bytes;
  for (uint32_t i = 0; i < n; i++) {
    off = (off + 7) & ~7u;
    l->fields[i] = (jgr_ntf_field){cols[i].type, off, i};
    off += field_size(cols[i].type);
  }
  l->fixed_size = (off + 7) & ~7u;
  return 0;
}

void jgr_ntf_layout_free(jgr_ntf_layout *l) {
  free(l->fields);
  l->fields = NULL;
}

int jgr_ntf_decode(const jgr_ntf_layout *l, const uint8_t *t, uint32_t len, jg_val *row,
                   const char **why) {
  if (JGR_UNLIKELY(len < l->fixed_size)) {
    *why = "tuple shorter than the layout's fixed size";
    return -1;
  }
  for (uint32_t i = 0; i < l->nfields; i++)
    if (JGR_UNLIKELY(jgr_ntf_decode_field(&l->fields[i], t, len, &row[i], why) != 0)) return -1;
  return 0;
}
