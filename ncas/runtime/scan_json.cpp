// JSON Lines scan NCA: the process `main` and the driver (docs/nca-process-protocol.md).
//
// Input files are split by byte ranges, cut on line boundaries, across the workers. A worker maps
// its range window by window (scan.chunk_bytes, each cut after its last newline) and parses each
// window in place with simdjson On-Demand `iterate_many`, stage 1 on the worker's own thread. For
// every document it sets all requested columns NULL and walks the object's fields. A key is first
// compared with the key at the same position in the previous line (one 32-byte compare: JSON Lines
// repeat their keys in order); otherwise its raw bytes are looked up in a small hash table of the
// requested columns, and escaped keys are unescaped first. Unrequested fields are skipped
// unconverted; requested values are converted by column type as contract §1 says (common cases
// inline from the raw token, everything else through the general path), then the generated row
// function is called.
//
// Line numbers are never tracked: on an error the file is re-read up to the error's byte offset
// to count newlines.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <simdjson.h>

#if defined(__AVX2__)
#include <immintrin.h>
#else
#include <emmintrin.h>
#endif

#include "jgrt.h"

using namespace simdjson;

namespace {

constexpr uint64_t kDefaultChunk = 16u << 20;  // mapping window: few syscalls, far more than a line
constexpr uint64_t kDefaultBatch = 1u << 20;   // simdjson's stage-1 window: stays in cache

// ------------------------------------------------------------------ requested columns by key

// Open addressing over (length, first byte, last byte): cheap to hash, and column names of one
// schema rarely collide on all three. Raw key bytes are compared; escaped keys take a slow path.
class KeyTable {
 public:
  void build(const jg_column *cols, uint32_t n) {
    cols_ = cols;
    size_t size = 16;
    while (size < 4 * (size_t)n) size *= 2;
    slots_.assign(size, -1);
    mask_ = size - 1;
    for (uint32_t i = 0; i < n; i++) {
      size_t h = hash(cols[i].name, cols[i].name_len);
      while (slots_[h] >= 0) h = (h + 1) & mask_;
      slots_[h] = (int32_t)i;
    }
  }
  int lookup(const char *k, size_t n) const {
    for (size_t h = hash(k, n);; h = (h + 1) & mask_) {
      int32_t c = slots_[h];
      if (c < 0) return -1;
      if (cols_[c].name_len == n && memcmp(cols_[c].name, k, n) == 0) return c;
    }
  }

 private:
  size_t hash(const char *k, size_t n) const {
    size_t x = n ? (n * 0x9E3779B1u) ^ ((uint8_t)k[0] * 0x85EBCA77u) ^ ((uint8_t)k[n - 1] * 0xC2B2AE3Du) : 0;
    return (x ^ (x >> 15)) & mask_;
  }
  const jg_column *cols_ = nullptr;
  std::vector<int32_t> slots_;
  size_t mask_ = 0;
};

// ------------------------------------------------------------------ 32-byte compares

// Bit i set when a[i] == b[i], for 32 bytes. Both may be unaligned; every caller reads inside a
// buffer followed by at least SIMDJSON_PADDING (64) readable bytes.
inline uint32_t eq_mask32(const uint8_t *a, const uint8_t *b) {
#if defined(__AVX2__)
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a));
  __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b));
  return (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y));
#else
  __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(a));
  __m128i y0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b));
  __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(a + 16));
  __m128i y1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 16));
  return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x0, y0)) |
         ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x1, y1)) << 16);
#endif
}

// Bit i set when p[i] is '"' or '\\', for 32 bytes.
inline uint32_t quote_or_backslash32(const uint8_t *p) {
#if defined(__AVX2__)
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
  __m256i m = _mm256_or_si256(_mm256_cmpeq_epi8(x, _mm256_set1_epi8('"')), _mm256_cmpeq_epi8(x, _mm256_set1_epi8('\\')));
  return (uint32_t)_mm256_movemask_epi8(m);
#else
  __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
  __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16));
  __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
  uint32_t lo = (uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x0, q), _mm_cmpeq_epi8(x0, b)));
  uint32_t hi = (uint32_t)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x1, q), _mm_cmpeq_epi8(x1, b)));
  return lo | (hi << 16);
