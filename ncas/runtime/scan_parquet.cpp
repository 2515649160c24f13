// Parquet scan NCA: the process `main` and the Parquet format of the columnar scan driver
// (scan_arrow.h).
//
// Rows come from Arrow's Parquet implementation: one row group is one unit, read as batches of
// `scan.batch_rows` rows with only the needed leaf columns, single-threaded (the NCA's workers are
// its parallelism). When every needed column is a flat fixed-width one (INT32, INT64, FLOAT,
// DOUBLE: integers, dates, decimals of up to 18 digits, floats), a row group is decoded straight
// from parquet's column readers (`ReadBatch`: dense values and definition levels) into Arrow
// arrays of the types parquet/arrow would give; that skips the record reader's level bitmaps,
// decimal transfers and allocations, about a quarter of the time of a scan like TPC-H Q6's. Every
// other row group goes through parquet/arrow's reader (`scan.parquet_direct 0`: always), where
// string columns whose pages are all dictionary-encoded are read as Arrow dictionaries (indices
// into the page dictionary; the driver decodes through them), which skips materialising every
// string. Row-group statistics come from the footer through parquet's own metadata classes,
// which already drop statistics known to be wrong for old writers.
#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/memory_pool.h>
#include <arrow/util/bit_util.h>
#include <parquet/arrow/reader.h>
#include <parquet/column_reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#include <parquet/schema.h>
#include <parquet/statistics.h>
#include <parquet/types.h>

#include <cstring>

#include "scan_arrow.h"

