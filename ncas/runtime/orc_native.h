// ORC file structure for the ORC scan NCA (scan_orc.cpp): a small protobuf wire-format reader for
// the file tail, ORC's chunked compression on Arrow's codecs, and a native reader of stripes for
// the common flat column kinds (orc_native.cpp).
//
// The native reader decodes ORC's streams itself — integers (RLE v1 and v2), dates, decimals of up
// to 18 digits, floats, booleans, strings, PRESENT streams — straight into Arrow arrays of the
// types Arrow's ORC adapter produces for the same fields (STRING and VARCHAR: utf8; BINARY:
// binary), so the rest of the driver plans and reads them alike. Strings in DIRECT encoding come
// as string arrays over the stripe's DATA stream; dictionary-encoded ones (DICTIONARY, V2) as
// dictionary<int32, utf8> arrays sharing the stripe's dictionary, which the driver consumes by
// index (its prefilter tests each entry once). It skips the adapter's detour through ORC's own
// vector batches (decimals then go through a Decimal128 builder one value at a time, strings are
// copied one at a time). A stripe it does not handle (CHAR, which the adapter reads as fixed-size
// binary; nested fields; other encodings) is read through the adapter instead.
#ifndef JG_ORC_NATIVE_H
#define JG_ORC_NATIVE_H

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/io/interfaces.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/status.h>
#include <arrow/type_fwd.h>

namespace jgorc {

// ------------------------------------------------------------------ protobuf, the little we need

// Fields of one protobuf message; never reads outside it, and a malformed message makes ok() false.
class Pb {
 public:
  explicit Pb(std::string_view b) : p_(reinterpret_cast<const uint8_t *>(b.data())), e_(p_ + b.size()) {}
  bool ok() const { return ok_; }
  bool more() const { return ok_ && p_ < e_; }
  // The next field; false at the end or on malformed input.
  bool next(uint32_t *field, uint32_t *wire) {
    if (!ok_ || p_ >= e_) return false;
    uint64_t k = varint();
    *field = (uint32_t)(k >> 3);
    *wire = (uint32_t)(k & 7);
    return ok_;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= e_) break;
      uint8_t b = *p_++;
      v |= (uint64_t)(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  int64_t zigzag() {
    uint64_t v = varint();
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (!ok_ || n > (uint64_t)(e_ - p_)) {
      ok_ = false;
      return {};
    }
    std::string_view s(reinterpret_cast<const char *>(p_), (size_t)n);
    p_ += n;
    return s;
  }
  double dbl() {
    if (e_ - p_ < 8) {
      ok_ = false;
      return 0;
    }
    double d;
    memcpy(&d, p_, 8);
    p_ += 8;
    return d;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case 0: varint(); break;
      case 1: p_ = e_ - p_ >= 8 ? p_ + 8 : (ok_ = false, e_); break;
      case 2: bytes(); break;
      case 5: p_ = e_ - p_ >= 4 ? p_ + 4 : (ok_ = false, e_); break;
      default: ok_ = false;
    }
  }

 private:
  const uint8_t *p_, *e_;
  bool ok_ = true;
};

// ------------------------------------------------------------------ compression

enum OrcCompression { kNone = 0, kZlib = 1, kSnappy = 2, kLzo = 3, kLz4 = 4, kZstd = 5 };

// Decompress a whole ORC-framed section (the file tail's parts) into a string.
arrow::Result<std::string> decompress(std::string_view in, int kind, uint64_t block);

// ------------------------------------------------------------------ the native reader

// The rows of a batch a late read's filter kept: `n`, at `rows[0..n)` ascending, or the first n
// when `rows` is null (jgscan::Kept, which the scan driver gives).
struct Kept {
  size_t n = 0;
  const uint32_t *rows = nullptr;
};

class NativeFile {
 public:
  virtual ~NativeFile() = default;
  // Parse the file tail. An error means "read this file through the adapter".
  static arrow::Result<std::unique_ptr<NativeFile>> open(std::shared_ptr<arrow::io::RandomAccessFile> in);
  // Can top-level field `field`, which the adapter reads as Arrow type `t`, be decoded here?
  virtual bool supports(int field, const arrow::DataType &t) const = 0;
  virtual int64_t num_stripes() const = 0;
  virtual int64_t stripe_rows(int64_t stripe) const = 0;
  // Read top-level fields `fields` of stripe `stripe` as batches of at most `batch_rows` rows of
  // `schema` (the fields' names and Arrow types). *handled is false when the stripe's encodings
  // are not ones decoded here (then nothing was read and the caller reads it otherwise); a
  // malformed stripe is an error.
  virtual arrow::Status read(int64_t stripe, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
                             int64_t batch_rows, const std::function<arrow::Status(const arrow::RecordBatch &)> &on_batch,
                             bool *handled) = 0;
  // The same with late materialization (jgscan::ColumnarFile::read_late): per batch the fields
  // marked in `early` are decoded and `filter` sees them (the others as null placeholders) and
  // says which rows it keeps; the others are decoded only for a batch in which some row passed,
  // else skipped, and the streams of a field none of whose rows in the stripe is needed are never
  // read nor decompressed. In a batch where few rows passed, a late decimal column (varints)
  // without NULLs is decoded at those rows only, the varints between them stepped over; its
  // values at the other rows are then unspecified.
  // `filter` may also ask for a field that is not early, at the rows it still keeps (`more`, as
  // jgscan::ColumnarFile::read_late describes): the further predicates' columns.
  using Materialize = std::function<arrow::Result<std::shared_ptr<arrow::ArrayData>>(int field, const Kept &rows)>;
  using FilterFn = std::function<arrow::Result<Kept>(const arrow::RecordBatch &, const Materialize &more)>;
  using RowsFn = std::function<arrow::Status(const arrow::RecordBatch &, size_t)>;
  virtual arrow::Status read_late(int64_t stripe, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
                                  int64_t batch_rows, const std::vector<bool> &early, const FilterFn &filter,
                                  const RowsFn &rows, bool *handled) = 0;
};

}  // namespace jgorc

#endif  // JG_ORC_NATIVE_H