#endif
}

// Index of the first '"' or '\\' at or after p (one is always there: the string's closing quote,
// found by simdjson's stage 1, lies inside the buffer).
inline size_t find_quote_or_backslash(const uint8_t *p) {
  for (size_t at = 0;; at += 32) {
    uint32_t m = quote_or_backslash32(p + at);
    if (m) return at + (size_t)__builtin_ctz(m);
  }
}

// The key at field position j of the previous object, with what it matched: JSON Lines files
// nearly always repeat their keys in the same order, so one 32-byte compare per field usually
// decides. `bytes` holds the raw key and its closing quote (no escapes); `mask` selects them.
struct alignas(32) KeyMemo {
  uint8_t bytes[32];
  uint32_t mask;  // 0 = empty
  int32_t col;    // column index, or -1 for an unrequested key
};
constexpr size_t kMemoFields = 64;  // positions remembered per object

// ------------------------------------------------------------------ input mapping

// Input is mapped rather than read: simdjson parses the page cache's pages in place, without the
// copy a read() makes. A file that shrinks while mapped would kill the process with SIGBUS on the
// first access past its new end; the handler below turns that into an error of the phase by
// mapping zero pages over the rest of the worker's window and flagging it (Worker::shrank).
struct MapGuard {
  const char *lo, *hi;  // the worker thread's current window, whole pages
  bool hit;
};
thread_local MapGuard t_guard;
struct sigaction g_old_sigbus;
uintptr_t g_page;

void on_sigbus(int sig, siginfo_t *si, void *uc) {
  (void)sig, (void)uc;
  const char *a = static_cast<const char *>(si->si_addr);
  if (a >= t_guard.lo && a < t_guard.hi) {
    char *pg = reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(a) & ~(g_page - 1));
    if (mmap(pg, (size_t)(t_guard.hi - pg), PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      t_guard.hit = true;
      return;  // the access is retried and reads zeros
    }
  }
  sigaction(SIGBUS, &g_old_sigbus, nullptr);  // not ours: the retried access meets the old disposition
}

void install_sigbus_handler() {
  static bool done = false;  // prepare() runs on the main thread
  if (done) return;
  done = true;
  g_page = (uintptr_t)sysconf(_SC_PAGESIZE);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_old_sigbus);
}

// [off, off + n) of a file, read-only, its pages mapped up front (MAP_POPULATE: one call instead
// of a page fault per 64 KiB); with `pad`, followed by SIMDJSON_PADDING spaces (written in the
// slack of the file's last page, a private copy then, or in an anonymous page reserved after it).
// data is NULL (errno set) when mmap fails.
struct Mapping {
  char *data = nullptr;
  size_t span = 0;
  Mapping(int fd, uint64_t off, size_t n, bool pad) {
    size_t file_span = (n + g_page - 1) & ~(g_page - 1);
    span = file_span + (pad && file_span - n < SIMDJSON_PADDING ? g_page : 0);
    void *m = MAP_FAILED;
    if (span > file_span) {
      void *r = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (r == MAP_FAILED) return;
      m = mmap(r, n, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd, (off_t)off);
      if (m == MAP_FAILED) {
        int e = errno;
        munmap(r, span);
        errno = e;
        return;
      }
    } else {
      m = mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, (off_t)off);
      if (m == MAP_FAILED) return;
    }
    data = static_cast<char *>(m);
    t_guard = {data, data + file_span, false};
    if (pad) {
      if (n < file_span && mprotect(data + (n & ~(g_page - 1)), g_page, PROT_READ | PROT_WRITE) != 0) {
        int e = errno;
        munmap(data, span);
        data = nullptr;
        errno = e;
        return;
      }
      memset(data + n, ' ', SIMDJSON_PADDING);
    }
  }
  ~Mapping() {
    t_guard.lo = t_guard.hi = nullptr;
    if (data) munmap(data, span);
  }
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;
};