namespace {

using arrow::Status;
using jgscan::RawStats;
using jgscan::Tri;

// Big-endian two's complement (Parquet decimals in BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY).
bool be_decimal(const uint8_t *p, uint32_t n, __int128 *out) {
  if (n == 0 || n > 16) return false;
  unsigned __int128 v = (p[0] & 0x80) ? ~(unsigned __int128)0 : 0;
  for (uint32_t i = 0; i < n; i++) v = (v << 8) | p[i];
  *out = (__int128)v;
  return true;
}

class ParquetFile final : public jgscan::ColumnarFile {
 public:
  static arrow::Result<std::unique_ptr<jgscan::ColumnarFile>> open(const std::string &path,
                                                                   std::shared_ptr<arrow::io::RandomAccessFile> in) {
    (void)path;
    auto f = std::make_unique<ParquetFile>();
    f->in_ = in;
    std::unique_ptr<parquet::ParquetFileReader> pfr = parquet::ParquetFileReader::Open(in);
    f->md_ = pfr->metadata();
    parquet::ArrowReaderProperties props(false);
    props.set_smallest_decimal_enabled(true);  // decimal(p <= 18) as decimal32/64: no 128-bit copies
    ARROW_ASSIGN_OR_RAISE(f->reader_,
                          parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pfr), props));
    ARROW_RETURN_NOT_OK(f->reader_->GetSchema(&f->schema_));
    const auto &fields = f->reader_->manifest().schema_fields;
    for (const auto &sf : fields) f->leaves_.push_back(sf.is_leaf() ? sf.column_index : -1);
    int64_t row = 0;
    for (int i = 0; i < f->md_->num_row_groups(); i++) {
      auto rg = f->md_->RowGroup(i);
      f->units_.push_back({i, row, rg->num_rows(), rg->total_compressed_size()});
      row += rg->num_rows();
    }
    return std::unique_ptr<jgscan::ColumnarFile>(std::move(f));
  }

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  int64_t num_units() const override { return (int64_t)units_.size(); }
  jgscan::UnitInfo unit(int64_t i) const override { return units_[(size_t)i]; }

  RawStats stats(int64_t i, int field) override {
    RawStats r;
    int leaf = field >= 0 && (size_t)field < leaves_.size() ? leaves_[(size_t)field] : -1;
    if (leaf < 0) return r;
    auto rg = md_->RowGroup((int)i);
    auto cc = rg->ColumnChunk(leaf);
    std::shared_ptr<parquet::Statistics> st = cc->statistics();  // NULL when unset or untrusted
    if (!st) return r;
    if (st->HasNullCount()) {
      r.has_null = st->null_count() > 0 ? Tri::kYes : Tri::kNo;
      if (st->null_count() >= rg->num_rows()) r.has_value = Tri::kNo;
    }
    if (!st->HasMinMax()) return r;
    r.has_value = Tri::kYes;
    const parquet::ColumnDescriptor *d = md_->schema()->Column(leaf);
    const auto &lt = d->logical_type();
    bool plain = !lt || lt->is_none();
    switch (st->physical_type()) {
      case parquet::Type::BOOLEAN: {
        auto &s = static_cast<parquet::BoolStatistics &>(*st);
        r.kind = RawStats::kInt, r.imin = s.min(), r.imax = s.max();
        break;
      }
      case parquet::Type::INT32:
      case parquet::Type::INT64: {
        int64_t lo, hi;
        if (st->physical_type() == parquet::Type::INT32) {
          auto &s = static_cast<parquet::Int32Statistics &>(*st);
          lo = s.min(), hi = s.max();
        } else {
          auto &s = static_cast<parquet::Int64Statistics &>(*st);
          lo = s.min(), hi = s.max();
        }
        if (lt && lt->is_decimal()) {
          r.kind = RawStats::kDecimal, r.dmin = lo, r.dmax = hi;
          r.dscale = static_cast<const parquet::DecimalLogicalType &>(*lt).scale();
        } else if (plain || lt->is_date() ||
                   (lt->is_int() && static_cast<const parquet::IntLogicalType &>(*lt).is_signed())) {
          r.kind = RawStats::kInt, r.imin = lo, r.imax = hi;
        }
        break;
      }
      case parquet::Type::FLOAT: {
        auto &s = static_cast<parquet::FloatStatistics &>(*st);
        r.kind = RawStats::kDouble, r.fmin = s.min(), r.fmax = s.max();
        break;
      }
      case parquet::Type::DOUBLE: {
        auto &s = static_cast<parquet::DoubleStatistics &>(*st);
        r.kind = RawStats::kDouble, r.fmin = s.min(), r.fmax = s.max();
        break;
      }
      case parquet::Type::BYTE_ARRAY: {
        auto &s = static_cast<parquet::ByteArrayStatistics &>(*st);
        if (lt && lt->is_decimal()) {
          if (be_decimal(s.min().ptr, s.min().len, &r.dmin) && be_decimal(s.max().ptr, s.max().len, &r.dmax)) {
            r.kind = RawStats::kDecimal;
            r.dscale = static_cast<const parquet::DecimalLogicalType &>(*lt).scale();
          }
        } else if (plain || lt->is_string() || lt->is_enum() || lt->is_JSON()) {
          r.kind = RawStats::kBytes;
          r.smin.assign(reinterpret_cast<const char *>(s.min().ptr), s.min().len);
          r.smax.assign(reinterpret_cast<const char *>(s.max().ptr), s.max().len);
        }
        break;
      }
      case parquet::Type::FIXED_LEN_BYTE_ARRAY: {
        auto &s = static_cast<parquet::FLBAStatistics &>(*st);
        uint32_t n = (uint32_t)d->type_length();
        if (lt && lt->is_decimal() && be_decimal(s.min().ptr, n, &r.dmin) && be_decimal(s.max().ptr, n, &r.dmax)) {
          r.kind = RawStats::kDecimal;
          r.dscale = static_cast<const parquet::DecimalLogicalType &>(*lt).scale();
        }
        break;
      }
      default:
        break;
    }
    return r;
  }

  void configure(const jgr_proc *p) override {
    const char *v = jgr_param(p, "scan.parquet_direct");  // "0": always through parquet/arrow
    direct_allowed_ = !(v && strcmp(v, "0") == 0);
  }

  Status select(const std::vector<int> &fields, int64_t batch_rows) override {
    batch_rows_ = batch_rows;
    std::vector<std::shared_ptr<arrow::Field>> selected;
    direct_ = direct_allowed_;
    for (int field : fields) {
      selected.push_back(schema_->field(field));
      int leaf = leaves_[(size_t)field];
      if (leaf < 0 || !direct_column(*md_->schema()->Column(leaf), *schema_->field(field)->type())) direct_ = false;
    }
    batch_schema_ = arrow::schema(selected);
    parquet::ArrowReaderProperties props(/*use_threads=*/false);
    props.set_batch_size(batch_rows);
    props.set_pre_buffer(false);
    props.set_smallest_decimal_enabled(true);  // as in open(): the types prepare() planned for
    columns_.clear();
    for (int field : fields) {
      int leaf = leaves_[(size_t)field];
      if (leaf < 0) return Status::NotImplemented("field ", schema_->field(field)->name(), " is nested");
      columns_.push_back(leaf);
      if (all_dictionary_pages(leaf) && md_->schema()->Column(leaf)->physical_type() == parquet::Type::BYTE_ARRAY)
        props.set_read_dictionary(leaf, true);
    }
    // a reader with these properties, over the metadata already parsed
    std::unique_ptr<parquet::ParquetFileReader> pfr =
        parquet::ParquetFileReader::Open(in_, parquet::default_reader_properties(), md_);
    reader_.reset();
    ARROW_ASSIGN_OR_RAISE(reader_, parquet::arrow::FileReader::Make(arrow::default_memory_pool(), std::move(pfr), props));
    return Status::OK();
  }

  Status read(int64_t i, const std::function<Status(const arrow::RecordBatch &)> &on_batch) override {
    if (direct_) return read_direct(i, on_batch);
    ARROW_ASSIGN_OR_RAISE(auto rr, reader_->GetRecordBatchReader({(int)i}, columns_));
    int64_t got = 0;
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> b;
      ARROW_RETURN_NOT_OK(rr->ReadNext(&b));
      if (!b) break;
      got += b->num_rows();
      ARROW_RETURN_NOT_OK(on_batch(*b));
    }
    if (got != units_[(size_t)i].rows)
      return Status::Invalid("row group has ", got, " rows, the footer says ", units_[(size_t)i].rows);
    return Status::OK();
  }

 private:
  // Every data page of the column, in every row group, is dictionary-encoded: from the pages'
  // encoding statistics, or for writers that do not record them (DuckDB) from the chunk's list of
  // encodings, when it has a dictionary page and names no encoding but dictionary and level
  // encodings. Only a speed decision: parquet/arrow reads a plain page right either way.
  bool all_dictionary_pages(int leaf) const {
    using E = parquet::Encoding;
    for (int g = 0; g < md_->num_row_groups(); g++) {
      auto cc = md_->RowGroup(g)->ColumnChunk(leaf);
      const auto &es = cc->encoding_stats();
      if (es.empty()) {
        if (!cc->has_dictionary_page()) return false;
        for (auto e : cc->encodings())
          if (e != E::PLAIN_DICTIONARY && e != E::RLE_DICTIONARY && e != E::RLE && e != E::BIT_PACKED) return false;
        continue;
      }
      for (const auto &e : es) {
        bool data = e.page_type == parquet::PageType::DATA_PAGE || e.page_type == parquet::PageType::DATA_PAGE_V2;
        bool dict = e.encoding == parquet::Encoding::PLAIN_DICTIONARY || e.encoding == parquet::Encoding::RLE_DICTIONARY;
        if (data && !dict && e.count > 0) return false;
      }
    }
    return true;
  }

  // ---------------------------------------------------------------- the direct path

  // A flat column whose physical values are already the Arrow array's values.
  static bool direct_column(const parquet::ColumnDescriptor &d, const arrow::DataType &t) {
    if (d.max_repetition_level() != 0 || d.max_definition_level() > 1) return false;
    using T = arrow::Type;
    switch (d.physical_type()) {
      case parquet::Type::INT32:
        return t.id() == T::INT32 || t.id() == T::UINT32 || t.id() == T::DATE32 || t.id() == T::DECIMAL32;
      case parquet::Type::INT64:
        return t.id() == T::INT64 || t.id() == T::UINT64 || t.id() == T::DECIMAL64;
      case parquet::Type::FLOAT: return t.id() == T::FLOAT;
      case parquet::Type::DOUBLE: return t.id() == T::DOUBLE;
      default: return false;
    }
  }

  // Per column: its reader in the current row group and reusable buffers.
  struct Direct {
    std::shared_ptr<parquet::ColumnReader> reader;
    int16_t max_def = 0;
    int width = 0;
    std::shared_ptr<arrow::ResizableBuffer> values, validity;
    std::vector<int16_t> def;
  };

  template <typename R>
  static Status read_values(Direct &c, int64_t n, uint8_t *out, int64_t *nulls) {
    using T = typename R::T;
    auto *r = static_cast<R *>(c.reader.get());
    T *vals = reinterpret_cast<T *>(out);
    int16_t *def = c.max_def ? c.def.data() : nullptr;
    for (int64_t got = 0; got < n;) {
      int64_t nvals = 0;
      int64_t nlev = r->ReadBatch(n - got, def ? def + got : nullptr, nullptr, vals + got, &nvals);
      if (nlev <= 0) return Status::Invalid("column ", c.reader->descr()->name(), " ended early");
      if (def && nvals < nlev) {  // spread the dense values over the non-NULL rows, backwards
        int64_t v = nvals - 1;
        for (int64_t j = nlev - 1; j >= 0; j--) vals[got + j] = def[got + j] == c.max_def ? vals[got + v--] : T{};
        *nulls += nlev - nvals;
      }
      got += nlev;
    }
    return Status::OK();
  }

  Status read_direct(int64_t i, const std::function<Status(const arrow::RecordBatch &)> &on_batch) {
    std::shared_ptr<parquet::RowGroupReader> rg = reader_->parquet_reader()->RowGroup((int)i);
    direct_cols_.resize(columns_.size());
    for (size_t k = 0; k < columns_.size(); k++) {
      Direct &c = direct_cols_[k];
      c.reader = rg->Column(columns_[k]);
      c.max_def = c.reader->descr()->max_definition_level();
      parquet::Type::type pt = c.reader->descr()->physical_type();
      c.width = pt == parquet::Type::INT64 || pt == parquet::Type::DOUBLE ? 8 : 4;
      if (!c.values) {
        ARROW_ASSIGN_OR_RAISE(c.values, arrow::AllocateResizableBuffer(batch_rows_ * 8));
        ARROW_ASSIGN_OR_RAISE(c.validity, arrow::AllocateResizableBuffer(arrow::bit_util::BytesForBits(batch_rows_)));
        c.def.resize((size_t)batch_rows_);
      }
    }
    const int64_t rows = units_[(size_t)i].rows;
    std::vector<std::shared_ptr<arrow::ArrayData>> arrays(columns_.size());
    for (int64_t pos = 0; pos < rows;) {
      int64_t n = std::min(batch_rows_, rows - pos);
      for (size_t k = 0; k < columns_.size(); k++) {
        Direct &c = direct_cols_[k];
        int64_t nulls = 0;
        uint8_t *out = c.values->mutable_data();
        switch (c.reader->descr()->physical_type()) {
          case parquet::Type::INT32: ARROW_RETURN_NOT_OK(read_values<parquet::Int32Reader>(c, n, out, &nulls)); break;
          case parquet::Type::INT64: ARROW_RETURN_NOT_OK(read_values<parquet::Int64Reader>(c, n, out, &nulls)); break;
          case parquet::Type::FLOAT: ARROW_RETURN_NOT_OK(read_values<parquet::FloatReader>(c, n, out, &nulls)); break;
          case parquet::Type::DOUBLE: ARROW_RETURN_NOT_OK(read_values<parquet::DoubleReader>(c, n, out, &nulls)); break;
          default: return Status::NotImplemented("direct read of ", c.reader->descr()->name());
        }
        std::shared_ptr<arrow::Buffer> valid;
        if (nulls) {
          uint8_t *bits = c.validity->mutable_data();
          memset(bits, 0, (size_t)arrow::bit_util::BytesForBits(n));
          for (int64_t j = 0; j < n; j++)
            if (c.def[(size_t)j] == c.max_def) arrow::bit_util::SetBit(bits, j);
          valid = c.validity;
        }
        arrays[k] = arrow::ArrayData::Make(batch_schema_->field((int)k)->type(), n, {valid, c.values}, nulls);
      }
      ARROW_RETURN_NOT_OK(on_batch(*arrow::RecordBatch::Make(batch_schema_, n, arrays)));
      pos += n;
    }
    for (Direct &c : direct_cols_) c.reader.reset();
    return Status::OK();
  }

  std::shared_ptr<arrow::io::RandomAccessFile> in_;
  std::shared_ptr<parquet::FileMetaData> md_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<int> leaves_;   // leaf column of each top-level field, -1 when nested
  std::vector<int> columns_;  // leaves to read
  std::vector<jgscan::UnitInfo> units_;
  std::shared_ptr<arrow::Schema> batch_schema_;  // the fields read, in order
  int64_t batch_rows_ = 8192;
  bool direct_ = false;        // every needed column can be decoded directly
  bool direct_allowed_ = true;
  std::vector<Direct> direct_cols_;
};

const jgscan::Format kParquet = {"scan_parquet", "Parquet", "row group", "row_groups", ParquetFile::open};

}  // namespace

int main(int argc, char **argv) { return jgscan::run(argc, argv, &kParquet); }
