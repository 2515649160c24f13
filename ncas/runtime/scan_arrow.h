// Columnar scan NCAs (ORC, Parquet) on Arrow C++ from the pyarrow wheel: the interface between the
// common driver (scan_arrow.cpp: files, units, statistics pruning, workers, Arrow -> jg_val
// conversion, errors) and a format (scan_orc.cpp, scan_parquet.cpp: open a file, describe its
// units — ORC stripes, Parquet row groups — with statistics, and read a unit as Arrow batches).
//
// Built only when pyarrow is installed (`make arrow`, driven by jumpgate/ncas/software/build.py),
// with C++20 and Arrow's include directory; never part of libjgrt.a.
#ifndef JG_SCAN_ARROW_H
#define JG_SCAN_ARROW_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "jgrt.h"

namespace jgscan {

// What a unit's statistics say about one column, in a format-neutral form: bounds of its non-NULL
// values by kind. Whatever a file does not record stays unknown, and pruning then keeps the unit.
enum class Tri : uint8_t { kUnknown, kNo, kYes };

struct RawStats {
  Tri has_null = Tri::kUnknown;   // any NULL in the unit
  Tri has_value = Tri::kUnknown;  // any non-NULL value
  enum Kind : uint8_t { kNone, kInt, kDouble, kBytes, kDecimal } kind = kNone;  // kind of the bounds
  int64_t imin = 0, imax = 0;          // kInt: booleans (0/1), integers, dates (days)
  double fmin = 0, fmax = 0;           // kDouble
  std::string smin, smax;              // kBytes: byte-wise (memcmp) bounds
  __int128 dmin = 0, dmax = 0;         // kDecimal: unscaled at dscale
  int dscale = 0;
};

struct UnitInfo {
  int64_t index = 0;      // stripe / row group number in its file
  int64_t first_row = 0;  // 0-based row number of the unit's first row in its file
  int64_t rows = 0;
  int64_t bytes = 0;      // on-disk (compressed) size, informational
};

// The rows of a batch that the row prefilter kept (late materialization, ColumnarFile::read_late):
// `n` of them, at `rows[0..n)` in ascending order, or, when `rows` is null, the batch's first n
// (then every row of the batch, or none).
struct Kept {
  size_t n = 0;
  const uint32_t *rows = nullptr;
};

// One open file, used by one thread at a time.
class ColumnarFile {
 public:
  virtual ~ColumnarFile() = default;
  // Top-level fields as Arrow types (what the file's reader produces).
  virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  virtual int64_t num_units() const = 0;
  virtual UnitInfo unit(int64_t i) const = 0;
  // Statistics of top-level field `field` in unit `i` (the file's own representation).
  virtual RawStats stats(int64_t i, int field) = 0;
  // Format-specific `param`s of the process (called before select()).
  virtual void configure(const jgr_proc *p) { (void)p; }
  // Read top-level fields `fields` (in that order) from now on, in batches of at most
  // `batch_rows` rows. Called once before the first read().
  virtual arrow::Status select(const std::vector<int> &fields, int64_t batch_rows) = 0;
  // Read unit `i`: `on_batch` gets its rows in order, as consecutive batches.
  virtual arrow::Status read(int64_t i, const std::function<arrow::Status(const arrow::RecordBatch &)> &on_batch) = 0;
  // The last read() decoded the unit with the format's own decoder rather than a library's
  // reader (counted in the `done` stats under Format::native_key).
  virtual bool last_read_native() const { return false; }