struct Segment {
  std::string path;  // as the `file` command gave it: in errors
  int fd;            // opened once by prepare (jgr_open_input), shared by the workers
  uint64_t begin, end, size;  // byte range before alignment to lines; file size
};

struct ScanState {
  KeyTable keys;
  // One descriptor per file, opened on the main thread before the workers start and never
  // reopened by name: what the workers map is the file that was checked when it was opened.
  // mmap, pread and posix_fadvise take offsets, so the workers share them. Left open until the
  // process exits (one phase per process).
  std::vector<int> fds;
  std::vector<std::vector<Segment>> per_worker;
  uint64_t chunk, batch;
};

const char *type_name(const jg_column &c, char *buf, size_t n) {
  static const char *names[] = {"boolean", "int32", "int64", "float64", "decimal", "string", "date"};
  if (c.type == JG_DECIMAL || c.type == JG_DECIMAL128) {
    snprintf(buf, n, "decimal(%u,%u)", c.precision, c.scale);
    return buf;
  }
  return c.type <= JG_DATE ? names[c.type] : "?";
}

const char *kind_name(ondemand::json_type t) {
  switch (t) {
    case ondemand::json_type::array: return "array";
    case ondemand::json_type::object: return "object";
    case ondemand::json_type::number: return "number";
    case ondemand::json_type::string: return "string";
    case ondemand::json_type::boolean: return "boolean";
    case ondemand::json_type::null: return "null";
  }
  return "?";
}

// ------------------------------------------------------------------ one worker

class Worker {
 public:
  Worker(const ScanState *st, jg_ctx *ctx, jgr_error *err)
      : st_(st), ctx_(ctx), err_(err), row_(JG_QUERY.ncolumns ? JG_QUERY.ncolumns : 1) {
    parser_.threaded = false;  // stage 1 on this worker's core: no hidden second thread
  }
  int scan(const Segment &seg);

 private:
  int process(const char *data, size_t n, uint64_t base);
  bool shrank();
  int document(ondemand::document_reference doc, uint64_t at);
  int match_key(const uint8_t *k, size_t j);
  static constexpr int kEscapedKey = -2;
  bool convert_fast(ondemand::value &v, const jg_column &col, jg_val &out);
  int convert(ondemand::value v, const jg_column &col, jg_val &out);
  int fail_at(uint64_t file_offset);
  int json_error(size_t n, uint64_t base, size_t at, error_code e);
  int mismatch(const jg_column &col, ondemand::json_type t);
  int column_error(const jg_column &col, const char *what);
  uint64_t align(uint64_t pos, uint64_t size);

  const ScanState *st_;
  jg_ctx *ctx_;
  jgr_error *err_;
  ondemand::parser parser_;
  std::vector<jg_val> row_;
  std::vector<KeyMemo> memo_ = std::vector<KeyMemo>(kMemoFields);
  const char *data_ = nullptr;  // what process() parses
  uint64_t bytes_before_ = 0;  // stats.bytes_in before the window process() parses
  int fd_ = -1;  // the segment's file (ScanState::fds: not this worker's to close)
  const Segment *seg_ = nullptr;
};

// First byte of the line that contains byte `pos - 1`'s successor: the line owning `pos`.
// Workers that share a boundary compute the same answer, so every line is read exactly once.
uint64_t Worker::align(uint64_t pos, uint64_t size) {
  if (pos == 0 || pos >= size) return std::min(pos, size);
  char tmp[1 << 16];
  for (uint64_t at = pos - 1; at < size;) {
    ssize_t k = pread(fd_, tmp, sizeof tmp, (off_t)at);
    if (k <= 0) break;
    const char *nl = static_cast<const char *>(memchr(tmp, '\n', (size_t)k));
    if (nl) return at + (uint64_t)(nl - tmp) + 1;
    at += (uint64_t)k;
  }
  return size;
}

