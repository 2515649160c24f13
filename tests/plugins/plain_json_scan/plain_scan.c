/* The plain JSON Lines scan driver: an NCA driver that lives outside ncas/runtime, shipped with
 * its plugin (plugin.py registers it as a SourceDriver) and linked with the runtime like a
 * built-in one. Plain C, no simdjson: it reads each file line by line and fills the generated
 * query's columns (JG_QUERY.columns, matched by key) by the contract's JSON Lines rules, then
 * calls the generated row function. It checks less than the built-in scan (strings are not
 * validated as UTF-8): it is an example of an outside driver, not a replacement for that scan.
 *
 * Workers take whole files (file i goes to worker i % threads), so rows of one file stay in order
 * on one stream. When JUMPGATE_TEST_PLAIN_SCAN_LOG names a file, each phase appends a line to it,
 * so a test can tell that this driver, not the built-in scan, ran.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jgrt.h"

#define MARKER_ENV "JUMPGATE_TEST_PLAIN_SCAN_LOG"

enum { V_NULL, V_TRUE, V_FALSE, V_NUMBER, V_STRING, V_OTHER };

typedef struct {
  char *p;         /* the line, NUL-terminated; strings are unescaped in place */
  const char *why; /* set on a syntax error */
} cursor;

static void skip_ws(cursor *c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n') c->p++;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char h = p[i];
    v <<= 4;
    if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
    else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static char *put_utf8(char *w, unsigned cp) {
  if (cp < 0x80) *w++ = (char)cp;
  else if (cp < 0x800) *w++ = (char)(0xC0 | cp >> 6), *w++ = (char)(0x80 | (cp & 0x3F));
  else if (cp < 0x10000)
    *w++ = (char)(0xE0 | cp >> 12), *w++ = (char)(0x80 | (cp >> 6 & 0x3F)), *w++ = (char)(0x80 | (cp & 0x3F));
  else
    *w++ = (char)(0xF0 | cp >> 18), *w++ = (char)(0x80 | (cp >> 12 & 0x3F)),
    *w++ = (char)(0x80 | (cp >> 6 & 0x3F)), *w++ = (char)(0x80 | (cp & 0x3F));
  return w;
}

/* A string after its opening quote, unescaped in place (never longer than its escaped text). */
static int parse_string(cursor *c, jg_str *out) {
  char *r = c->p, *w = c->p;
  out->p = w;
  for (;;) {
    unsigned char ch = (unsigned char)*r;
    if (ch == '"') break;
    if (ch == '\0' || ch < 0x20) return c->why = "unterminated string or control character in a string", -1;
    if (ch != '\\') {
      *w++ = *r++;
      continue;
    }
    char e = r[1];
    r += 2;
    switch (e) {
      case '"': *w++ = '"'; break;
      case '\\': *w++ = '\\'; break;
      case '/': *w++ = '/'; break;
      case 'b': *w++ = '\b'; break;
      case 'f': *w++ = '\f'; break;
      case 'n': *w++ = '\n'; break;
      case 'r': *w++ = '\r'; break;
      case 't': *w++ = '\t'; break;
      case 'u': {
        unsigned cp, lo;
        if (hex4(r, &cp) != 0) return c->why = "invalid \\u escape", -1;
        r += 4;
        if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
          if (r[0] != '\\' || r[1] != 'u' || hex4(r + 2, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
            return c->why = "unpaired surrogate in a \\u escape", -1;
          r += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return c->why = "unpaired surrogate in a \\u escape", -1;
        }
        w = put_utf8(w, cp);
        break;
      }
      default: return c->why = "invalid escape in a string", -1;
    }
  }
  out->n = (uint32_t)(w - out->p);
  c->p = r + 1;
  return 0;
}

/* Skip a nested object or array (values of keys the query does not read). */
static int skip_nested(cursor *c) {
  int depth = 0;
  for (;;) {
    char ch = *c->p++;
    if (ch == '\0') return c->why = "unterminated object or array", -1;
    if (ch == '{' || ch == '[') depth++;
    else if (ch == '}' || ch == ']') {
      if (--depth == 0) return 0;
    } else if (ch == '"') {
      jg_str ignored;
      if (parse_string(c, &ignored) != 0) return -1;
    }
  }
}

static int parse_value(cursor *c, jg_str *text) {
  skip_ws(c);
  char ch = *c->p;
  if (ch == '"') {
    c->p++;
    return parse_string(c, text) == 0 ? V_STRING : -1;
  }
  if (ch == '{' || ch == '[') return skip_nested(c) == 0 ? V_OTHER : -1;
  static const struct { const char *word; int kind; } literals[] = {{"null", V_NULL}, {"true", V_TRUE}, {"false", V_FALSE}};
  for (size_t i = 0; i < 3; i++) {
    size_t n = strlen(literals[i].word);
    if (strncmp(c->p, literals[i].word, n) == 0) {
      c->p += n;
      return literals[i].kind;
    }
  }
  text->p = c->p;
  while (*c->p && strchr("+-0123456789.eE", *c->p)) c->p++;
  text->n = (uint32_t)(c->p - text->p);
  if (text->n == 0) return c->why = "invalid JSON value", -1;
  return V_NUMBER;
}

static const char *type_name(uint8_t t) {
  static const char *names[] = {"boolean", "int32", "int64", "float64", "decimal", "string", "date"};
  return t <= JG_DATE ? names[t] : "?";
}

/* One value into its column by the contract's rules for JSON Lines input (ncas/README.md). */
static int convert(const jg_column *col, int kind, jg_str t, jg_val *v, jgr_error *err) {
  if (kind == V_NULL) return 0; /* stays NULL */
  int ok = 0;
  char buf[64];
  switch (col->type) {
    case JG_BOOLEAN:
      ok = kind == V_TRUE || kind == V_FALSE;
      v->v.i = kind == V_TRUE;
      break;
    case JG_INT32:
    case JG_INT64:
      if (kind == V_NUMBER && t.n < sizeof buf && strspn(t.p, "-0123456789") == t.n) {
        memcpy(buf, t.p, t.n), buf[t.n] = '\0';
        errno = 0;
        char *end;
        long long x = strtoll(buf, &end, 10);
        ok = errno == 0 && *end == '\0' && (col->type == JG_INT64 || (x >= INT32_MIN && x <= INT32_MAX));
        v->v.i = x;
      }
      break;
    case JG_FLOAT64:
      if (kind == V_NUMBER && t.n < sizeof buf) {
        memcpy(buf, t.p, t.n), buf[t.n] = '\0';
        char *end;
        v->v.f = strtod(buf, &end);
        ok = *end == '\0';
      }
      break;
    case JG_DECIMAL:
      ok = (kind == V_NUMBER || kind == V_STRING) &&
           jgr_parse_decimal(t.p, t.n, col->precision, col->scale, &v->v.i) == 0;
      break;
    case JG_STRING:
      ok = kind == V_STRING;
      v->v.s = t;
      break;
    case JG_DATE:
      ok = kind == V_STRING && jgr_parse_date(t.p, t.n, &v->v.i) == 0;
      break;
  }
  if (!ok) {
    jgr_error_set(err, "column \"%.*s\": expected %s", (int)col->name_len, col->name, type_name(col->type));
    return -1;
  }
  v->null = 0;
  return 0;
}

/* One line: a JSON object whose requested keys fill `row`. */
static int parse_line(char *line, jg_val *row, jgr_error *err) {
  cursor c = {line, NULL};
  for (uint32_t i = 0; i < JG_QUERY.ncolumns; i++) row[i].null = 1, row[i].v.i = 0;
  skip_ws(&c);
  if (*c.p++ != '{') return jgr_error_set(err, "line is not a JSON object"), -1;
  skip_ws(&c);
  if (*c.p == '}') return 0;
  for (;;) {
    jg_str key, text;
    skip_ws(&c);
    if (*c.p++ != '"' || parse_string(&c, &key) != 0) goto syntax;
    skip_ws(&c);
    if (*c.p++ != ':') goto syntax;
    int kind = parse_value(&c, &text);
    if (kind < 0) goto syntax;
    for (uint32_t i = 0; i < JG_QUERY.ncolumns; i++) {
      const jg_column *col = &JG_QUERY.columns[i];
      if (col->name_len == key.n && memcmp(col->name, key.p, key.n) == 0 && convert(col, kind, text, &row[i], err) != 0)
        return -1;
    }
    skip_ws(&c);
    char ch = *c.p++;
    if (ch == '}') break;
    if (ch != ',') goto syntax;
  }
  skip_ws(&c);
  if (*c.p == '\0') return 0;
syntax:
  jgr_error_set(err, "invalid JSON: %s", c.why ? c.why : "unexpected character");
  return -1;
}

static int scan_file(jgr_proc *p, const char *path, jg_ctx *ctx, jg_val *row, jgr_error *err) {
  /* never fopen(path): jgr_open_input opens it beneath the data root the control plane sent, and
   * fails (naming the file) when it leads outside */
  int fd = jgr_open_input(p, path, err);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    jgr_error_set(err, "cannot read input file: %s", strerror(errno));
    jgr_error_set_file(err, path, 0);
    close(fd);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int64_t lineno = 0;
  int rc = 0;
  while ((n = getline(&line, &cap, f)) >= 0) {
    lineno++;
    ctx->stats.bytes_in += (uint64_t)n;
    if (line[strspn(line, " \t\r\n")] == '\0') continue; /* blank lines are skipped */
    if (parse_line(line, row, err) != 0) {
      rc = -1;
      break;
    }
    ctx->stats.tuples_in++;
    if (jgr_call_row(ctx, row) != 0) {
      jgr_row_error(ctx, err);
      rc = -1;
      break;
    }
  }
  if (rc == 0 && ferror(f)) jgr_error_set(err, "cannot read input file: %s", strerror(errno)), rc = -1;
  if (rc != 0 && !(ctx->flags & JGR_OUT_FAILED)) jgr_error_set_file(err, path, lineno);
  free(line);
  fclose(f);
  return rc;
}

static int plain_prepare(jgr_proc *p, int phase, jgr_error *err) {
  for (uint32_t i = 0; i < JG_QUERY.ncolumns; i++)
    if (JG_QUERY.columns[i].type > JG_DATE) {
      jgr_error_set(err, "column %u has an unsupported type", i);
      return -1;
    }
  const char *marker = getenv(MARKER_ENV);
  FILE *m = marker && *marker ? fopen(marker, "a") : NULL; /* one short append: lines never interleave */
  if (m) {
    fprintf(m, "plain_scan pid %d phase %d: %zu file(s) on %d thread(s)\n", (int)getpid(), phase, p->nfiles,
            p->threads);
    fclose(m);
  }
  jgr_log("plain JSON Lines scan driver: %zu file(s) on %d thread(s)", p->nfiles, p->threads);
  return 0;
}

static int plain_work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) {
  jg_val *row = calloc(JG_QUERY.ncolumns ? JG_QUERY.ncolumns : 1, sizeof *row);
  if (!row) return jgr_error_set(err, "out of memory"), -1;
  int rc = 0;
  for (size_t i = (size_t)ctx->worker; i < p->nfiles && rc == 0; i += (size_t)p->threads)
    rc = scan_file(p, p->files[i], ctx, row, err);
  free(row);
  return rc == 0 ? jgr_call_finish(ctx, err) : rc;
}

static const jgr_driver plain_driver = {"plain_json_scan", 1, 0, plain_prepare, plain_work};

int main(int argc, char **argv) { return jgr_main(argc, argv, &plain_driver); }