  // Late materialization. Per batch, `filter` gets the batch with only the columns marked in
  // `early` decoded (the others are placeholder arrays of type null) and returns which rows may
  // pass (Kept); the other columns are then decoded for that batch — only at those rows, where a
  // format can step over the others for less than decoding them (ORC's decimals), or, when no
  // row passed, skipped without being decoded, their pages or streams not even decompressed when
  // no row of theirs is ever needed — and `rows` gets the whole batch with the count of rows
  // kept. A late column's values at rows not kept are unspecified: the driver reads only the
  // kept rows. A format that cannot do this reads unit `i` with read() and calls `filter` and
  // `rows` on every whole batch in turn (the default), which gives the same rows.
  //
  // A format whose Format::staged_filter is set is also handed columns the filter reads but that
  // are not early: while `filter` runs, `more(column, kept)` decodes that column of the batch at (at
  // least) the rows still kept and returns it, so that each further predicate's column is decoded
  // only where the ones before left rows (ORC's decimals: stepped over elsewhere). Others get
  // every predicate's column as early and `more` is never called.
  using Materialize = std::function<arrow::Result<std::shared_ptr<arrow::ArrayData>>(int column, const Kept &rows)>;
  using FilterFn = std::function<arrow::Result<Kept>(const arrow::RecordBatch &early, const Materialize &more)>;
  using RowsFn = std::function<arrow::Status(const arrow::RecordBatch &all, size_t passed)>;
  virtual arrow::Status read_late(int64_t i, const std::vector<bool> &early, const FilterFn &filter,
                                  const RowsFn &rows) {
    (void)early;
    return read(i, [&](const arrow::RecordBatch &b) -> arrow::Status {
      ARROW_ASSIGN_OR_RAISE(Kept kept, filter(b, no_more()));
      return rows(b, kept.n);
    });
  }
  // The `more` of a read whose batches hold every column: never needed.
  static const Materialize &no_more() {
    static const Materialize m = [](int column, const Kept &) -> arrow::Result<std::shared_ptr<arrow::ArrayData>> {
      return arrow::Status::Invalid("column ", column, " of the batch was not decoded");
    };
    return m;
  }
};

// What late materialization saved, over the process (the `done` stats): rows whose late columns
// were skipped undecoded because no row of their batch passed the filter's first pass, and the
// pages (Parquet) or streams (ORC) of late columns never decompressed because none of their rows
// was needed.
inline std::atomic<uint64_t> g_late_rows_skipped{0};
inline std::atomic<uint64_t> g_late_chunks_skipped{0};
// Values of late columns stepped over undecoded in batches where some rows passed (a format that
// decodes them at the kept rows only: ORC's decimals).
inline std::atomic<uint64_t> g_late_values_skipped{0};

// A placeholder for a late column in the batch `filter` sees: `n` rows of type null.
std::shared_ptr<arrow::ArrayData> late_placeholder(int64_t n);

struct Format {
  const char *driver;     // "scan_orc", "scan_parquet"
  const char *name;       // "ORC", "Parquet": in messages
  const char *unit;       // "stripe", "row group": in messages
  const char *stats_key;  // "stripes", "row_groups": `done` stats keys <key>_total, <key>_skipped
  bool map_files;         // memory-map the files by default (Parquet: pages are decompressed
                          // straight from the mapping; ORC's reader copies every read anyway)
  // Open `path` read through `input`; a bad file is an error Status with the reason.
  arrow::Result<std::unique_ptr<ColumnarFile>> (*open)(const std::string &path,
                                                      std::shared_ptr<arrow::io::RandomAccessFile> input);
  const char *native_key = nullptr;  // `done` stats key counting units read natively, if any
  const char *late_chunk = "pages";  // what late materialization skips decompressing, in the
                                     // `done` stats key late_<late_chunk>_skipped
  // Only the first prefilter predicate's column is early; the filter asks for the others at the
  // rows still kept (ColumnarFile::read_late's `more`).
  bool staged_filter = false;
};

// The memory pool for everything a format allocates (readers, decompression buffers, arrays).
arrow::MemoryPool *pool();

// The process `main` of a columnar scan NCA.
int run(int argc, char **argv, const Format *format);

// A C++ exception out of a reader (Parquet's throw ParquetException) as a Status.
template <typename F>
arrow::Status guard(F &&f) {
  try {
    return f();
  } catch (const std::exception &e) {
    return arrow::Status::IOError(e.what());
  } catch (...) {
    return arrow::Status::UnknownError("unknown C++ exception");
  }
}

}  // namespace jgscan

#endif  // JG_SCAN_ARROW_H