int Worker::scan(const Segment &seg) {
  seg_ = &seg;
  fd_ = seg.fd;
  const uint64_t size = seg.size, page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t pos = align(seg.begin, size), end = align(seg.end, size);
  uint64_t window = st_->chunk;
  posix_fadvise(fd_, (off_t)pos, (off_t)(end - pos), POSIX_FADV_SEQUENTIAL);
  while (pos < end) {
    // Window [pos, b), cut after its last newline, parsed in place. simdjson needs the
    // SIMDJSON_PADDING bytes after it readable: the file's next bytes, or spaces after its end.
    uint64_t b = std::min(end, pos + window);
    if (b < end)  // a file not in the page cache: read the next window while this one is parsed
      posix_fadvise(fd_, (off_t)b, (off_t)std::min(window, end - b), POSIX_FADV_WILLNEED);
    uint64_t lo = pos & ~(page - 1), hi = std::min(size, b + SIMDJSON_PADDING);
    uint64_t t0 = jgr_now_ns();
    Mapping map(fd_, lo, (size_t)(hi - lo), hi < b + SIMDJSON_PADDING);
    ctx_->stats.wait_in_ns += jgr_now_ns() - t0;
    if (!map.data) {
      jgr_error_set(err_, "reading input file: %s", strerror(errno));
      jgr_error_set_file(err_, seg.path.c_str(), 0);
      return -1;
    }
    const char *p = map.data + (pos - lo);
    size_t n = (size_t)(b - pos);
    if (b < end) {
      const char *nl = static_cast<const char *>(memrchr(p, '\n', n));
      if (!nl) {  // a line longer than the window
        window *= 2;
        continue;
      }
      n = (size_t)(nl - p) + 1;
    }
    bytes_before_ = ctx_->stats.bytes_in;
    if (process(p, n, pos) != 0) {
      shrank();  // if the file shrank, that is the error to report
      return -1;
    }
    if (shrank()) return -1;
    pos += n;
    ctx_->stats.bytes_in = bytes_before_ + n;
  }
  return 0;
}

// After a window: did the file shrink under its mapping (see on_sigbus)? Then that is the error.
bool Worker::shrank() {
  if (JGR_LIKELY(!t_guard.hit)) return false;
  t_guard.hit = false;
  jgr_error_set(err_, "reading input file: it shrank while being read, or an I/O error occurred");
  jgr_error_set_file(err_, seg_->path.c_str(), 0);
  return true;
}

// Parse data[0, n): complete lines starting at file offset `base`. The SIMDJSON_PADDING bytes
// after n must be readable; their content does not matter, because data[n - 1] ends the last line
// (a newline, or the file's last byte with spaces after it).
int Worker::process(const char *data, size_t n, uint64_t base) {
  data_ = data;
  size_t start = 0, batch = (size_t)st_->batch;
  for (;;) {
    ondemand::document_stream stream;
    error_code e = parser_.iterate_many(reinterpret_cast<const uint8_t *>(data) + start, n - start, batch)
                       .get(stream);
    if (e) return json_error(n, base, start, e);
    bool retry = false;
    for (auto it = stream.begin(); it != stream.end(); ++it) {
      auto doc = *it;
      size_t at = start + it.current_index();
      if (doc.error() == CAPACITY && batch < n - start) {  // a document larger than the window
        start = at;
        batch = std::min(batch * 4, n - start);
        retry = true;
        break;
      }
      if (doc.error()) return json_error(n, base, at, doc.error());
      // the window's bytes count as they are parsed, not when it is done (a window is up to
      // scan.chunk_bytes, 16 MiB): `stats` reads them while the scan runs
      ctx_->stats.bytes_in = bytes_before_ + at;
      if (document(doc.value_unsafe(), base + at) != 0) return -1;
    }
    if (retry) continue;
    size_t cut = stream.truncated_bytes();  // an unterminated document at the end
    if (cut) return json_error(n, base, n - cut, TAPE_ERROR);
    return 0;
  }
}

