// Columnar scan driver shared by the ORC and Parquet scan NCAs (see scan_arrow.h).
//
// prepare (main thread): open every file, match the query's columns (JG_QUERY.columns) to the
// file's fields by name and check their Arrow types against the schema types, list the units
// (stripes / row groups), and drop the units whose statistics rule out a `prune.N` predicate
// (docs/nca-process-protocol.md). work (each worker): take the next unit from a shared counter,
// read only the needed fields as Arrow batches; narrow each batch with the same predicates,
// evaluated on the Arrow arrays (the row prefilter); then for every tile of up to 1024 remaining
// rows fill a row-major jg_val matrix column by column — one tight loop per column, the Arrow type
// decided once per column and tile, strings pointing into Arrow's buffers — and call the row
// function per row (or the query's batch function once per tile). A fixed-width column may also
// arrive as an int32 dictionary array (Parquet's dictionary-encoded pages): the prefilter then
// tests each dictionary entry once per dictionary, and the fill looks values up by index.
//
// Errors name the file; a bad value or a failing row also gets its 1-based row number in the file.
#include "jg_hash.h"
#include "jg_rfilter.h"
#include "jg_snappy.h"
#include "scan_arrow.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/memory_pool.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>

namespace jgscan {
namespace {

using arrow::Status;

// ------------------------------------------------------------------ memory

}  // namespace

std::shared_ptr<arrow::ArrayData> late_placeholder(int64_t n) {
  return arrow::ArrayData::Make(arrow::null(), n, {nullptr}, n);
}

// jemalloc when the wheel has it (it keeps freed pages for a while), unless the user chose a pool
// with ARROW_DEFAULT_MEMORY_POOL. With the default mimalloc, the decompression buffers that every
// row group's column readers allocate anew came back as fresh pages each time, and zeroing those
// cost up to a sixth of a Parquet scan.
arrow::MemoryPool *pool() {
  static arrow::MemoryPool *p = [] {
    arrow::MemoryPool *j = nullptr;
    if (!getenv("ARROW_DEFAULT_MEMORY_POOL") && arrow::jemalloc_memory_pool(&j).ok() && j) return j;
    return arrow::default_memory_pool();
  }();
  return p;
}

namespace {

// ------------------------------------------------------------------ input accounting

// Forwards to a file and adds the bytes read and the time spent reading to a worker's counters
// (bytes_in, wait_in_ns); `stats` may be NULL (files opened by prepare()).
class TimedFile final : public arrow::io::RandomAccessFile {
 public:
  TimedFile(std::shared_ptr<arrow::io::RandomAccessFile> f, jgr_stats *s) : f_(std::move(f)), s_(s) {}
  Status Close() override { return f_->Close(); }
  bool closed() const override { return f_->closed(); }
  arrow::Result<int64_t> Tell() const override { return f_->Tell(); }
  Status Seek(int64_t pos) override { return f_->Seek(pos); }
  arrow::Result<int64_t> GetSize() override { return f_->GetSize(); }
  arrow::Result<int64_t> Read(int64_t n, void *out) override {
    return timed([&] { return f_->Read(n, out); });
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(int64_t n) override {
    return timed([&] { return f_->Read(n); });
  }
  arrow::Result<int64_t> ReadAt(int64_t pos, int64_t n, void *out) override {
    return timed([&] { return f_->ReadAt(pos, n, out); });
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(int64_t pos, int64_t n) override {
    return timed([&] { return f_->ReadAt(pos, n); });
  }

 private:
  template <typename F>
  auto timed(F &&f) -> decltype(f()) {
    uint64_t t0 = jgr_now_ns();
    auto r = f();
    if (s_ && r.ok()) {
      s_->wait_in_ns += jgr_now_ns() - t0;
      s_->bytes_in += (uint64_t)size_of(*r);
    }
    return r;
  }
  static int64_t size_of(int64_t n) { return n; }
  static int64_t size_of(const std::shared_ptr<arrow::Buffer> &b) { return b ? b->size() : 0; }
  std::shared_ptr<arrow::io::RandomAccessFile> f_;
  jgr_stats *s_;
};

// Files are memory-mapped: a read is then a slice of the mapping, not a copy through the kernel
// into a fresh buffer, and Parquet's decompressor reads the page cache directly (about a tenth of
// a Q6 scan's time went to the copies and to faulting in the buffers): the default for Parquet
// (Format::map_files). `scan.mmap 0` reads with pread instead, e.g. for files that may shrink
// while read (a mapping then faults); `scan.mmap 1` maps ORC files too.
bool g_mmap = true;

// One input file: opened once, by prepare on the main thread, with jgr_open_input (beneath the
// data root), and never again by name, so every reader reads the file that was checked when it
// was opened (Arrow's own Open(path) would resolve the name anew for each worker).
struct InputFile {
  int fd = -1;                       // left open until the process exits (one phase per process)
  std::shared_ptr<arrow::Buffer> map;  // the whole file, mapped once and shared by the workers' readers
};

// A file's mapping as an Arrow buffer: readers get slices of it (zero-copy), and it is unmapped
// when the last slice is gone.
class Mapping final : public arrow::Buffer {
 public:
  Mapping(const uint8_t *data, int64_t size) : arrow::Buffer(data, size) {}
  ~Mapping() override { munmap(const_cast<uint8_t *>(data_), (size_t)size_); }
};

// Map `fd` whole, or NULL when it cannot be (some special file systems; an empty file, which the
// reader then rejects as it always did): such a file is read with pread.
std::shared_ptr<arrow::Buffer> map_file(int fd) {
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size <= 0) return nullptr;
  void *m = mmap(nullptr, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return nullptr;
  return std::make_shared<Mapping>(static_cast<const uint8_t *>(m), (int64_t)sb.st_size);
}

arrow::Result<std::unique_ptr<ColumnarFile>> open_file(const Format *fmt, const std::string &path, const InputFile &in_file,
                                                       jgr_stats *s) {
  std::shared_ptr<arrow::io::RandomAccessFile> f;
  if (in_file.map) {
    f = std::make_shared<arrow::io::BufferReader>(in_file.map);
  } else {
    // A descriptor of its own for each reader (ReadableFile closes the one it is given). The
    // duplicates share one file offset, which does not matter: the readers read with ReadAt, i.e.
    // pread.
    int fd = fcntl(in_file.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return Status::IOError("cannot duplicate the file's descriptor: ", strerror(errno));
    ARROW_ASSIGN_OR_RAISE(f, arrow::io::ReadableFile::Open(fd, pool()));
  }
  std::shared_ptr<arrow::io::RandomAccessFile> in = std::make_shared<TimedFile>(std::move(f), s);
  arrow::Result<std::unique_ptr<ColumnarFile>> r;
  Status st = guard([&] {
    r = fmt->open(path, in);
    return r.status();
  });
  if (!st.ok()) return st;
  return r;
}

// ------------------------------------------------------------------ types

const char *jg_type_name(const jg_column &c, char *buf, size_t n) {
  static const char *names[] = {"boolean", "int32", "int64", "float64", "decimal", "string", "date"};
  if (c.type == JG_DECIMAL || c.type == JG_DECIMAL128) {
    snprintf(buf, n, "decimal(%u,%u)", c.precision, c.scale);
    return buf;
  }
  return c.type <= JG_DATE ? names[c.type] : "?";
}

std::string col_name(const jg_column &c) { return std::string(c.name, c.name_len); }

// How one file field becomes one schema column (chosen once per file, from the Arrow type).
enum class Conv : uint8_t {
  kBool, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kF32, kF64,
  kDec32, kDec64, kDec128, kStr32, kStr64, kDict, kDate32
};

struct ColumnPlan {
  int field = -1;   // top-level field of the file
  int pos = -1;     // column of the batches read (fields are read in ascending order)
  Conv conv = Conv::kI64;
  int dec_scale = 0;      // decimals: the file's scale
  bool dec_check = false; // decimals: values must be rescaled/checked (else copied)
};

bool is_string_like(arrow::Type::type t) {
  return t == arrow::Type::STRING || t == arrow::Type::BINARY || t == arrow::Type::LARGE_STRING ||
         t == arrow::Type::LARGE_BINARY;
}

bool is_index_type(arrow::Type::type t) {
  return t == arrow::Type::INT8 || t == arrow::Type::UINT8 || t == arrow::Type::INT16 || t == arrow::Type::UINT16 ||
         t == arrow::Type::INT32 || t == arrow::Type::UINT32 || t == arrow::Type::INT64;
}

// Empty when file type `t` can be read as schema column `c`; else why not.
std::string plan_column(const arrow::DataType &t, const jg_column &c, ColumnPlan *p) {
  using T = arrow::Type;
  char tb[40];
  const char *want = jg_type_name(c, tb, sizeof tb);
  std::string got = t.ToString();
  std::string reason;
  switch (c.type) {
    case JG_BOOLEAN:
      if (t.id() == T::BOOL) return p->conv = Conv::kBool, "";
      break;
    case JG_INT32:
    case JG_INT64: {
      bool wide = c.type == JG_INT64;
      switch (t.id()) {
        case T::INT8: return p->conv = Conv::kI8, "";
        case T::INT16: return p->conv = Conv::kI16, "";
        case T::INT32: return p->conv = Conv::kI32, "";
        case T::UINT8: return p->conv = Conv::kU8, "";
        case T::UINT16: return p->conv = Conv::kU16, "";
        case T::INT64:
          if (wide) return p->conv = Conv::kI64, "";
          reason = " (narrowing is not allowed)";
          break;
        case T::UINT32:
          if (wide) return p->conv = Conv::kU32, "";
          reason = " (narrowing is not allowed)";
          break;
        case T::UINT64: reason = " (narrowing is not allowed)"; break;
        default: break;
      }
      break;
    }
    case JG_FLOAT64:
      if (t.id() == T::DOUBLE) return p->conv = Conv::kF64, "";
      if (t.id() == T::FLOAT) return p->conv = Conv::kF32, "";
      break;
    case JG_DECIMAL:
    case JG_DECIMAL128:  // wide columns (19..38 digits) take the same files, into jg_val.v.w
      if (t.id() == T::DECIMAL32 || t.id() == T::DECIMAL64 || t.id() == T::DECIMAL128) {
        const auto &d = static_cast<const arrow::DecimalType &>(t);
        p->conv = t.id() == T::DECIMAL32 ? Conv::kDec32 : t.id() == T::DECIMAL64 ? Conv::kDec64 : Conv::kDec128;
        p->dec_scale = d.scale();
        // copied as is when every value of the file type fits the schema type unchanged
        p->dec_check = !(d.scale() == c.scale && d.precision() <= c.precision);
        return "";
      }
      if (t.id() == T::DECIMAL256) reason = " (more than 38 digits)";
      break;
    case JG_STRING:
      if (t.id() == T::STRING || t.id() == T::BINARY) return p->conv = Conv::kStr32, "";
      if (t.id() == T::LARGE_STRING || t.id() == T::LARGE_BINARY) return p->conv = Conv::kStr64, "";
      if (t.id() == T::DICTIONARY) {
        const auto &d = static_cast<const arrow::DictionaryType &>(t);
        if (is_string_like(d.value_type()->id()) && is_index_type(d.index_type()->id()))
          return p->conv = Conv::kDict, "";
      }
      break;
    case JG_DATE:
      if (t.id() == T::DATE32) return p->conv = Conv::kDate32, "";
      break;
    default:
      return "column \"" + col_name(c) + "\" has an unsupported schema type";
  }
  if (reason.empty() && (t.id() == T::TIMESTAMP || t.id() == T::DATE64 || t.id() == T::TIME32 ||
                         t.id() == T::TIME64))
    reason = " (not a contract type: read it as another column type upstream)";
  return "column \"" + col_name(c) + "\" is " + got + " in the file, but the schema says " + want + reason;
}

// ------------------------------------------------------------------ decimals

const __int128 *pow10_128() {
  static __int128 t[39];
  static bool init = [] {
    t[0] = 1;
    for (int i = 1; i < 39; i++) t[i] = t[i - 1] * 10;
    return true;
  }();
  (void)init;
  return t;
}

std::string dec_text(__int128 v, int scale) {
  bool neg = v < 0;
  unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
  char buf[64];
  int n = 0;
  do {
    buf[n++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u || n <= scale);
  std::string s = neg ? "-" : "";
  for (int i = n - 1; i >= 0; i--) {
    s += buf[i];
    if (i == scale && scale > 0) s += '.';
  }
  return s;
}

// v at scale `from` to the column's scale, exactly; false when it does not fit (precision <= 38,
// so the result fits 128 bits; narrow columns take it as int64).
inline bool dec_convert(__int128 v, int from, const jg_column &c, __int128 *out) {
  const __int128 *p10 = pow10_128();
  int to = c.scale;
  if (to >= from) {
    int up = to - from;
    __int128 lim = p10[c.precision - up];  // |v| * 10^up < 10^precision
    if (v >= lim || v <= -lim) return false;
    v *= p10[up];
  } else {
    __int128 d = p10[from - to];
    if (v % d != 0) return false;
    v /= d;
    if (v >= p10[c.precision] || v <= -p10[c.precision]) return false;
  }
  *out = v;
  return true;
}

// ------------------------------------------------------------------ prune predicates

struct Lit {
  int64_t i = 0;
  double f = 0;
  std::string s;
};

struct Pred {
  uint32_t col = 0;  // JG_QUERY column
  enum Op : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kIsNull, kNotNull } op = kEq;
  std::vector<Lit> vals;
  std::string text;  // for messages
};

bool parse_op(const std::string &s, Pred::Op *op) {
  static const struct { const char *t; Pred::Op op; } ops[] = {
      {"=", Pred::kEq}, {"<>", Pred::kNe}, {"<", Pred::kLt}, {"<=", Pred::kLe}, {">", Pred::kGt},
      {">=", Pred::kGe}, {"in", Pred::kIn}, {"isnull", Pred::kIsNull}, {"notnull", Pred::kNotNull}};
  for (const auto &o : ops)
    if (s == o.t) return *op = o.op, true;
  return false;
}

bool parse_lit(const std::string &s, const jg_column &c, Lit *out) {
  if (s.empty() && c.type != JG_STRING) return false;
  char *end = nullptr;
  switch (c.type) {
    case JG_FLOAT64:
      out->f = strtod(s.c_str(), &end);
      return *end == 0 && !std::isnan(out->f);
    case JG_STRING:
      out->s = s;
      return true;
    default:
      errno = 0;
      out->i = strtoll(s.c_str(), &end, 10);
      return *end == 0 && errno == 0;
  }
}

// `param prune.N` value: "COLUMN OP [VALUE ...]", each token percent-encoded (so the value of one
// param carries any bytes). Returns empty on success; sets `skip` for a column the query does not
// read (nothing to prune on).
std::string parse_pred(const char *value, Pred *p, bool *skip) {
  std::vector<std::string> tok;
  std::string v(value);
  for (size_t at = 0;;) {
    size_t sp = v.find(' ', at);
    std::string t = v.substr(at, sp == std::string::npos ? std::string::npos : sp - at);
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back(0);
    if (jgr_percent_decode(buf.data()) != 0) return "malformed percent-encoding";
    tok.emplace_back(buf.data());
    if (sp == std::string::npos) break;
    at = sp + 1;
  }
  if (tok.size() < 2 || !parse_op(tok[1], &p->op)) return "expected COLUMN OP [VALUE ...]";
  p->text = v;
  *skip = true;
  for (uint32_t c = 0; c < JG_QUERY.ncolumns; c++)
    if (col_name(JG_QUERY.columns[c]) == tok[0]) p->col = c, *skip = false;
  if (*skip) return "";
  size_t nvals = tok.size() - 2;
  bool unary = p->op == Pred::kIsNull || p->op == Pred::kNotNull;
  if (unary ? nvals != 0 : p->op == Pred::kIn ? nvals < 1 : nvals != 1) return "wrong number of values";
  for (size_t i = 2; i < tok.size(); i++) {
    Lit l;
    if (!parse_lit(tok[i], JG_QUERY.columns[p->col], &l)) return "bad value for the column's type";
    p->vals.push_back(std::move(l));
  }
  return "";
}

// Bounds of one column in one unit in the schema column's representation.
struct Bounds {
  bool ok = false;
  int64_t imin = 0, imax = 0;
  double fmin = 0, fmax = 0;
  std::string smin, smax;
};

// floor (up = false) or ceiling of v / 10^k
__int128 div_round(__int128 v, int k, bool up) {
  __int128 d = pow10_128()[k], q = v / d, r = v % d;
  if (r != 0 && ((r > 0) == up)) q += up ? 1 : -1;
  return q;
}

Bounds bounds_for(const RawStats &rs, const jg_column &c) {
  Bounds b;
  switch (c.type) {
    case JG_BOOLEAN:
    case JG_INT32:
    case JG_INT64:
    case JG_DATE:
      if (rs.kind == RawStats::kInt) b.ok = true, b.imin = rs.imin, b.imax = rs.imax;
      break;
    case JG_FLOAT64:
      if (rs.kind == RawStats::kDouble && !std::isnan(rs.fmin) && !std::isnan(rs.fmax))
        b.ok = true, b.fmin = rs.fmin, b.fmax = rs.fmax;
      break;
    case JG_STRING:
      if (rs.kind == RawStats::kBytes) b.ok = true, b.smin = rs.smin, b.smax = rs.smax;
      break;
    case JG_DECIMAL:
      if (rs.kind == RawStats::kDecimal && rs.dscale >= 0 && rs.dscale <= 38) {
        __int128 lo = rs.dmin, hi = rs.dmax;
        int k = (int)c.scale - rs.dscale;
        if (k >= 0) {
          __int128 lim = pow10_128()[38 - k];  // stay inside 10^38 before scaling
          if (lo >= lim || lo <= -lim || hi >= lim || hi <= -lim) break;
          lo *= pow10_128()[k], hi *= pow10_128()[k];
        } else {
          lo = div_round(lo, -k, false), hi = div_round(hi, -k, true);
        }
        if (lo < INT64_MIN || hi > INT64_MAX) break;  // wider than any value of the column
        b.ok = true, b.imin = (int64_t)lo, b.imax = (int64_t)hi;
      }
      break;
    default:
      break;
  }
  return b;
}

// Three-way compare of a literal with a bound, by the column's representation.
int cmp(const Lit &l, const Bounds &b, bool max, const jg_column &c) {
  if (c.type == JG_FLOAT64) {
    double x = max ? b.fmax : b.fmin;
    return l.f < x ? -1 : l.f > x ? 1 : 0;
  }
  if (c.type == JG_STRING) {
    int r = l.s.compare(max ? b.smax : b.smin);
    return r < 0 ? -1 : r > 0 ? 1 : 0;
  }
  int64_t x = max ? b.imax : b.imin;
  return l.i < x ? -1 : l.i > x ? 1 : 0;
}

// Can predicate `p` be TRUE for some row of a unit with these statistics?
bool may_match(const Pred &p, const RawStats &rs) {
  const jg_column &c = JG_QUERY.columns[p.col];
  if (p.op == Pred::kIsNull) return rs.has_null != Tri::kNo;
  if (p.op == Pred::kNotNull) return rs.has_value != Tri::kNo;
  if (rs.has_value == Tri::kNo) return false;  // only NULLs: no comparison is TRUE
  Bounds b = bounds_for(rs, c);
  if (!b.ok) return true;
  auto in_range = [&](const Lit &l) { return cmp(l, b, false, c) >= 0 && cmp(l, b, true, c) <= 0; };
  switch (p.op) {
    case Pred::kEq: return in_range(p.vals[0]);
    case Pred::kIn:
      for (const Lit &l : p.vals)
        if (in_range(l)) return true;
      return false;
    case Pred::kNe:  // FALSE only when every value equals the literal (not for floats: NaN <> x)
      return c.type == JG_FLOAT64 || !(cmp(p.vals[0], b, false, c) == 0 && cmp(p.vals[0], b, true, c) == 0);
    case Pred::kLt: return cmp(p.vals[0], b, false, c) > 0;   // min < lit
    case Pred::kLe: return cmp(p.vals[0], b, false, c) >= 0;  // min <= lit
    case Pred::kGt: return cmp(p.vals[0], b, true, c) < 0;    // max > lit
    case Pred::kGe: return cmp(p.vals[0], b, true, c) <= 0;   // max >= lit
    default: return true;
  }
}

// ------------------------------------------------------------------ conversion of one tile

// Rows of a batch a tile takes: a contiguous span, or picked by a selection vector.
struct Span {
  int64_t start;
  int64_t operator[](int k) const { return start + k; }
};
struct Pick {
  const uint32_t *sel;
  int64_t operator[](int k) const { return sel[k]; }
};

inline void set_null(jg_val &o) {
  o.v.s.p = nullptr;
  o.v.s.n = 0;
  o.null = 1;
}

// Calls set(out, index) for the non-NULL rows rows[0..n) of array `a` (index counts from the
// array's logical start), marks the others NULL. One loop per column; no per-value dispatch.
template <typename R, typename F>
inline void fill(const arrow::ArrayData &a, R rows, int n, jg_val *out, size_t stride, F &&set) {
  if (!a.MayHaveNulls()) {
    for (int k = 0; k < n; k++) {
      jg_val &o = out[(size_t)k * stride];
      set(o, rows[k]);
      o.null = 0;
    }
    return;
  }
  const uint8_t *valid = a.buffers[0]->data();
  for (int k = 0; k < n; k++) {
    jg_val &o = out[(size_t)k * stride];
    int64_t i = rows[k];
    if (arrow::bit_util::GetBit(valid, a.offset + i)) {
      set(o, i);
      o.null = 0;
    } else {
      set_null(o);
    }
  }
}

// Where a row's value is: at its own index (M = Same), or at its index in the dictionary of a
// fixed-width dictionary array (M = ByIndex; Parquet's dictionary-encoded pages, see
// scan_parquet.cpp).
struct Same {
  int64_t operator()(int64_t i) const { return i; }
};
struct ByIndex {
  const int32_t *idx;
  int64_t operator()(int64_t i) const { return idx[i]; }
};

template <typename T, typename R, typename M>
inline void fill_int(const arrow::ArrayData &a, const arrow::ArrayData &vals, M m, R rows, int n, jg_val *out,
                     size_t stride) {
  const T *v = vals.GetValues<T>(1);
  fill(a, rows, n, out, stride, [v, m](jg_val &o, int64_t i) { o.v.i = (int64_t)v[m(i)]; });
}

template <typename O, typename R>
inline void fill_str(const arrow::ArrayData &a, R rows, int n, jg_val *out, size_t stride) {
  const O *off = a.GetValues<O>(1);
  const char *data = a.buffers[2] ? reinterpret_cast<const char *>(a.buffers[2]->data()) : "";
  fill(a, rows, n, out, stride, [off, data](jg_val &o, int64_t i) {
    o.v.s.p = data + off[i];
    o.v.s.n = (uint32_t)(off[i + 1] - off[i]);
  });
}

// Dictionary-encoded strings: decode through the indices; a NULL index or a NULL dictionary
// entry is NULL.
template <typename I, typename O, typename R>
inline void fill_dict(const arrow::ArrayData &a, R rows, int n, jg_val *out, size_t stride) {
  const I *idx = a.GetValues<I>(1);
  const arrow::ArrayData &d = *a.dictionary;
  const O *off = d.GetValues<O>(1);
  const char *data = d.buffers[2] ? reinterpret_cast<const char *>(d.buffers[2]->data()) : "";
  fill(a, rows, n, out, stride, [idx, off, data](jg_val &o, int64_t i) {
    int64_t k = (int64_t)idx[i];
    o.v.s.p = data + off[k];
    o.v.s.n = (uint32_t)(off[k + 1] - off[k]);
  });
  if (d.MayHaveNulls()) {
    const uint8_t *dv = d.buffers[0]->data();
    for (int k = 0; k < n; k++) {
      jg_val &o = out[(size_t)k * stride];
      if (!o.null && !arrow::bit_util::GetBit(dv, d.offset + (int64_t)idx[rows[k]])) set_null(o);
    }
  }
}

bool large_offsets(const arrow::ArrayData &a) {
  arrow::Type::type t = a.type->id();
  return t == arrow::Type::LARGE_STRING || t == arrow::Type::LARGE_BINARY;
}

template <typename I, typename R>
inline void fill_dict_by_value(const arrow::ArrayData &a, R rows, int n, jg_val *out, size_t stride) {
  if (large_offsets(*a.dictionary))
    fill_dict<I, int64_t>(a, rows, n, out, stride);
  else
    fill_dict<I, int32_t>(a, rows, n, out, stride);
}

// Calls f(index type tag) for the dictionary's index type.
template <typename F>
inline void with_index_type(const arrow::ArrayData &a, F &&f) {
  switch (static_cast<const arrow::DictionaryType &>(*a.type).index_type()->id()) {
    case arrow::Type::INT8: f(int8_t{}); break;
    case arrow::Type::UINT8: f(uint8_t{}); break;
    case arrow::Type::INT16: f(int16_t{}); break;
    case arrow::Type::UINT16: f(uint16_t{}); break;
    case arrow::Type::INT32: f(int32_t{}); break;
    case arrow::Type::UINT32: f(uint32_t{}); break;
    default: f(int64_t{}); break;
  }
}

// Decimal values at the file's scale into the column's scale; returns the first tile row that
// does not fit, or -1.
template <typename R, typename F>
inline int fill_dec(const arrow::ArrayData &a, const ColumnPlan &pl, const jg_column &c, R rows, int n,
                    jg_val *out, size_t stride, F &&get) {
  const bool wide = c.type == JG_DECIMAL128;  // 19..38 digits: the 128-bit member
  if (!pl.dec_check) {
    if (wide)
      fill(a, rows, n, out, stride, [&get](jg_val &o, int64_t i) { o.v.w = get(i); });
    else
      fill(a, rows, n, out, stride, [&get](jg_val &o, int64_t i) { o.v.i = (int64_t)get(i); });
    return -1;
  }
  int bad = -1, k = 0;
  fill(a, rows, n, out, stride, [&](jg_val &o, int64_t i) {
    __int128 v = 0;
    if (!dec_convert(get(i), pl.dec_scale, c, &v) && bad < 0) bad = k;
    if (wide) o.v.w = v;
    else o.v.i = (int64_t)v;
    k++;  // counts only non-NULL rows: recomputed below when it matters
  });
  if (bad >= 0) {  // the tile row of the first value that does not fit
    for (int j = 0; j < n; j++) {
      __int128 v;
      if (!out[(size_t)j * stride].null && !dec_convert(get(rows[j]), pl.dec_scale, c, &v)) return j;
    }
  }
  return -1;
}

// Decimal unscaled values of array `a` (decimal32/64/128), by logical index.
struct Dec32Get {
  const int32_t *v;
  __int128 operator()(int64_t i) const { return v[i]; }
};
struct Dec64Get {
  const int64_t *v;
  __int128 operator()(int64_t i) const { return v[i]; }
};
struct Dec128Get {  // two little-endian 64-bit words per value
  const uint64_t *v;
  __int128 operator()(int64_t i) const { return (__int128)(((unsigned __int128)v[2 * i + 1] << 64) | v[2 * i]); }
};
Dec128Get dec128_of(const arrow::ArrayData &a) {
  return {reinterpret_cast<const uint64_t *>(a.buffers[1]->data()) + 2 * a.offset};
}

// An int32-indexed dictionary array of fixed-width values without NULL entries: what the
// Parquet reader hands out for dictionary-encoded numeric pages.
bool fixed_dict(const arrow::ArrayData &a) {
  if (a.type->id() != arrow::Type::DICTIONARY || !a.dictionary) return false;
  const auto &t = static_cast<const arrow::DictionaryType &>(*a.type);
  return t.index_type()->id() == arrow::Type::INT32 && !a.dictionary->MayHaveNulls() &&
         !is_string_like(a.dictionary->type->id());
}

bool is_string_conv(Conv c) { return c == Conv::kStr32 || c == Conv::kStr64 || c == Conv::kDict; }

// Fill fixed-width column `c` of the tile (rows[0..n) of array `a`, values in `vals` at m(row));
// returns as fill_column.
template <typename R, typename M>
int fill_fixed(const arrow::ArrayData &a, const arrow::ArrayData &vals, M m, const ColumnPlan &pl,
               const jg_column &c, R rows, int n, jg_val *out, size_t stride, __int128 *bad_value) {
  switch (pl.conv) {
    case Conv::kBool: {
      const uint8_t *v = vals.buffers[1]->data();
      int64_t off = vals.offset;
      fill(a, rows, n, out, stride, [v, off, m](jg_val &o, int64_t i) { o.v.i = arrow::bit_util::GetBit(v, off + m(i)); });
      return -1;
    }
    case Conv::kI8: fill_int<int8_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kI16: fill_int<int16_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kI32:
    case Conv::kDate32: fill_int<int32_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kI64: fill_int<int64_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kU8: fill_int<uint8_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kU16: fill_int<uint16_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kU32: fill_int<uint32_t>(a, vals, m, rows, n, out, stride); return -1;
    case Conv::kF32: {
      const float *v = vals.GetValues<float>(1);
      fill(a, rows, n, out, stride, [v, m](jg_val &o, int64_t i) { o.v.f = (double)v[m(i)]; });
      return -1;
    }
    case Conv::kF64: {
      const double *v = vals.GetValues<double>(1);
      fill(a, rows, n, out, stride, [v, m](jg_val &o, int64_t i) { o.v.f = v[m(i)]; });
      return -1;
    }
    case Conv::kDec32:
    case Conv::kDec64:
    case Conv::kDec128: {
      auto run = [&](auto get) {
        auto at = [get, m](int64_t i) { return get(m(i)); };
        int bad = fill_dec(a, pl, c, rows, n, out, stride, at);
        if (bad >= 0) *bad_value = at(rows[bad]);
        return bad;
      };
      if (pl.conv == Conv::kDec32) return run(Dec32Get{vals.GetValues<int32_t>(1)});
      if (pl.conv == Conv::kDec64) return run(Dec64Get{vals.GetValues<int64_t>(1)});
      return run(dec128_of(vals));
    }
    default: return -2;
  }
}

// Fill column `c` of the tile (rows[0..n) of array `a`); returns -1, or the tile row whose value
// does not fit the column (decimals), with *bad_value set, or -2 when the array is not of the type
// planned for the file.
template <typename R>
int fill_column(const arrow::ArrayData &a, const ColumnPlan &pl, const jg_column &c, R rows, int n,
                jg_val *out, size_t stride, __int128 *bad_value) {
  if (!is_string_conv(pl.conv)) {
    if (a.type->id() != arrow::Type::DICTIONARY) return fill_fixed(a, a, Same{}, pl, c, rows, n, out, stride, bad_value);
    if (!fixed_dict(a)) return -2;
    return fill_fixed(a, *a.dictionary, ByIndex{a.GetValues<int32_t>(1)}, pl, c, rows, n, out, stride, bad_value);
  }
  switch (pl.conv) {
    case Conv::kStr32:
    case Conv::kStr64:
    case Conv::kDict:  // by the array's own type: a format may hand out dictionaries (Parquet)
      switch (a.type->id()) {
        case arrow::Type::STRING:
        case arrow::Type::BINARY: fill_str<int32_t>(a, rows, n, out, stride); return -1;
        case arrow::Type::LARGE_STRING:
        case arrow::Type::LARGE_BINARY: fill_str<int64_t>(a, rows, n, out, stride); return -1;
        case arrow::Type::DICTIONARY:
          if (!is_string_like(a.dictionary->type->id())) return -2;
          with_index_type(a, [&](auto tag) { fill_dict_by_value<decltype(tag)>(a, rows, n, out, stride); });
          return -1;
        default: return -2;
      }
    default: return -2;
  }
}

// ------------------------------------------------------------------ runtime filters on Arrow keys

// A runtime filter on one integer key (docs/runtime-filters.md) tested straight on the key's Arrow
// values at the selected rows sel[0..n), which are narrowed in place to those it keeps, in order;
// their number is returned. `get(row)` is the key's value as jg_val holds it (int64), `valid` its
// validity bitmap (NULL: no NULLs; a NULL key drops the row). The key is hashed and counted as
// jg_rf_test hashes and counts it. Per run of up to kRfRun rows: the hashes and ranges, then the
// Bloom blocks, then the compaction, so no converted tile of jg_vals is needed: on TPC-H Q3's
// lineitem scan over Parquet that conversion and the tile's pass (jgr_rf_tile) were a sixth of
// its CPU, this pass is an eighth (9 to 12 ns a row against 5 to 7 in a harness).
template <typename Get>
size_t rf_test_ints(jg_ctx *ctx, const jg_rfilter &f, const Get &get, const uint8_t *valid, int64_t offset,
                    uint32_t *sel, size_t n) {
  constexpr size_t kRfRun = 1024;
  const int64_t lo = f.has_range[0] ? f.min[0] : INT64_MIN, hi = f.has_range[0] ? f.max[0] : INT64_MAX;
  uint32_t block[kRfRun], low[kRfRun];
  uint8_t ok[kRfRun];
  size_t out = 0;
  for (size_t base = 0; base < n; base += kRfRun) {
    const size_t m = std::min(kRfRun, n - base);
    for (size_t i = 0; i < m; i++) {
      const uint32_t r = sel[base + i];
      const int64_t v = get(r);
      const uint64_t h = jg_hash_combine(JG_HASH_SEED, jg_hash_int(v));
      ok[i] = (uint8_t)((v >= lo) & (v <= hi) & (valid ? arrow::bit_util::GetBit(valid, offset + r) : true));
      block[i] = jg_rf_block_index(&f, h);
      low[i] = (uint32_t)h;
    }
    if (f.nblocks) {
      // jg_rf_maybe, from the block number (fetching blocks some rows ahead, as jgr_rf_tile does,
      // made no difference in TPC-H Q3's scans: bench/README.md)
      for (size_t i = 0; i < m; i++) ok[i] &= (uint8_t)jg_rf_block_has(f.blocks + 8 * (size_t)block[i], low[i]);
    }
    for (size_t i = 0; i < m; i++) {
      sel[out] = sel[base + i];
      out += ok[i];
    }
  }
  ctx->stats.rf_tested += (uint64_t)n;
  ctx->stats.rf_removed += (uint64_t)(n - out);
  return out;
}

// rf_test_ints over array `a` of key column `c`, when its Arrow type allows: int32, int64 or
// date32 values as they are, or an int32-indexed dictionary of those; else (size_t)-1, and the
// caller converts the key and tests it as jgr_rf_tile does.
size_t rf_test_array(jg_ctx *ctx, const jg_rfilter &f, const jg_column &c, const arrow::ArrayData &a, uint32_t *sel,
                     size_t n) {
  using T = arrow::Type;
  if (c.type != JG_INT32 && c.type != JG_INT64 && c.type != JG_DATE) return (size_t)-1;
  const uint8_t *valid = a.MayHaveNulls() && a.buffers[0] ? a.buffers[0]->data() : nullptr;
  auto plain = [&](const auto *v) {
    return rf_test_ints(ctx, f, [v](uint32_t r) { return (int64_t)v[r]; }, valid, a.offset, sel, n);
  };
  auto by_index = [&](const auto *d) {
    const int32_t *ix = a.GetValues<int32_t>(1);
    return rf_test_ints(ctx, f, [d, ix](uint32_t r) { return (int64_t)d[ix[r]]; }, valid, a.offset, sel, n);
  };
  const T::type id = a.type->id();
  if (id == T::INT64 && c.type == JG_INT64) return plain(a.GetValues<int64_t>(1));
  if ((id == T::INT32 && c.type != JG_DATE) || (id == T::DATE32 && c.type == JG_DATE)) return plain(a.GetValues<int32_t>(1));
  if (id != T::DICTIONARY || !a.dictionary || a.dictionary->MayHaveNulls()) return (size_t)-1;
  const auto &dt = static_cast<const arrow::DictionaryType &>(*a.type);
  if (dt.index_type()->id() != T::INT32) return (size_t)-1;
  const T::type vid = a.dictionary->type->id();
  if (vid == T::INT64 && c.type == JG_INT64) return by_index(a.dictionary->GetValues<int64_t>(1));
  if ((vid == T::INT32 && c.type != JG_DATE) || (vid == T::DATE32 && c.type == JG_DATE))
    return by_index(a.dictionary->GetValues<int32_t>(1));
  return (size_t)-1;
}

// ------------------------------------------------------------------ row prefilter

// The prune predicates also hold row by row: a row on which one is not TRUE cannot pass the
// query's filter (each is implied by a conjunct of it). Evaluated on the Arrow arrays before any
// conversion, they narrow a batch to a selection vector, so rows the filter would drop are never
// converted nor handed to the row function — the vectorised first pass a columnar engine makes.
// The row function still evaluates the whole filter on the rows that remain.
struct RowPred {
  uint32_t col = 0;      // JG_QUERY column
  int pos = 0;           // batch column
  Pred::Op op = Pred::kEq;
  enum Domain : uint8_t { kI64, kI128, kF64, kBytes } dom = kI64;
  __int128 lo = 0, hi = 0;          // integer domains: lo <= x <= hi
  double flo = 0, fhi = 0;          // kF64: flo <= x <= fhi
  std::string slo, shi;             // kBytes with lo_open/hi_open, has_lo/has_hi
  bool has_lo = false, has_hi = false, lo_open = false, hi_open = false;
  std::vector<__int128> iset;       // kIn / kNe over integers
  std::vector<double> fset;
  std::vector<std::string> sset;
  bool never = false;               // no value can satisfy it (an empty range)
};

// Membership in an IN list's values (sorted and unique, see plan_row_pred): a branchless scan
// while the list is short, a binary search beyond. A scan of every value for every row made a
// dynamic filter of 2,127 keys (TPC-H Q20 from Trino) cost 0.9 us a row.
constexpr size_t kLinearSetMax = 16;

template <typename T, typename X>
inline bool set_has(const std::vector<T> &set, const X &x) {
  if (set.size() <= kLinearSetMax) {
    bool hit = false;
    for (const T &v : set) hit |= x == v;
    return hit;
  }
  return std::binary_search(set.begin(), set.end(), x);
}

inline bool set_has(const std::vector<std::string> &set, std::string_view x) {
  if (set.size() <= kLinearSetMax) {
    bool hit = false;
    for (const std::string &v : set) hit |= x == v;
    return hit;
  }
  return std::binary_search(set.begin(), set.end(), x,
                            [](std::string_view a, std::string_view b) { return a < b; });
}

template <typename T>
void sort_unique(std::vector<T> *v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// Plan predicate `p` for file column plan `pl`; false when it is not usable on this file (the
// row function decides alone then).
bool plan_row_pred(const Pred &p, const ColumnPlan &pl, const jg_column &c, RowPred *rp) {
  rp->col = p.col;
  rp->pos = pl.pos;
  rp->op = p.op;
  if (p.op == Pred::kIsNull || p.op == Pred::kNotNull) return true;
  const __int128 i64min = INT64_MIN, i64max = INT64_MAX;
  switch (c.type) {
    case JG_FLOAT64: {
      rp->dom = RowPred::kF64;
      double v = p.vals[0].f;
      double inf = HUGE_VAL;
      switch (p.op) {
        case Pred::kEq: rp->flo = rp->fhi = v; break;
        case Pred::kLt: rp->flo = -inf, rp->fhi = std::nextafter(v, -inf); break;
        case Pred::kLe: rp->flo = -inf, rp->fhi = v; break;
        case Pred::kGt: rp->flo = std::nextafter(v, inf), rp->fhi = inf; break;
        case Pred::kGe: rp->flo = v, rp->fhi = inf; break;
        case Pred::kNe:
        case Pred::kIn:
          for (const Lit &l : p.vals)
            if (l.f == l.f) rp->fset.push_back(l.f);  // NaN equals nothing: it never decides
          sort_unique(&rp->fset);
          break;
        default: return false;
      }
      return true;
    }
    case JG_STRING: {
      rp->dom = RowPred::kBytes;
      const std::string &v = p.vals[0].s;
      switch (p.op) {
        case Pred::kEq: rp->has_lo = rp->has_hi = true, rp->slo = rp->shi = v; break;
        case Pred::kLt: rp->has_hi = rp->hi_open = true, rp->shi = v; break;
        case Pred::kLe: rp->has_hi = true, rp->shi = v; break;
        case Pred::kGt: rp->has_lo = rp->lo_open = true, rp->slo = v; break;
        case Pred::kGe: rp->has_lo = true, rp->slo = v; break;
        case Pred::kNe:
        case Pred::kIn:
          for (const Lit &l : p.vals) rp->sset.push_back(l.s);
          sort_unique(&rp->sset);
          break;
        default: return false;
      }
      return true;
    }
    default:
      break;
  }
  // integers, booleans, dates, decimals: the literal (at the column's scale) on the file's
  // representation; a decimal file scale below the column's rounds the bound (like pruning.py)
  int shift = c.type == JG_DECIMAL ? pl.dec_scale - (int)c.scale : 0;
  if (shift > 38 - 19 || shift < -38) return false;
  rp->dom = pl.conv == Conv::kDec128 ? RowPred::kI128 : RowPred::kI64;
  auto at_file = [&](int64_t v, bool up, bool *exact) -> __int128 {
    *exact = true;
    if (shift >= 0) return (__int128)v * pow10_128()[shift];
    __int128 q = div_round(v, -shift, up);
    *exact = q * pow10_128()[-shift] == v;
    return q;
  };
  const __int128 big = pow10_128()[38];
  bool exact;
  switch (p.op) {
    case Pred::kEq:
      rp->lo = rp->hi = at_file(p.vals[0].i, false, &exact);
      rp->never = !exact;
      break;
    case Pred::kLt: rp->lo = -big, rp->hi = at_file(p.vals[0].i, true, &exact) - 1; break;
    case Pred::kLe: rp->lo = -big, rp->hi = at_file(p.vals[0].i, false, &exact); break;
    case Pred::kGt: rp->lo = at_file(p.vals[0].i, false, &exact) + 1, rp->hi = big; break;
    case Pred::kGe: rp->lo = at_file(p.vals[0].i, true, &exact), rp->hi = big; break;
    case Pred::kNe:
    case Pred::kIn:
      for (const Lit &l : p.vals) {
        __int128 v = at_file(l.i, false, &exact);
        if (exact) rp->iset.push_back(v);
        else if (p.op == Pred::kNe) return false;  // x <> (unrepresentable): true for every non-NULL x
      }
      rp->never = p.op == Pred::kIn && rp->iset.empty();
      sort_unique(&rp->iset);
      break;
    default: return false;
  }
  if (rp->dom == RowPred::kI64) {  // clamp to the 64-bit domain; an empty range matches nothing
    rp->lo = std::max(rp->lo, i64min);
    rp->hi = std::min(rp->hi, i64max);
  }
  if ((p.op != Pred::kNe && p.op != Pred::kIn) && rp->lo > rp->hi) rp->never = true;
  return true;
}

bool is_range(const RowPred &r) {
  return r.op == Pred::kEq || r.op == Pred::kLt || r.op == Pred::kLe || r.op == Pred::kGt || r.op == Pred::kGe;
}

// Fold an integer or float range into an earlier range on the same column (`a >= 1 AND a < 9` is
// one pass over the column, not two). True when merged.
bool merge_range(std::vector<RowPred> *preds, const RowPred &rp) {
  if (!is_range(rp) || rp.dom == RowPred::kBytes) return false;
  for (RowPred &q : *preds) {
    if (q.col != rp.col || !is_range(q) || q.dom != rp.dom) continue;
    q.lo = std::max(q.lo, rp.lo), q.hi = std::min(q.hi, rp.hi);
    q.flo = std::max(q.flo, rp.flo), q.fhi = std::min(q.fhi, rp.fhi);
    q.never = q.never || rp.never || (q.dom == RowPred::kF64 ? q.flo > q.fhi : q.lo > q.hi);
    q.op = Pred::kGe;  // any range op: keep_int and the float test look only at the bounds
    return true;
  }
  return false;
}

// Keep the entries of sel[0..n) whose row satisfies test(value); returns the new count.
// `dense`: sel[j] == j for every j (a batch's first predicate); then the test runs over the values in
// order, 64 rows into one bit mask at a time (no loop-carried dependency), and only the rows that
// pass are written out.
template <typename Get, typename Test>
inline size_t keep_if(const arrow::ArrayData &a, uint32_t *sel, size_t n, Get get, Test test, bool dense = false) {
  size_t k = 0;
  if (dense && !a.MayHaveNulls()) {
    for (size_t base = 0; base < n; base += 64) {
      size_t m = std::min<size_t>(64, n - base);
      uint64_t bits = 0;
      for (size_t j = 0; j < m; j++) bits |= (uint64_t)(test(get((uint32_t)(base + j))) ? 1 : 0) << j;
      for (; bits; bits &= bits - 1) sel[k++] = (uint32_t)(base + (size_t)__builtin_ctzll(bits));
    }
    return k;
  }
  if (!a.MayHaveNulls()) {
    for (size_t j = 0; j < n; j++) {
      uint32_t r = sel[j];
      sel[k] = r;
      k += test(get(r)) ? 1 : 0;
    }
    return k;
  }
  const uint8_t *valid = a.buffers[0]->data();
  for (size_t j = 0; j < n; j++) {
    uint32_t r = sel[j];
    sel[k] = r;
    k += (arrow::bit_util::GetBit(valid, a.offset + r) && test(get(r))) ? 1 : 0;
  }
  return k;
}

template <typename Get>
inline size_t keep_int(const RowPred &rp, const arrow::ArrayData &a, uint32_t *sel, size_t n, Get get, bool dense) {
  if (rp.op == Pred::kIn || rp.op == Pred::kNe) {
    bool in = rp.op == Pred::kIn;
    return keep_if(a, sel, n, get, [&](auto x) { return set_has(rp.iset, (__int128)x) == in; });
  }
  if (rp.dom == RowPred::kI64) {
    int64_t lo = (int64_t)rp.lo, hi = (int64_t)rp.hi;
    return keep_if(a, sel, n, get, [lo, hi](auto x) { return (int64_t)x >= lo && (int64_t)x <= hi; }, dense);
  }
  __int128 lo = rp.lo, hi = rp.hi;
  return keep_if(a, sel, n, get, [lo, hi](auto x) { return (__int128)x >= lo && (__int128)x <= hi; }, dense);
}

bool bytes_test(const RowPred &rp, std::string_view s) {
  if (rp.op == Pred::kIn || rp.op == Pred::kNe) return set_has(rp.sset, s) == (rp.op == Pred::kIn);
  if (rp.has_lo) {
    int c = s.compare(rp.slo);
    if (c < 0 || (c == 0 && rp.lo_open)) return false;
  }
  if (rp.has_hi) {
    int c = s.compare(rp.shi);
    if (c > 0 || (c == 0 && rp.hi_open)) return false;
  }
  return true;
}

// Narrow sel[0..n) by one predicate on column array `a`; returns the new count, or (size_t)-1 when
// the array's type is not one this prefilter knows (then it is skipped).
// The prefilter's verdict on each entry of a fixed-width dictionary, kept while the batches bring
// the same dictionary (a Parquet column chunk's): the predicate runs once per entry, then each row
// is one lookup by its index, as for dictionary-encoded strings.
struct DictMatch {
  std::shared_ptr<arrow::ArrayData> dict;  // held: the cache key cannot be reused by another
  std::vector<uint8_t> match;
  std::vector<uint32_t> sel;
};

size_t apply_row_pred(const RowPred &rp, const ColumnPlan &pl, const arrow::ArrayData &a, uint32_t *sel, size_t n,
                      bool dense, DictMatch *cache) {
  if (rp.never) return 0;
  if (rp.op == Pred::kIsNull || rp.op == Pred::kNotNull) {
    bool want_null = rp.op == Pred::kIsNull;
    if (!a.MayHaveNulls()) return want_null ? 0 : n;
    const uint8_t *valid = a.buffers[0]->data();
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
      uint32_t r = sel[j];
      sel[k] = r;
      k += arrow::bit_util::GetBit(valid, a.offset + r) != want_null ? 1 : 0;
    }
    return k;
  }
  if (!is_string_conv(pl.conv) && a.type->id() == arrow::Type::DICTIONARY) {
    if (!fixed_dict(a) || !cache) return (size_t)-1;
    if (cache->dict != a.dictionary) {
      const arrow::ArrayData &d = *a.dictionary;
      cache->dict.reset();
      cache->sel.resize((size_t)d.length);
      for (size_t e = 0; e < cache->sel.size(); e++) cache->sel[e] = (uint32_t)e;
      size_t k = apply_row_pred(rp, pl, d, cache->sel.data(), cache->sel.size(), true, nullptr);
      if (k == (size_t)-1) return k;
      cache->match.assign((size_t)d.length, 0);
      for (size_t j = 0; j < k; j++) cache->match[cache->sel[j]] = 1;
      cache->dict = a.dictionary;
    }
    const uint8_t *m = cache->match.data();
    return keep_if(a, sel, n, ByIndex{a.GetValues<int32_t>(1)}, [m](int64_t e) { return m[e] != 0; }, dense);
  }
  switch (pl.conv) {
    case Conv::kBool: {
      const uint8_t *v = a.buffers[1]->data();
      int64_t off = a.offset;
      return keep_int(rp, a, sel, n, [v, off](uint32_t i) { return (int64_t)arrow::bit_util::GetBit(v, off + i); }, dense);
    }
    case Conv::kI8: return keep_int(rp, a, sel, n, [v = a.GetValues<int8_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kI16: return keep_int(rp, a, sel, n, [v = a.GetValues<int16_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kI32:
    case Conv::kDate32: return keep_int(rp, a, sel, n, [v = a.GetValues<int32_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kI64: return keep_int(rp, a, sel, n, [v = a.GetValues<int64_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kU8: return keep_int(rp, a, sel, n, [v = a.GetValues<uint8_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kU16: return keep_int(rp, a, sel, n, [v = a.GetValues<uint16_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kU32:
      return keep_int(rp, a, sel, n, [v = a.GetValues<uint32_t>(1)](uint32_t i) { return (int64_t)v[i]; }, dense);
    case Conv::kDec32: return keep_int(rp, a, sel, n, [v = a.GetValues<int32_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kDec64: return keep_int(rp, a, sel, n, [v = a.GetValues<int64_t>(1)](uint32_t i) { return v[i]; }, dense);
    case Conv::kDec128: return keep_int(rp, a, sel, n, dec128_of(a), dense);
    case Conv::kF32:
    case Conv::kF64: {
      auto test = [&rp](double x) {
        if (rp.op == Pred::kIn || rp.op == Pred::kNe) return set_has(rp.fset, x) == (rp.op == Pred::kIn);
        return x >= rp.flo && x <= rp.fhi;
      };
      if (pl.conv == Conv::kF32)
        return keep_if(a, sel, n, [v = a.GetValues<float>(1)](uint32_t i) { return (double)v[i]; }, test, dense);
      return keep_if(a, sel, n, [v = a.GetValues<double>(1)](uint32_t i) { return v[i]; }, test, dense);
    }
    case Conv::kStr32:
    case Conv::kStr64:
    case Conv::kDict:
      switch (a.type->id()) {
        case arrow::Type::STRING:
        case arrow::Type::BINARY: {
          const int32_t *off = a.GetValues<int32_t>(1);
          const char *d = a.buffers[2] ? reinterpret_cast<const char *>(a.buffers[2]->data()) : "";
          return keep_if(a, sel, n, [off, d](uint32_t i) { return std::string_view(d + off[i], (size_t)(off[i + 1] - off[i])); },
                         [&rp](std::string_view s) { return bytes_test(rp, s); });
        }
        case arrow::Type::LARGE_STRING:
        case arrow::Type::LARGE_BINARY: {
          const int64_t *off = a.GetValues<int64_t>(1);
          const char *d = a.buffers[2] ? reinterpret_cast<const char *>(a.buffers[2]->data()) : "";
          return keep_if(a, sel, n, [off, d](uint32_t i) { return std::string_view(d + off[i], (size_t)(off[i + 1] - off[i])); },
                         [&rp](std::string_view s) { return bytes_test(rp, s); });
        }
        case arrow::Type::DICTIONARY: {  // the test once per dictionary entry, then per index
          const arrow::ArrayData &d = *a.dictionary;
          if (!is_string_like(d.type->id())) return (size_t)-1;
          std::vector<uint8_t> match((size_t)d.length);
          const char *bytes = d.buffers[2] ? reinterpret_cast<const char *>(d.buffers[2]->data()) : "";
          const uint8_t *dvalid = d.MayHaveNulls() ? d.buffers[0]->data() : nullptr;
          for (int64_t e = 0; e < d.length; e++) {
            int64_t o0, o1;
            if (large_offsets(d)) o0 = d.GetValues<int64_t>(1)[e], o1 = d.GetValues<int64_t>(1)[e + 1];
            else o0 = d.GetValues<int32_t>(1)[e], o1 = d.GetValues<int32_t>(1)[e + 1];
            bool ok = !dvalid || arrow::bit_util::GetBit(dvalid, d.offset + e);
            match[(size_t)e] = ok && bytes_test(rp, std::string_view(bytes + o0, (size_t)(o1 - o0)));
          }
          size_t k = 0;
          with_index_type(a, [&](auto tag) {
            using I = decltype(tag);
            k = keep_if(a, sel, n, [idx = a.GetValues<I>(1)](uint32_t i) { return (int64_t)idx[i]; },
                        [&match](int64_t e) { return match[(size_t)e] != 0; });
          });
          return k;
        }
        default: return (size_t)-1;
      }
  }
  return (size_t)-1;
}

// ------------------------------------------------------------------ scan state

struct FileState {
  std::string path;  // as the `file` command gave it: in errors
  InputFile input;
  std::vector<ColumnPlan> plans;  // per JG_QUERY column
  std::vector<int> fields;        // fields to read, ascending
  std::vector<RowPred> row_preds; // the prune predicates usable row by row on this file
  // Late materialization: per batch column, whether the prefilter reads it (decoded first); empty
  // when every column is needed first anyway (no prefilter, or it reads every column).
  std::vector<bool> early;
};

struct Unit {
  uint32_t file;
  UnitInfo info;
};

struct ScanState {
  const Format *fmt = nullptr;
  std::vector<FileState> files;
  std::vector<Unit> units;
  std::atomic<size_t> next{0};
  int64_t batch_rows = 0;  // scan.batch_rows
  uint64_t units_total = 0, units_skipped = 0, rows_skipped = 0;
  std::atomic<uint64_t> units_native{0};  // see ColumnarFile::last_read_native
};

const Format *g_format = nullptr;

constexpr int64_t kDefaultBatchRows = 8192;  // a batch of the needed columns stays in L2
constexpr size_t kTileBytes = 48 << 10;  // the jg_val matrix of one tile stays in L1/L2
constexpr size_t kMaxTileRows = 1024;

// ------------------------------------------------------------------ one worker

class Worker {
 public:
  Worker(ScanState *st, jg_ctx *ctx, jgr_error *err) : st_(st), ctx_(ctx), err_(err) {
    ncol_ = JG_QUERY.ncolumns;
    size_t row_bytes = sizeof(jg_val) * (ncol_ ? ncol_ : 1);
    tile_rows_ = (int)std::clamp<size_t>(kTileBytes / row_bytes, 64, kMaxTileRows);
    tile_.resize((size_t)tile_rows_ * (ncol_ ? ncol_ : 1));
  }

  int run_unit(const Unit &u) {
    const FileState &fs = st_->files[u.file];
    if (ncol_ == 0) return run_empty(u, fs);  // no column needed: count rows, read nothing
    if (!file_ || file_index_ != u.file) {
      file_.reset();
      auto r = open_file(st_->fmt, fs.path, fs.input, &ctx_->stats);
      if (!r.ok()) return io_error(fs, "cannot read %s file: %s", r.status());
      file_ = std::move(*r);
      file_index_ = u.file;
      Status s = guard([&] {
        file_->configure(ctx_->proc);
        return file_->select(fs.fields, st_->batch_rows);
      });
      if (!s.ok()) return io_error(fs, "cannot read %s file: %s", s);
    }
    int64_t row = u.info.first_row;  // file row of the next batch's first row
    int rc = 0;
    auto check = [&](const arrow::RecordBatch &b) {
      if ((size_t)b.num_columns() != fs.fields.size())
        return Status::Invalid("reader returned ", b.num_columns(), " columns, expected ", fs.fields.size());
      return Status::OK();
    };
    Status s = guard([&] {
      if (fs.early.empty())
        return file_->read(u.info.index, [&](const arrow::RecordBatch &b) {
          ARROW_RETURN_NOT_OK(check(b));
          rc = batch(fs, b, row);
          row += b.num_rows();
          return rc == 0 ? Status::OK() : Status::Cancelled("row failed");
        });
      // late materialization: the prefilter's columns first, the others for the batches it leaves rows in
      return file_->read_late(
          u.info.index, fs.early,
          [&](const arrow::RecordBatch &b, const ColumnarFile::Materialize &more) -> arrow::Result<Kept> {
            ARROW_RETURN_NOT_OK(check(b));
            ARROW_ASSIGN_OR_RAISE(const size_t n, prefilter(fs, b, &more));
            // sel_ holds the kept rows whenever some row was dropped (prefilter)
            return Kept{n, n < (size_t)b.num_rows() ? sel_.data() : nullptr};
          },
          [&](const arrow::RecordBatch &b, size_t passed) {
            ARROW_RETURN_NOT_OK(check(b));
            rc = passed ? emit(fs, b, passed, row) : 0;
            row += b.num_rows();
            return rc == 0 ? Status::OK() : Status::Cancelled("row failed");
          });
    });
    if (rc != 0) return -1;
    if (s.ok() && file_->last_read_native()) st_->units_native.fetch_add(1, std::memory_order_relaxed);
    if (!s.ok()) {
      char what[128];
      snprintf(what, sizeof what, "reading %s %" PRId64 " of the %s file: %%s", st_->fmt->unit, u.info.index,
               st_->fmt->name);
      return io_error(fs, what, s, true);
    }
    return 0;
  }

 private:
  int run_empty(const Unit &u, const FileState &fs) {
    for (int64_t r = 0; r < u.info.rows; r++) {
      ctx_->stats.tuples_in++;
      if (JGR_UNLIKELY(jgr_call_row(ctx_, tile_.data()) != 0)) return row_failed(fs, u.info.first_row + r);
    }
    return 0;
  }

  int batch(const FileState &fs, const arrow::RecordBatch &b, int64_t first_row) {
    size_t n = *prefilter(fs, b, nullptr);  // every column decoded: nothing to ask for, no error
    return n ? emit(fs, b, n, first_row) : 0;
  }

  // Count the batch's rows in, and narrow them to those every prune predicate holds for: sel_[0..n),
  // n returned. Only the predicates' columns are looked at (the others may not be decoded yet); a
  // predicate's column that is not decoded yet (a staged filter's, Format::staged_filter) is asked
  // of `more` at the rows the predicates before it kept.
  arrow::Result<size_t> prefilter(const FileState &fs, const arrow::RecordBatch &b,
                                  const ColumnarFile::Materialize *more) {
    int64_t rows = b.num_rows();
    ctx_->stats.tuples_in += (uint64_t)rows;
    if (fs.row_preds.empty() && !(JG_QUERY.nrf && jgr_rf_installed())) return (size_t)rows;
    sel_.resize((size_t)rows);
    for (int64_t i = 0; i < rows; i++) sel_[(size_t)i] = (uint32_t)i;
    size_t n = (size_t)rows;
    if (dict_match_.size() < fs.row_preds.size()) dict_match_.resize(fs.row_preds.size());
    size_t p = 0;
    for (const RowPred &rp : fs.row_preds) {
      const ColumnPlan &pl = fs.plans[rp.col];
      std::shared_ptr<arrow::ArrayData> a = b.column_data(rp.pos);
      if (a->type->id() == arrow::Type::NA && more) {  // a late placeholder (late_placeholder)
        ARROW_ASSIGN_OR_RAISE(a, (*more)(rp.pos, Kept{n, n < (size_t)rows ? sel_.data() : nullptr}));
      }
      size_t k = apply_row_pred(rp, pl, *a, sel_.data(), n, n == (size_t)rows, &dict_match_[p++]);
      if (k != (size_t)-1) n = k;
      if (n == 0) return (size_t)0;
    }
    return n;
  }

  // The runtime filters, then the tiles, over the rows sel_[0..n) of batch `b` (every column decoded).
  int emit(const FileState &fs, const arrow::RecordBatch &b, size_t n, int64_t first_row) {
    int64_t rows = b.num_rows();
    const bool rf = JG_QUERY.nrf && jgr_rf_installed();  // docs/runtime-filters.md
    if (n == (size_t)rows && !rf) {  // every row: contiguous tiles, no selection to follow
      for (int64_t t0 = 0; t0 < rows; t0 += tile_rows_) {
        int m = (int)std::min<int64_t>(tile_rows_, rows - t0);
        if (tile(fs, b, Span{t0}, m, first_row) != 0) return -1;
      }
      return 0;
    }
    if (rf) {
      ctx_->rf_pretested = runtime_filters(fs, b, &n);
      if (n == 0) {
        ctx_->rf_pretested = 0;
        return 0;
      }
    }
    int rc = 0;
    for (size_t t0 = 0; rc == 0 && t0 < n; t0 += (size_t)tile_rows_) {
      int m = (int)std::min<size_t>((size_t)tile_rows_, n - t0);
      rc = tile(fs, b, Pick{sel_.data() + t0}, m, first_row);
    }
    ctx_->rf_pretested = 0;
    return rc;
  }

  // The runtime filters (docs/runtime-filters.md) on the selected rows sel_[0..*n), before their
  // other columns are converted. A filter on one integer key is tested on the key's Arrow values
  // (rf_test_array); for the others, per tile, only the key columns are converted, the tile's rows
  // tested (jgr_rf_tile) and the rows that pass kept, in order. True when every row was so tested
  // (the row function then keeps them without testing again); false when a key column did not
  // convert (a bad value: the rows from there on are kept untested, and the row function tests
  // them, or the conversion fails the same way there and says why).
  bool runtime_filters(const FileState &fs, const arrow::RecordBatch &b, size_t *n) {
    uint32_t direct = 0;  // the filters tested on the Arrow values
    for (uint32_t s = 0; s < JG_QUERY.nrf && s < 32 && *n; s++) {
      const jg_rfilter *f = jgr_rf_slot(s);
      if (!f || f->nkeys != 1 || JG_QUERY.rf_nkeys[s] != 1) continue;
      const uint32_t c = JG_QUERY.rf_keys[s][0];
      const size_t kept = rf_test_array(ctx_, *f, JG_QUERY.columns[c], *b.column_data(fs.plans[c].pos), sel_.data(), *n);
      if (kept == (size_t)-1) continue;
      *n = kept;
      direct |= 1u << s;
    }
    std::vector<uint32_t> &cols = rf_cols_;
    cols.clear();
    for (uint32_t s = 0; s < JG_QUERY.nrf; s++)
      if (jgr_rf_slot(s) && !(s < 32 && (direct >> s & 1u)))
        for (uint32_t k = 0; k < JG_QUERY.rf_nkeys[s]; k++) cols.push_back(JG_QUERY.rf_keys[s][k]);
    if (cols.empty() || *n == 0) return true;
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    const size_t stride = ncol_, total = *n;
    size_t out = 0;
    for (size_t t0 = 0; t0 < total; t0 += (size_t)tile_rows_) {
      int m = (int)std::min<size_t>((size_t)tile_rows_, total - t0);
      for (uint32_t c : cols) {
        const ColumnPlan &pl = fs.plans[c];
        __int128 bad_value = 0;
        if (fill_column(*b.column_data(pl.pos), pl, JG_QUERY.columns[c], Pick{sel_.data() + t0}, m,
                        tile_.data() + c, stride, &bad_value) != -1) {
          for (size_t k = t0; k < total; k++) sel_[out++] = sel_[k];
          *n = out;
          return false;
        }
      }
      const int kept = jgr_rf_tile(ctx_, tile_.data(), stride, m, rf_keep_, direct);
      for (int k = 0; k < kept; k++) sel_[out++] = sel_[t0 + rf_keep_[k]];
    }
    *n = out;
    return true;
  }

  // Convert tile rows[0..n) of batch `b` column by column, then run the row function on each.
  template <typename R>
  int tile(const FileState &fs, const arrow::RecordBatch &b, R rows, int n, int64_t first_row) {
    const size_t stride = ncol_;
    for (uint32_t c = 0; c < ncol_; c++) {
      const ColumnPlan &pl = fs.plans[c];
      const arrow::ArrayData &a = *b.column_data(pl.pos);
      __int128 bad_value = 0;
      int bad = fill_column(a, pl, JG_QUERY.columns[c], rows, n, tile_.data() + c, stride, &bad_value);
      if (JGR_UNLIKELY(bad == -2)) {
        const jg_column &col = JG_QUERY.columns[c];
        jgr_error_set(err_, "column \"%.*s\": the reader returned %s", (int)col.name_len, col.name,
                      a.type->ToString().c_str());
        jgr_error_set_file(err_, fs.path.c_str(), 0);
        return -1;
      }
      if (JGR_UNLIKELY(bad >= 0)) {
        const jg_column &col = JG_QUERY.columns[c];
        char tb[40];
        jgr_error_set(err_, "column \"%.*s\": value %s does not fit %s exactly", (int)col.name_len, col.name,
                      dec_text(bad_value, pl.dec_scale).c_str(), jg_type_name(col, tb, sizeof tb));
        jgr_error_set_file(err_, fs.path.c_str(), first_row + rows[bad] + 1);
        return -1;
      }
    }
    if (JG_QUERY.rows) {  // a batch function (an aggregation) takes the whole tile at once
      if (JGR_UNLIKELY(jgr_call_rows(ctx_, tile_.data(), (uint32_t)n) != 0))
        return rows_failed(fs, first_row + rows[0], first_row + rows[n - 1]);
      return 0;
    }
    const jg_val *row = tile_.data();
    for (int k = 0; k < n; k++, row += stride)
      if (JGR_UNLIKELY(jgr_call_row(ctx_, row) != 0)) return row_failed(fs, first_row + rows[k]);
    return 0;
  }

  // A failed batch call: the row is one of rows [lo, hi] (0-based) of the file.
  int rows_failed(const FileState &fs, int64_t lo, int64_t hi) {
    jgr_row_error(ctx_, err_);
    if (ctx_->flags & JGR_OUT_FAILED) return -1;
    size_t used = strlen(err_->message);
    snprintf(err_->message + used, sizeof err_->message - used, " (in rows %" PRId64 " to %" PRId64 " of the file)",
             lo + 1, hi + 1);
    jgr_error_set_file(err_, fs.path.c_str(), 0);
    return -1;
  }

  int row_failed(const FileState &fs, int64_t row0) {
    jgr_row_error(ctx_, err_);
    if (!(ctx_->flags & JGR_OUT_FAILED)) jgr_error_set_file(err_, fs.path.c_str(), row0 + 1);
    return -1;
  }

  int io_error(const FileState &fs, const char *fmt, const Status &s, bool formatted = false) {
    std::string m = s.message();
    if (formatted)
      jgr_error_set(err_, fmt, m.c_str());
    else
      jgr_error_set(err_, fmt, st_->fmt->name, m.c_str());
    jgr_error_set_file(err_, fs.path.c_str(), 0);
    return -1;
  }

  ScanState *st_;
  jg_ctx *ctx_;
  jgr_error *err_;
  uint32_t ncol_;
  int tile_rows_;
  std::vector<jg_val> tile_;
  std::vector<uint32_t> sel_;  // the batch's rows left by the prefilter
  std::vector<DictMatch> dict_match_;  // per row predicate
  uint32_t rf_keep_[kMaxTileRows];  // jgr_rf_tile's kept rows of a tile
  std::vector<uint32_t> rf_cols_;  // the key columns of the filters jgr_rf_tile tests (JG_QUERY indexes)
  std::unique_ptr<ColumnarFile> file_;
  uint32_t file_index_ = 0;
};

// ------------------------------------------------------------------ driver

int file_error(jgr_error *err, const std::string &path, const std::string &msg) {
  jgr_error_set(err, "%s", msg.c_str());
  jgr_error_set_file(err, path.c_str(), 0);
  return -1;
}

int scan_prepare(jgr_proc *p, int phase, jgr_error *err) {
  (void)phase;
  auto *st = new ScanState();
  p->driver_state = st;
  st->fmt = g_format;
  for (uint32_t i = 0; i < JG_QUERY.ncolumns; i++) {
    const jg_column &c = JG_QUERY.columns[i];
    if (c.type > JG_DECIMAL128 || (c.type == JG_DECIMAL && (c.precision < 1 || c.precision > 18 || c.scale > c.precision)) ||
        (c.type == JG_DECIMAL128 && (c.precision < 19 || c.precision > 38 || c.scale > c.precision))) {
      jgr_error_set(err, "column %u has an unsupported type", i);
      return -1;
    }
  }
  uint64_t batch_rows;
  if (jgr_param_u64(p, "scan.batch_rows", kDefaultBatchRows, 1, 1u << 24, &batch_rows, err)) return -1;
  st->batch_rows = (int64_t)batch_rows;
  const char *mm = jgr_param(p, "scan.mmap");  // "0": read with pread, "1": map (see g_mmap)
  g_mmap = mm ? strcmp(mm, "0") != 0 : st->fmt->map_files;
  const char *ls = jgr_param(p, "scan.libsnappy");  // "0": Snappy through Arrow's codec (jg_snappy.h)
  g_libsnappy = !(ls && strcmp(ls, "0") == 0);
  const char *pf = jgr_param(p, "scan.prefilter");  // "0": the row function alone filters (for tests)
  bool no_prefilter = pf && strcmp(pf, "0") == 0;
  const char *lm = jgr_param(p, "scan.late");  // "0": decode every column of every batch (for comparisons)
  bool no_late = lm && strcmp(lm, "0") == 0;

  std::vector<Pred> preds;
  for (int n = 0;; n++) {
    char key[32];
    snprintf(key, sizeof key, "prune.%d", n);
    const char *v = jgr_param(p, key);
    if (!v) break;
    Pred pr;
    bool skip = false;
    std::string why = parse_pred(v, &pr, &skip);
    if (!why.empty()) {
      jgr_error_set(err, "param %s: %s", key, why.c_str());
      return -1;
    }
    if (!skip) preds.push_back(std::move(pr));
  }

  for (size_t f = 0; f < p->nfiles; f++) {
    FileState fs;
    fs.path = p->files[f];
    fs.input.fd = jgr_open_input(p, p->files[f], err);  // beneath the data root, a regular file
    if (fs.input.fd < 0) return -1;
    if (g_mmap) fs.input.map = map_file(fs.input.fd);
    auto opened = open_file(st->fmt, fs.path, fs.input, nullptr);
    if (!opened.ok())
      return file_error(err, fs.path, std::string("not a readable ") + st->fmt->name + " file: " +
                                          opened.status().message());
    ColumnarFile &file = **opened;
    std::shared_ptr<arrow::Schema> schema = file.schema();
    fs.plans.resize(JG_QUERY.ncolumns);
    for (uint32_t c = 0; c < JG_QUERY.ncolumns; c++) {
      const jg_column &col = JG_QUERY.columns[c];
      std::string name = col_name(col);
      std::vector<int> found = schema->GetAllFieldIndices(name);
      if (found.size() != 1)
        return file_error(err, fs.path, "column \"" + name + "\" " +
                                            (found.empty() ? "is not in the file" : "appears more than once in the file"));
      ColumnPlan &pl = fs.plans[c];
      pl.field = found[0];
      std::string why = plan_column(*schema->field(pl.field)->type(), col, &pl);
      if (!why.empty()) return file_error(err, fs.path, why);
      fs.fields.push_back(pl.field);
    }
    std::sort(fs.fields.begin(), fs.fields.end());
    for (ColumnPlan &pl : fs.plans)
      pl.pos = (int)(std::lower_bound(fs.fields.begin(), fs.fields.end(), pl.field) - fs.fields.begin());
    if (!no_prefilter)
      for (const Pred &pr : preds) {
        RowPred rp;
        if (plan_row_pred(pr, fs.plans[pr.col], JG_QUERY.columns[pr.col], &rp) && !merge_range(&fs.row_preds, rp))
          fs.row_preds.push_back(std::move(rp));
      }
    if (!fs.row_preds.empty() && !no_late) {
      fs.early.assign(fs.fields.size(), false);
      for (const RowPred &rp : fs.row_preds)  // staged: the others are asked for while filtering
        if (!st->fmt->staged_filter || rp.pos == fs.row_preds[0].pos) fs.early[(size_t)rp.pos] = true;
      if (std::all_of(fs.early.begin(), fs.early.end(), [](bool e) { return e; })) fs.early.clear();
    }

    int64_t nunits = file.num_units();
    for (int64_t i = 0; i < nunits; i++) {
      UnitInfo u = file.unit(i);
      if (u.rows <= 0) continue;
      st->units_total++;
      bool keep = true;
      for (const Pred &pr : preds) {
        RawStats rs;
        Status s = guard([&] {
          rs = file.stats(i, fs.plans[pr.col].field);
          return Status::OK();
        });
        if (s.ok() && !may_match(pr, rs)) {
          keep = false;
          break;
        }
      }
      if (keep) {
        st->units.push_back({(uint32_t)f, u});
      } else {
        st->units_skipped++;
        st->rows_skipped += (uint64_t)u.rows;
      }
    }
    st->files.push_back(std::move(fs));
  }
  return 0;
}

int scan_work(jgr_proc *p, int phase, jg_ctx *ctx, jgr_error *err) {
  (void)phase;
  auto *st = static_cast<ScanState *>(p->driver_state);
  Worker w(st, ctx, err);
  for (;;) {
    size_t k = st->next.fetch_add(1, std::memory_order_relaxed);
    if (k >= st->units.size()) break;
    if (w.run_unit(st->units[k]) != 0) return -1;
  }
  return jgr_call_finish(ctx, err);
}

void scan_stats(jgr_proc *p, int phase, char *buf, size_t cap) {
  (void)phase;
  const auto *st = static_cast<const ScanState *>(p->driver_state);
  if (!st) return;
  snprintf(buf, cap, ",\"%s_total\":%" PRIu64 ",\"%s_skipped\":%" PRIu64 ",\"rows_skipped\":%" PRIu64,
           st->fmt->stats_key, st->units_total, st->fmt->stats_key, st->units_skipped, st->rows_skipped);
  size_t used = strlen(buf);
  if (st->fmt->native_key && used < cap)
    snprintf(buf + used, cap - used, ",\"%s\":%" PRIu64, st->fmt->native_key, st->units_native.load());
  used = strlen(buf);
  if (used < cap) snprintf(buf + used, cap - used, ",\"libsnappy_bytes\":%" PRIu64, g_libsnappy_bytes.load());
  used = strlen(buf);
  if (used < cap)
    snprintf(buf + used, cap - used,
             ",\"late_rows_skipped\":%" PRIu64 ",\"late_%s_skipped\":%" PRIu64 ",\"late_values_skipped\":%" PRIu64,
             g_late_rows_skipped.load(), st->fmt->late_chunk, g_late_chunks_skipped.load(), g_late_values_skipped.load());
}

}  // namespace

int run(int argc, char **argv, const Format *format) {
  g_format = format;
  static jgr_driver driver = {format->driver, 1, 0, scan_prepare, scan_work};
  jgr_extra_stats = scan_stats;
  return jgr_main(argc, argv, &driver);
}

}  // namespace jgscan
