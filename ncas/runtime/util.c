/* Small helpers shared by the runtime: errors, time, JSON escaping, percent-decoding, sends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "jgrt.h"

void jgr_error_vset(jgr_error *e, const char *fmt, va_list ap) {
  vsnprintf(e->message, sizeof e->message, fmt, ap);
}

void jgr_error_set(jgr_error *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jgr_error_vset(e, fmt, ap);
  va_end(ap);
}

void jgr_error_set_file(jgr_error *e, const char *path, int64_t record) {
  free(e->file);
  e->file = path ? strdup(path) : NULL;
  e->record = record;
}

void jgr_error_clear(jgr_error *e) {
  free(e->file);
  memset(e, 0, sizeof *e);
}

uint64_t jgr_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Length of the valid UTF-8 sequence starting at s (1..4), or 0 when it is invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  unsigned cp = c & (0x7F >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

size_t jgr_json_escape(char *out, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    if (c == '"' || c == '\\') {
      out[o++] = '\\';
      out[o++] = (char)c;
      i++;
    } else if (c < 0x20) {
      static const char hex[] = "0123456789abcdef";
      if (c == '\n') out[o++] = '\\', out[o++] = 'n';
      else if (c == '\t') out[o++] = '\\', out[o++] = 't';
      else if (c == '\r') out[o++] = '\\', out[o++] = 'r';
      else {
        memcpy(out + o, "\\u00", 4);
        o += 4;
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
      }
      i++;
    } else if (c < 0x80) {
      out[o++] = (char)c;
      i++;
    } else {
      size_t len = utf8_seq(u + i, n - i);
      if (len == 0) { /* keep the event valid JSON: U+FFFD for each bad byte */
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i++;
      } else {
        memcpy(out + o, u + i, len);
        o += len;
        i += len;
      }
    }
  }
  out[o] = 0;
  return o;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int jgr_percent_decode(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++) {
    if (*r == '%') {
      int hi = hexval((unsigned char)r[1]);
      int lo = hi < 0 ? -1 : hexval((unsigned char)r[2]);
      if (lo < 0) return -1;
      *w++ = (char)(hi * 16 + lo);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = 0;
  return 0;
}

int jgr_send_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

int64_t jgr_count_newlines(int fd, uint64_t offset) {
  /* the descriptor the scan read, not the path again: the path may name another file by now */
  static const size_t bufsz = 1 << 20;
  char *buf = malloc(bufsz);
  int64_t lines = 0;
  uint64_t pos = 0;
  while (buf && pos < offset) {
    size_t want = offset - pos < bufsz ? (size_t)(offset - pos) : bufsz;
    ssize_t k = pread(fd, buf, want, (off_t)pos);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    for (const char *q = buf, *end = buf + k; (q = memchr(q, '\n', (size_t)(end - q))); q++) lines++;
    pos += (uint64_t)k;
  }
  free(buf);
  return lines;
}

const char *jgr_param(const jgr_proc *p, const char *key) {
  for (size_t i = p->nparams; i-- > 0;)
    if (strcmp(p->param_keys[i], key) == 0) return p->param_vals[i];
  return NULL;
}

int jgr_param_u64(const jgr_proc *p, const char *key, uint64_t dflt, uint64_t min, uint64_t max,
                  uint64_t *out, jgr_error *err) {
  const char *v = jgr_param(p, key);
  if (!v) {
    *out = dflt;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x < min || x > max) {
    jgr_error_set(err, "param %s: expected an integer in [%llu, %llu]", key,
                  (unsigned long long)min, (unsigned long long)max);
    return -1;
  }
  *out = x;
  return 0;
}