int Worker::document(ondemand::document_reference doc, uint64_t at) {
  ondemand::object obj;
  error_code e = doc.get_object().get(obj);
  if (e) {
    ondemand::json_type t;
    error_code te = doc.type().get(t);
    if (e == INCORRECT_TYPE && !te)
      jgr_error_set(err_, "line is not a JSON object (got %s)", kind_name(t));
    else
      jgr_error_set(err_, "invalid JSON: %s", error_message(te ? te : e));
    return fail_at(at);
  }
  const uint32_t ncol = JG_QUERY.ncolumns;
  jg_val *row = row_.data();
  for (uint32_t i = 0; i < ncol; i++) row[i].null = 1, row[i].v.i = 0;
  size_t j = 0;  // field position
  for (auto field : obj) {
    ondemand::raw_json_string key;
    if ((e = field.key().get(key))) {
      jgr_error_set(err_, "invalid JSON: %s", error_message(e));
      return fail_at(at);
    }
    const uint8_t *k = reinterpret_cast<const uint8_t *>(key.raw());
    int c;
    if (JGR_LIKELY(j < kMemoFields)) {
      const KeyMemo &m = memo_[j];
      c = (eq_mask32(k, m.bytes) & m.mask) == m.mask && m.mask ? m.col : match_key(k, j);
    } else {
      c = match_key(k, j);
    }
    j++;
    if (JGR_UNLIKELY(c == kEscapedKey)) {  // compare its unescaped bytes
      std::string_view uk;
      if ((e = field.unescaped_key().get(uk))) {
        jgr_error_set(err_, "invalid JSON: %s", error_message(e));
        return fail_at(at);
      }
      c = st_->keys.lookup(uk.data(), uk.size());
    }
    if (c < 0) continue;  // not requested: simdjson skips the value without converting it
    ondemand::value v = field.value();
    if (JGR_UNLIKELY(!convert_fast(v, JG_QUERY.columns[c], row[c])) && convert(v, JG_QUERY.columns[c], row[c]) != 0)
      return fail_at(at);
  }
  ctx_->stats.tuples_in++;
  if (JGR_UNLIKELY(jgr_call_row(ctx_, row) != 0)) {
    jgr_row_error(ctx_, err_);
    return (ctx_->flags & JGR_OUT_FAILED) ? -1 : fail_at(at);
  }
  return 0;
}

// The column of raw key `k` (after its opening quote), remembered for field position j when the
// key is short and has no escapes; kEscapedKey when it has escapes.
int Worker::match_key(const uint8_t *k, size_t j) {
  size_t n = find_quote_or_backslash(k);
  if (k[n] == '\\') return kEscapedKey;
  int c = st_->keys.lookup(reinterpret_cast<const char *>(k), n);
  if (j < kMemoFields && n < 32) {
    KeyMemo &m = memo_[j];
    memcpy(m.bytes, k, n + 1);
    m.mask = n + 1 == 32 ? ~0u : (1u << (n + 1)) - 1;
    m.col = c;
  }
  return c;
}

int Worker::column_error(const jg_column &col, const char *what) {
  jgr_error_set(err_, "column \"%.*s\": %s", (int)col.name_len, col.name, what);
  return -1;
}

int Worker::mismatch(const jg_column &col, ondemand::json_type t) {
  char tb[32], msg[96];
  snprintf(msg, sizeof msg, "expected %s, got %s", type_name(col, tb, sizeof tb), kind_name(t));
  return column_error(col, msg);
}

static std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

