// JSON Lines scan NCA: the process `main` and the driver (docs/nca-process-protocol.md).
//
// Input files are split by byte ranges, cut on line boundaries, across the workers. A worker
// reads its range in large chunks cut at the last newline (the rest is carried to the next chunk)
// and parses each chunk with simdjson On-Demand `iterate_many`. For every document it sets all
// requested columns NULL, walks the object's fields, looks the raw key bytes up in a small hash
// table of the requested columns (other fields are skipped unconverted), converts values by
// column type as contract §1 says, and calls the generated row function.
//
// Line numbers are never tracked: on an error the file is re-read up to the error's byte offset
// to count newlines.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <simdjson.h>

#include "jgrt.h"

using namespace simdjson;

namespace {

constexpr uint64_t kDefaultChunk = 16u << 20;  // few syscalls, and far more than a line
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

struct Segment {
  std::string path;
  uint64_t begin, end, size;  // byte range before alignment to lines; file size
};

struct ScanState {
  KeyTable keys;
  std::vector<std::vector<Segment>> per_worker;
  uint64_t chunk, batch;
};

const char *type_name(const jg_column &c, char *buf, size_t n) {
  static const char *names[] = {"boolean", "int32", "int64", "float64", "decimal", "string", "date"};
  if (c.type == JG_DECIMAL) {
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
    cap_ = st->chunk;
    buf_ = static_cast<char *>(malloc(cap_ + SIMDJSON_PADDING));
    if (!buf_) abort();
  }
  ~Worker() {
    free(buf_);
    if (fd_ >= 0) close(fd_);
  }
  int scan(const Segment &seg);

 private:
  int process(size_t n, uint64_t base);
  int document(ondemand::document_reference doc, uint64_t at);
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
  char *buf_;
  size_t cap_;
  int fd_ = -1;
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
  fd_ = open(seg.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    jgr_error_set(err_, "cannot open input file: %s", strerror(errno));
    jgr_error_set_file(err_, seg.path.c_str(), 0);
    return -1;
  }
  uint64_t pos = align(seg.begin, seg.size), end = align(seg.end, seg.size);
  posix_fadvise(fd_, (off_t)pos, (off_t)(end - pos), POSIX_FADV_SEQUENTIAL);
  uint64_t base = pos;  // file offset of buf_[0]
  size_t have = 0;
  while (pos < end || have > 0) {
    if (have == cap_) {  // one line longer than the chunk: grow
      cap_ *= 2;
      buf_ = static_cast<char *>(realloc(buf_, cap_ + SIMDJSON_PADDING));
      if (!buf_) abort();
    }
    size_t want = (size_t)std::min<uint64_t>(cap_ - have, end - pos);
    uint64_t t0 = jgr_now_ns();
    ssize_t k = want ? pread(fd_, buf_ + have, want, (off_t)pos) : 0;
    ctx_->stats.wait_in_ns += jgr_now_ns() - t0;
    if (k < 0) {
      if (errno == EINTR) continue;
      jgr_error_set(err_, "reading input file: %s", strerror(errno));
      jgr_error_set_file(err_, seg.path.c_str(), 0);
      return -1;
    }
    if (k == 0 && want > 0) end = pos;  // the file shrank under us: take what we have
    have += (size_t)k;
    pos += (uint64_t)k;
    ctx_->stats.bytes_in += (uint64_t)k;
    size_t n = have;
    if (pos < end) {  // cut at the last newline, carry the partial line
      const char *nl = static_cast<const char *>(memrchr(buf_, '\n', have));
      if (!nl) continue;
      n = (size_t)(nl - buf_) + 1;
    }
    if (process(n, base) != 0) return -1;
    memmove(buf_, buf_ + n, have - n);
    have -= n;
    base += n;
  }
  close(fd_);
  fd_ = -1;
  return 0;
}

// Parse buf_[0, n): complete lines starting at file offset `base`.
int Worker::process(size_t n, uint64_t base) {
  // simdjson may read up to SIMDJSON_PADDING bytes past n; make them spaces, not the carried
  // partial line (which could otherwise extend a number at the very end of the input).
  char saved[SIMDJSON_PADDING];
  memcpy(saved, buf_ + n, SIMDJSON_PADDING);
  memset(buf_ + n, ' ', SIMDJSON_PADDING);
  struct Restore {
    char *dst;
    const char *src;
    ~Restore() { memcpy(dst, src, SIMDJSON_PADDING); }
  } restore{buf_ + n, saved};

  size_t start = 0, batch = (size_t)st_->batch;
  for (;;) {
    ondemand::document_stream stream;
    error_code e = parser_.iterate_many(reinterpret_cast<const uint8_t *>(buf_) + start, n - start, batch)
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
  for (auto field : obj) {
    ondemand::raw_json_string key;
    if ((e = field.key().get(key))) {
      jgr_error_set(err_, "invalid JSON: %s", error_message(e));
      return fail_at(at);
    }
    const char *k = key.raw();
    size_t kn = 0;
    while (k[kn] != '"' && k[kn] != '\\') kn++;
    int c;
    if (JGR_LIKELY(k[kn] == '"')) {
      c = st_->keys.lookup(k, kn);
    } else {  // escaped key: compare its unescaped bytes
      std::string_view uk;
      if ((e = field.unescaped_key().get(uk))) {
        jgr_error_set(err_, "invalid JSON: %s", error_message(e));
        return fail_at(at);
      }
      c = st_->keys.lookup(uk.data(), uk.size());
    }
    if (c < 0) continue;  // not requested: simdjson skips the value without converting it
    if (convert(field.value(), JG_QUERY.columns[c], row[c]) != 0) return fail_at(at);
  }
  ctx_->stats.tuples_in++;
  if (JGR_UNLIKELY(jgr_call_row(ctx_, row) != 0)) {
    jgr_row_error(ctx_, err_);
    return (ctx_->flags & JGR_OUT_FAILED) ? -1 : fail_at(at);
  }
  return 0;
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
    case JG_DECIMAL: {
      std::string_view text;
      if (t == ondemand::json_type::number) {
        text = trim(v.raw_json_token());  // the token runs up to the next structural character
      } else if (t == ondemand::json_type::string) {
        if ((e = v.get_string().get(text))) goto invalid;
      } else {
        return mismatch(col, t);
      }
      int r = jgr_parse_decimal(text.data(), text.size(), col.precision, col.scale, &out.v.i);
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
  jgr_error_set_file(err_, seg_->path.c_str(), 1 + jgr_count_newlines(seg_->path.c_str(), file_offset));
  return -1;
}

// A structural error reported by simdjson for the document at `at` (or for a whole stage-1
// window that starts there). Find the first line from `at` on that does not parse by itself.
int Worker::json_error(size_t n, uint64_t base, size_t at, error_code e) {
  dom::parser dp;
  size_t line = at;
  while (line > 0 && buf_[line - 1] != '\n') line--;
  for (size_t p = line; p < n;) {
    const char *nl = static_cast<const char *>(memchr(buf_ + p, '\n', n - p));
    size_t q = nl ? (size_t)(nl - buf_) : n;
    std::string_view s(buf_ + p, q - p);
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
    if (c.type > JG_DATE || (c.type == JG_DECIMAL && (c.precision < 1 || c.precision > 18 || c.scale > c.precision))) {
      jgr_error_set(err, "column %u has an unsupported type", i);
      return -1;
    }
  }
  st->keys.build(JG_QUERY.columns, JG_QUERY.ncolumns);
  if (jgr_param_u64(p, "scan.chunk_bytes", kDefaultChunk, 64, 1ull << 32, &st->chunk, err) ||
      jgr_param_u64(p, "scan.batch_bytes", kDefaultBatch, 64, 1ull << 32, &st->batch, err))
    return -1;
  // Split the concatenated files into equal byte ranges, one per worker.
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (size_t i = 0; i < p->nfiles; i++) {
    struct stat sb;
    if (stat(p->files[i], &sb) != 0 || !S_ISREG(sb.st_mode)) {
      jgr_error_set(err, "cannot open input file: %s", errno ? strerror(errno) : "not a regular file");
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
        st->per_worker[(size_t)w].push_back({p->files[i], b - file_start, e > b ? e - file_start : b - file_start, sizes[i]});
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
  return 0;
}

const jgr_driver kScanJson = {"scan_json", 1, 0, scan_prepare, scan_work};

}  // namespace

int main(int argc, char **argv) { return jgr_main(argc, argv, &kScanJson); }