inline bool is_json_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {  // = jgr_days_from_civil
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

// The common cases of convert(), without its checks' cost: an integer number for int32/int64,
// a plain decimal number with at most `scale` fraction digits, a string without escapes, a
// well-formed date. Returns false, having changed nothing, for everything else (null, other
// kinds, errors, rounding, escapes): convert() then decides exactly as before. Whatever is
// accepted here gives the value convert() would give.
inline bool Worker::convert_fast(ondemand::value &v, const jg_column &col, jg_val &out) {
  switch (col.type) {
    case JG_INT32:
    case JG_INT64: {
      int64_t x;
      if (v.get_int64().get(x)) return false;
      if (col.type == JG_INT32 && (x < INT32_MIN || x > INT32_MAX)) return false;
      out.v.i = x;
      break;
    }
    case JG_DECIMAL: {
      std::string_view tok = v.raw_json_token();  // a number's text, then maybe whitespace
      const uint8_t *p = reinterpret_cast<const uint8_t *>(tok.data()), *e = p + tok.size();
      bool neg = p < e && *p == '-';
      p += neg;
      if (p == e || (unsigned)*p - '0' > 9) return false;  // not a JSON number (or not one we take)
      uint64_t x = 0;
      int digits = 0, frac = -1;  // frac: digits after the point, -1 = no point
      for (; p < e; p++) {
        unsigned d = (unsigned)*p - '0';
        if (d < 10) {
          x = x * 10 + d;
          digits++;
          frac += frac >= 0;
        } else if (*p == '.' && frac < 0) {
          frac = 0;
        } else {
          break;
        }
      }
      while (p < e && is_json_space(*p)) p++;
      if (p != e || digits == 0 || digits > 18 || frac == 0) return false;
      if (frac < 0) frac = 0;
      if (frac > col.scale) return false;  // needs rounding
      if (x >= (uint64_t)jg_pow10[col.precision - col.scale + frac]) return false;  // does not fit
      x *= (uint64_t)jg_pow10[col.scale - frac];
      out.v.i = neg ? -(int64_t)x : (int64_t)x;
      break;
    }
    case JG_STRING: {
      const uint8_t *p = reinterpret_cast<const uint8_t *>(v.raw_json_token().data());
      if (*p != '"') return false;
      size_t n = find_quote_or_backslash(p + 1);
      if (p[1 + n] != '"') return false;  // escapes: unescaped by simdjson
      out.v.s.p = reinterpret_cast<const char *>(p + 1);  // in the input buffer
      out.v.s.n = (uint32_t)n;
      break;
    }
    case JG_DATE: {
      const uint8_t *p = reinterpret_cast<const uint8_t *>(v.raw_json_token().data());
      if (p[0] != '"' || p[5] != '-' || p[8] != '-' || p[11] != '"') return false;
      unsigned d[8];
      static const int at[8] = {1, 2, 3, 4, 6, 7, 9, 10};
      for (int i = 0; i < 8; i++) {
        d[i] = (unsigned)p[at[i]] - '0';
        if (d[i] > 9) return false;
      }
      unsigned y = d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3], m = d[4] * 10 + d[5], day = d[6] * 10 + d[7];
      static const unsigned dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
      if (m < 1 || m > 12 || day < 1) return false;
      bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
      if (day > dim[m - 1] + (m == 2 && leap)) return false;
      out.v.i = days_from_civil(y, m, day);
      break;
    }
    default:
      return false;
  }
  out.null = 0;
  return true;
}

int Worker::convert(ondemand::value v, const jg_column &col, jg_val &out) {
  ondemand::json_type t;
  error_code e = v.type().get(t);
  char tb[32], msg[128];
  if (e) goto invalid;
  if (t == ondemand::json_type::null) {
    bool is_null = false;
    if ((e = v.is_null().get(is_null)) || !is_null) goto invalid;
    return 0;  // already NULL
  }
  switch (col.type) {
    case JG_BOOLEAN: {
      if (t != ondemand::json_type::boolean) return mismatch(col, t);
      bool b;
      if ((e = v.get_bool().get(b))) goto invalid;
      out.v.i = b;
      break;
    }
    case JG_INT32:
    case JG_INT64: {
      if (t != ondemand::json_type::number) return mismatch(col, t);
      int64_t x;
      e = v.get_int64().get(x);
      if (e == INCORRECT_TYPE || e == NUMBER_OUT_OF_RANGE) {
        bool fractional = v.raw_json_token().find_first_of(".eE") != std::string_view::npos;
        snprintf(msg, sizeof msg, fractional ? "expected %s, got non-integer number" : "number out of range for %s",
                 type_name(col, tb, sizeof tb));
        return column_error(col, msg);
      }
      if (e) goto invalid;
      if (col.type == JG_INT32 && (x < INT32_MIN || x > INT32_MAX)) return column_error(col, "number out of range for int32");
      out.v.i = x;
      break;
    }
    case JG_FLOAT64: {
      if (t != ondemand::json_type::number) return mismatch(col, t);
      if ((e = v.get_double().get(out.v.f))) {
        if (e == NUMBER_ERROR) return column_error(col, "number is invalid or out of range for float64");
        goto invalid;
      }
      break;
    }
    case JG_DECIMAL:
    case JG_DECIMAL128: {
      std::string_view text;
      if (t == ondemand::json_type::number) {
        text = trim(v.raw_json_token());  // the token runs up to the next structural character
      } else if (t == ondemand::json_type::string) {
        if ((e = v.get_string().get(text))) goto invalid;
      } else {
        return mismatch(col, t);
      }
      int r;
      if (col.type == JG_DECIMAL128) {  // 19..38 digits: a 128-bit unscaled value
        __int128 w = 0;
        r = jgr_parse_decimal128(text.data(), text.size(), col.precision, col.scale, &w);
        if (r == 0) out.v.w = w;
      } else {
        r = jgr_parse_decimal(text.data(), text.size(), col.precision, col.scale, &out.v.i);
      }
      if (r != 0) {
        if (r == -1)
          snprintf(msg, sizeof msg, "expected %s, got %s that is not a decimal number", type_name(col, tb, sizeof tb),
                   kind_name(t));
        else
          snprintf(msg, sizeof msg, "value does not fit %s", type_name(col, tb, sizeof tb));
        return column_error(col, msg);
      }
      break;
    }
    case JG_STRING: {
      if (t != ondemand::json_type::string) return mismatch(col, t);
      std::string_view s;  // unescaped into the parser's buffer: valid until the next document
      if ((e = v.get_string().get(s))) goto invalid;
      out.v.s.p = s.data();
      out.v.s.n = (uint32_t)s.size();
      break;
    }
    case JG_DATE: {
      if (t != ondemand::json_type::string) return mismatch(col, t);
      std::string_view s;
      if ((e = v.get_string().get(s))) goto invalid;
      if (jgr_parse_date(s.data(), s.size(), &out.v.i) != 0)
        return column_error(col, "expected date, got string that is not a valid YYYY-MM-DD date");
      break;
    }
    default:
      return column_error(col, "unsupported column type");
  }
  out.null = 0;
  return 0;
invalid:
  snprintf(msg, sizeof msg, "invalid JSON value: %s", error_message(e));
  return column_error(col, msg);
}

int Worker::fail_at(uint64_t file_offset) {
  jgr_error_set_file(err_, seg_->path.c_str(), 1 + jgr_count_newlines(seg_->fd, file_offset));
  return -1;
}

// A structural error reported by simdjson for the document at `at` (or for a whole stage-1
// window that starts there). Find the first line from `at` on that does not parse by itself.
int Worker::json_error(size_t n, uint64_t base, size_t at, error_code e) {
  dom::parser dp;
  size_t line = at;
  while (line > 0 && data_[line - 1] != '\n') line--;
  for (size_t p = line; p < n;) {
    const char *nl = static_cast<const char *>(memchr(data_ + p, '\n', n - p));
    size_t q = nl ? (size_t)(nl - data_) : n;
    std::string_view s(data_ + p, q - p);
    if (trim(s).find_first_not_of(" \t\r") != std::string_view::npos) {
      dom::element el;
      error_code le = dp.parse(s.data(), s.size(), true).get(el);
      if (le) {
        e = le;
        line = p;
        break;
      }
    }
    p = q + 1;
  }
  jgr_error_set(err_, "invalid JSON: %s", error_message(e));
  return fail_at(base + line);
}

// ------------------------------------------------------------------ driver

int scan_prepare(jgr_proc *p, int phase, jgr_error *err) {
  (void)phase;
  auto *st = new ScanState();
  p->driver_state = st;
  for (uint32_t i = 0; i < JG_QUERY.ncolumns; i++) {
    const jg_column &c = JG_QUERY.columns[i];
    if (c.type > JG_DECIMAL128 || (c.type == JG_DECIMAL && (c.precision < 1 || c.precision > 18 || c.scale > c.precision)) ||
        (c.type == JG_DECIMAL128 && (c.precision < 19 || c.precision > 38 || c.scale > c.precision))) {
      jgr_error_set(err, "column %u has an unsupported type", i);
      return -1;
    }
  }
  st->keys.build(JG_QUERY.columns, JG_QUERY.ncolumns);
  install_sigbus_handler();
  if (jgr_param_u64(p, "scan.chunk_bytes", kDefaultChunk, 64, 1ull << 32, &st->chunk, err) ||
      jgr_param_u64(p, "scan.batch_bytes", kDefaultBatch, 64, 1ull << 32, &st->batch, err))
    return -1;
  // Split the concatenated files into equal byte ranges, one per worker.
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (size_t i = 0; i < p->nfiles; i++) {
    int fd = jgr_open_input(p, p->files[i], err);  // beneath the data root, a regular file
    struct stat sb;
    if (fd < 0) return -1;
    st->fds.push_back(fd);
    if (fstat(fd, &sb) != 0) {
      jgr_error_set(err, "cannot open input file %s: %s", p->files[i], strerror(errno));
      jgr_error_set_file(err, p->files[i], 0);
      return -1;
    }
    sizes.push_back((uint64_t)sb.st_size);
    total += (uint64_t)sb.st_size;
  }
  st->per_worker.resize((size_t)p->threads);
  uint64_t file_start = 0;
  for (size_t i = 0; i < p->nfiles; i++) {
    for (int w = 0; w < p->threads; w++) {
      uint64_t lo = (uint64_t)((unsigned __int128)total * (unsigned)w / (unsigned)p->threads);
      uint64_t hi = (uint64_t)((unsigned __int128)total * (unsigned)(w + 1) / (unsigned)p->threads);
      uint64_t b = std::max(lo, file_start), e = std::min(hi, file_start + sizes[i]);
      if (b < e || (sizes[i] == 0 && w == 0))
        st->per_worker[(size_t)w].push_back({p->files[i], st->fds[i], b - file_start, e > b ? e - file_start : b - file_start, sizes[i]});
    }
    file_start += sizes[i];
  }
  return 0;
}

int scan_work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) {
  (void)phase;
  const auto *st = static_cast<const ScanState *>(p->driver_state);
  Worker w(st, ctx, err);
  for (const Segment &seg : st->per_worker[(size_t)ctx->worker])
    if (w.scan(seg) != 0) return -1;
  return jgr_call_finish(ctx, err);  // end of this worker's input (an aggregation emits its groups)
}

const jgr_driver kScanJson = {"scan_json", 1, 0, scan_prepare, scan_work};

}  // namespace

int main(int argc, char **argv) { return jgr_main(argc, argv, &kScanJson); }
