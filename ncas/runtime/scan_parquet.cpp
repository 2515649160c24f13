// Parquet scan NCA: the process `main` and the Parquet format of the columnar scan driver
// (scan_arrow.h).
//
// Rows come from Arrow's Parquet implementation: one row group is one unit, read as batches of
// at most `scan.batch_rows` rows with only the needed leaf columns, single-threaded (the NCA's
// workers are its parallelism). When every needed column is a flat fixed-width one (INT32, INT64,
// FLOAT, DOUBLE: integers, dates, decimals of up to 18 digits, floats) or a string column that is
// dictionary-encoded throughout the row group, the row group is read page by page from parquet's
// page readers (Snappy pages raw and decompressed here with libsnappy, jg_snappy.h; the levels and
// values decoded here with parquet's decoders), and a batch ends where the first of the columns'
// current pages ends, so that it never spans a page: PLAIN values are handed to the driver in place
// in the page, and dictionary-encoded values as int32 indices into the chunk's dictionary (an Arrow
// dictionary array), so that the row prefilter tests each dictionary entry once and only the rows
// that pass are ever looked up; definition levels are not decoded where the chunk's statistics
// count no NULL. Against decoding every value through parquet/arrow's record reader this halves the
// work besides decompression in a scan like TPC-H Q6's. Every other row group goes through
// parquet/arrow's reader (`scan.parquet_direct 0`: always), where string columns whose pages are
// all dictionary-encoded are read as Arrow dictionaries (indices into the page dictionary; the
// driver decodes through them), which skips materialising every string. Row-group statistics come
// from the footer through parquet's own metadata classes, which already drop statistics known to
// be wrong for old writers.
#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/memory_pool.h>
#include <arrow/util/bit_util.h>
#include <parquet/arrow/reader.h>
#include <parquet/column_page.h>
#include <parquet/column_reader.h>
#include <parquet/encoding.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>
#include <parquet/schema.h>
#include <parquet/statistics.h>
#include <parquet/types.h>

#include <cstring>

#include "jg_snappy.h"
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

// Decompression buffers and page reads from the scan's pool.
parquet::ReaderProperties reader_props() { return parquet::ReaderProperties(jgscan::pool()); }

class ParquetFile final : public jgscan::ColumnarFile {
 public:
  static arrow::Result<std::unique_ptr<jgscan::ColumnarFile>> open(const std::string &path,
                                                                   std::shared_ptr<arrow::io::RandomAccessFile> in) {
    (void)path;
    auto f = std::make_unique<ParquetFile>();
    f->in_ = in;
    std::unique_ptr<parquet::ParquetFileReader> pfr = parquet::ParquetFileReader::Open(in, reader_props());
    f->md_ = pfr->metadata();
    parquet::ArrowReaderProperties props(false);
    props.set_smallest_decimal_enabled(true);  // decimal(p <= 18) as decimal32/64: no 128-bit copies
    ARROW_ASSIGN_OR_RAISE(f->reader_,
                          parquet::arrow::FileReader::Make(jgscan::pool(), std::move(pfr), props));
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
        parquet::ParquetFileReader::Open(in_, reader_props(), md_);
    reader_.reset();
    ARROW_ASSIGN_OR_RAISE(reader_, parquet::arrow::FileReader::Make(jgscan::pool(), std::move(pfr), props));
    return Status::OK();
  }

  bool last_read_native() const override { return last_direct_; }

  Status read(int64_t i, const std::function<Status(const arrow::RecordBatch &)> &on_batch) override {
    last_direct_ = direct_ && direct_group(i);
    if (last_direct_) return read_direct(i, nullptr, on_batch, nullptr, nullptr);
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

  // Late materialization on the direct path (parquet/arrow's reader decodes every column).
  Status read_late(int64_t i, const std::vector<bool> &early, const FilterFn &filter, const RowsFn &rows) override {
    last_direct_ = direct_ && direct_group(i);
    if (!last_direct_) return ColumnarFile::read_late(i, early, filter, rows);
    return read_direct(i, &early, nullptr, &filter, &rows);
  }

 private:
  // Every data page of the column, in every row group, is dictionary-encoded: from the pages'
  // encoding statistics, or for writers that do not record them (DuckDB) from the chunk's list of
  // encodings, when it has a dictionary page and names no encoding but dictionary and level
  // encodings. Only a speed decision: parquet/arrow reads a plain page right either way.
  bool all_dictionary_pages(int leaf) const {
    for (int g = 0; g < md_->num_row_groups(); g++)
      if (!dictionary_pages(g, leaf)) return false;
    return true;
  }
  // The same for row group g alone.
  bool dictionary_pages(int g, int leaf) const {
    using E = parquet::Encoding;
    auto cc = md_->RowGroup(g)->ColumnChunk(leaf);
    const auto &es = cc->encoding_stats();
    if (es.empty()) {
      if (!cc->has_dictionary_page()) return false;
      for (auto e : cc->encodings())
        if (e != E::PLAIN_DICTIONARY && e != E::RLE_DICTIONARY && e != E::RLE && e != E::BIT_PACKED) return false;
      return true;
    }
    for (const auto &e : es) {
      bool data = e.page_type == parquet::PageType::DATA_PAGE || e.page_type == parquet::PageType::DATA_PAGE_V2;
      bool dict = e.encoding == parquet::Encoding::PLAIN_DICTIONARY || e.encoding == parquet::Encoding::RLE_DICTIONARY;
      if (data && !dict && e.count > 0) return false;
    }
    return true;
  }

  // The direct path reads row group g: its string columns are dictionary-encoded throughout.
  bool direct_group(int64_t g) const {
    for (int leaf : columns_)
      if (md_->schema()->Column(leaf)->physical_type() == parquet::Type::BYTE_ARRAY && !dictionary_pages((int)g, leaf))
        return false;
    return true;
  }

  // ---------------------------------------------------------------- the direct path

  // A flat column whose physical values are already the Arrow array's values, or a string column
  // (read as indices into its dictionary, in the row groups where it is dictionary-encoded).
  static bool direct_column(const parquet::ColumnDescriptor &d, const arrow::DataType &t) {
    if (d.max_repetition_level() != 0 || d.max_definition_level() > 1) return false;
    using T = arrow::Type;
    switch (d.physical_type()) {
      case parquet::Type::BYTE_ARRAY: {
        const auto &lt = d.logical_type();
        return (t.id() == T::STRING || t.id() == T::BINARY) && !(lt && lt->is_decimal());
      }
      case parquet::Type::INT32:
        return t.id() == T::INT32 || t.id() == T::UINT32 || t.id() == T::DATE32 || t.id() == T::DECIMAL32;
      case parquet::Type::INT64:
        return t.id() == T::INT64 || t.id() == T::UINT64 || t.id() == T::DECIMAL64;
      case parquet::Type::FLOAT: return t.id() == T::FLOAT;
      case parquet::Type::DOUBLE: return t.id() == T::DOUBLE;
      default: return false;
    }
  }

  // Per column: its pages in the current row group, what is left of the current data page, the
  // chunk's dictionary and reusable buffers.
  struct Direct {
    std::unique_ptr<parquet::PageReader> pages;
    const parquet::ColumnDescriptor *descr = nullptr;
    std::shared_ptr<arrow::DataType> type, dict_type;  // the values' Arrow type; dictionary<int32, type>
    int width = 0;                                     // bytes per value (strings: 0)
    bool strings = false;                              // BYTE_ARRAY: dictionary indices only
    int16_t max_def = 0;
    bool no_nulls = false;  // the chunk's statistics count no NULL: its levels need no decoding
    bool levels = false;    // the current page's levels are decoded
    std::shared_ptr<parquet::Page> page;  // the current data page; its bytes live until the next
    int64_t left = 0;                     // its rows not yet read
    bool pending = false;                 // a late column's page not decompressed yet (open_page)
    int64_t pending_skip = 0;             // its rows skipped while pending
    parquet::Encoding::type enc = parquet::Encoding::PLAIN;
    const uint8_t *plain = nullptr, *plain_end = nullptr;  // PLAIN: the values not yet read
    std::unique_ptr<parquet::LevelDecoder> def_dec = std::make_unique<parquet::LevelDecoder>();  // not movable itself
    std::unique_ptr<parquet::Decoder> dict_dec;   // DictDecoder<the column's type>, once a dictionary page came
    std::shared_ptr<arrow::ArrayData> dict;       // the dictionary's values as an Arrow array
    std::unique_ptr<parquet::Decoder> other_dec;  // any other encoding (DELTA_BINARY_PACKED, BYTE_STREAM_SPLIT)
    parquet::Encoding::type other_enc = parquet::Encoding::UNKNOWN;
    std::shared_ptr<arrow::ResizableBuffer> values, indices, validity;
    std::vector<int16_t> def;
    // Snappy chunks: pages come raw (as stored) and are decompressed here with libsnappy into
    // `unpacked`, reused from page to page and row group to row group; `unpacked_max` bounds what
    // a page may claim to decompress to (the chunk's uncompressed size from the footer).
    bool snappy = false;
    std::shared_ptr<arrow::ResizableBuffer> unpacked;
    int64_t unpacked_max = 0;
  };

  // Decompress `n` Snappy bytes of column c's current page into c.unpacked, which must come out
  // exactly `expect` bytes long (the page header's count).
  static arrow::Result<const uint8_t *> unsnappy(Direct &c, const uint8_t *p, int64_t n, int64_t expect) {
    if (expect < 0 || expect > c.unpacked_max)
      return Status::Invalid("column ", c.descr->name(), ": a page claims ", expect, " bytes uncompressed, its chunk ",
                             c.unpacked_max);
    if (expect == 0) return p;  // e.g. a V2 page of NULLs only: no values section to decompress
    if (c.unpacked->size() < expect) ARROW_RETURN_NOT_OK(c.unpacked->Resize(expect, /*shrink_to_fit=*/false));
    arrow::Result<size_t> got = jgscan::snappy_decompress(p, (size_t)n, c.unpacked->mutable_data(), (size_t)expect);
    if (!got.ok()) return Status::Invalid("column ", c.descr->name(), ": ", got.status().message());
    if ((int64_t)*got != expect)
      return Status::Invalid("column ", c.descr->name(), ": a page decompressed to ", *got, " bytes, its header says ", expect);
    return c.unpacked->data();
  }

  // Column chunk `leaf` of row group `g` as a page reader. Snappy chunks (unless `scan.libsnappy 0`) are
  // read without Arrow's decompression (next_page decompresses them); the byte range is the one
  // parquet's own RowGroupReader computes, with its bounds checks. Old parquet-mr files, whose
  // ranges need padding, encrypted files and old parquet-cpp V2 pages stay with parquet's reader.
  arrow::Result<std::unique_ptr<parquet::PageReader>> open_pages(parquet::RowGroupReader &rg, int g, int leaf, Direct &c) {
    auto cc = md_->RowGroup(g)->ColumnChunk(leaf);
    const parquet::ApplicationVersion &wv = md_->writer_version();
    c.snappy = jgscan::g_libsnappy && cc->compression() == arrow::Compression::SNAPPY && !md_->is_encryption_algorithm_set() &&
               !wv.VersionLt(parquet::ApplicationVersion::PARQUET_816_FIXED_VERSION()) &&
               !wv.VersionLt(parquet::ApplicationVersion::PARQUET_CPP_10353_FIXED_VERSION());
    if (!c.snappy) return rg.GetColumnPageReader(leaf);
    int64_t start = cc->data_page_offset(), length = cc->total_compressed_size();
    if (cc->has_dictionary_page() && cc->dictionary_page_offset() > 0 && start > cc->dictionary_page_offset())
      start = cc->dictionary_page_offset();
    ARROW_ASSIGN_OR_RAISE(int64_t file_size, in_->GetSize());
    if (start < 0 || length < 0 || start > file_size || length > file_size - start)
      return Status::Invalid("column ", c.descr->name(), " of row group ", g, ": its chunk (", length, " bytes at ", start,
                             ") lies outside the file (", file_size, " bytes)");
    c.unpacked_max = cc->total_uncompressed_size();
    if (!c.unpacked) {
      ARROW_ASSIGN_OR_RAISE(c.unpacked, arrow::AllocateResizableBuffer(0, jgscan::pool()));
    }
    parquet::ReaderProperties props = reader_props();
    return parquet::PageReader::Open(props.GetStream(in_, start, length), cc->num_values(),
                                     arrow::Compression::UNCOMPRESSED, props, *c.descr);
  }

  template <typename DType>
  Status set_dictionary(Direct &c, int32_t num_values, const uint8_t *data, int64_t size) {
    using T = typename DType::c_type;
    auto plain = parquet::MakeTypedDecoder<DType>(parquet::Encoding::PLAIN, c.descr, jgscan::pool());
    plain->SetData(num_values, data, (int)size);
    auto dd = parquet::MakeDictDecoder<DType>(c.descr, jgscan::pool());
    dd->SetDict(plain.get());
    const T *vals = nullptr;
    int32_t n = 0;
    dd->GetDictionary(&vals, &n);
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buf, arrow::AllocateBuffer((int64_t)n * c.width, jgscan::pool()));
    if (n) memcpy(buf->mutable_data(), vals, (size_t)n * (size_t)c.width);
    c.dict = arrow::ArrayData::Make(c.type, n, {nullptr, std::move(buf)}, 0);
    c.dict_dec = std::move(dd);
    return Status::OK();
  }

  // A string column's dictionary: its values (which parquet's dictionary decoder copies out of the
  // page, reused by the next page's decompression) as an Arrow string array.
  Status set_string_dictionary(Direct &c, int32_t num_values, const uint8_t *data, int64_t size) {
    if (num_values < 0) return Status::Invalid("column ", c.descr->name(), ": bad dictionary size");
    auto plain = parquet::MakeTypedDecoder<parquet::ByteArrayType>(parquet::Encoding::PLAIN, c.descr, jgscan::pool());
    plain->SetData(num_values, data, (int)size);
    auto dd = parquet::MakeDictDecoder<parquet::ByteArrayType>(c.descr, jgscan::pool());
    dd->SetDict(plain.get());
    const parquet::ByteArray *vals = nullptr;
    int32_t n = 0;
    dd->GetDictionary(&vals, &n);
    int64_t bytes = 0;
    for (int32_t k = 0; k < n; k++) bytes += vals[k].len;  // each within the page: at most its size in all
    if (bytes > INT32_MAX) return Status::Invalid("column ", c.descr->name(), ": dictionary over 2 GiB");
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> offsets, arrow::AllocateBuffer(((int64_t)n + 1) * 4, jgscan::pool()));
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> chars, arrow::AllocateBuffer(bytes, jgscan::pool()));
    auto *off = reinterpret_cast<int32_t *>(offsets->mutable_data());
    uint8_t *at = chars->mutable_data();
    int32_t o = 0;
    for (int32_t k = 0; k < n; k++) {
      off[k] = o;
      if (vals[k].len) memcpy(at + o, vals[k].ptr, vals[k].len);
      o += (int32_t)vals[k].len;
    }
    off[n] = o;
    c.dict = arrow::ArrayData::Make(c.type, n, {nullptr, std::move(offsets), std::move(chars)}, 0);
    c.dict_dec = std::move(dd);
    return Status::OK();
  }

  template <typename DType>
  static Status set_other(Direct &c, parquet::Encoding::type enc) {
    if (c.other_enc != enc) {
      c.other_dec = parquet::MakeTypedDecoder<DType>(enc, c.descr, jgscan::pool());
      c.other_enc = enc;
    }
    return Status::OK();
  }

  template <typename F>
  static Status by_type(const Direct &c, F &&f) {
    switch (c.descr->physical_type()) {
      case parquet::Type::INT32: return f(parquet::Int32Type{});
      case parquet::Type::INT64: return f(parquet::Int64Type{});
      case parquet::Type::FLOAT: return f(parquet::FloatType{});
      case parquet::Type::DOUBLE: return f(parquet::DoubleType{});
      case parquet::Type::BYTE_ARRAY: return f(parquet::ByteArrayType{});  // dictionary indices only
      default: return Status::NotImplemented("direct read of ", c.descr->name());
    }
  }

  // Move to the column's next data page (taking in a dictionary page on the way). With `defer`
  // (a late column) a Snappy page is only noted: open_page() decompresses it when a row of it is
  // first needed, and a page none of whose rows is needed is never decompressed.
  Status next_page(Direct &c, bool defer = false) {
    using E = parquet::Encoding;
    for (;;) {
      std::shared_ptr<parquet::Page> p = c.pages->NextPage();
      if (!p) return Status::Invalid("column ", c.descr->name(), " ended early");
      if (p->type() == parquet::PageType::DICTIONARY_PAGE) {
        const auto &dp = static_cast<const parquet::DictionaryPage &>(*p);
        if (dp.encoding() != E::PLAIN && dp.encoding() != E::PLAIN_DICTIONARY)
          return Status::NotImplemented("dictionary page encoding ", parquet::EncodingToString(dp.encoding()));
        const uint8_t *values = dp.data();
        int64_t size = dp.size();
        if (c.snappy) {  // the header's uncompressed size is not kept in a DictionaryPage: Snappy's own
          ARROW_ASSIGN_OR_RAISE(size_t n, jgscan::snappy_length(values, (size_t)size));
          ARROW_ASSIGN_OR_RAISE(values, unsnappy(c, values, size, (int64_t)std::min<size_t>(n, INT64_MAX)));
          size = (int64_t)n;
        }
        if (c.strings) {
          ARROW_RETURN_NOT_OK(set_string_dictionary(c, dp.num_values(), values, size));
        } else {
          ARROW_RETURN_NOT_OK(by_type(c, [&](auto t) { return set_dictionary<decltype(t)>(c, dp.num_values(), values, size); }));
        }
        continue;
      }
      if (p->type() != parquet::PageType::DATA_PAGE && p->type() != parquet::PageType::DATA_PAGE_V2) continue;  // index pages
      const auto &dp = static_cast<const parquet::DataPage &>(*p);
      int32_t nv = dp.num_values();
      if (nv <= 0) continue;
      c.page = std::move(p);
      c.left = nv;
      c.pending = defer && c.snappy;
      c.pending_skip = 0;
      if (c.pending) return Status::OK();
      return open_page(c);
    }
  }

  // Decompress column c's current data page (c.page) and set up its levels and values decoders.
  Status open_page(Direct &c) {
    using E = parquet::Encoding;
    const auto &dp = static_cast<const parquet::DataPage &>(*c.page);
    const bool v2 = c.page->type() == parquet::PageType::DATA_PAGE_V2;
    const int32_t nv = dp.num_values();
    {
      const uint8_t *data = dp.data();
      int64_t size = dp.size();
      if (c.snappy && !v2) {
        ARROW_ASSIGN_OR_RAISE(data, unsnappy(c, data, size, dp.uncompressed_size()));
        size = dp.uncompressed_size();
      }
      c.enc = dp.encoding();
      c.levels = c.max_def > 0;
      if (!v2) {
        if (c.max_def > 0) {
          const auto &v1 = static_cast<const parquet::DataPageV1 &>(dp);
          int used = c.def_dec->SetData(v1.definition_level_encoding(), c.max_def, nv, data, (int32_t)size);
          if (used < 0 || used > size) return Status::Invalid("bad definition levels in ", c.descr->name());
          data += used, size -= used;
          // no NULL by the statistics, and for PLAIN a value for every level: the levels can only
          // say "present" and are not read (about a tenth of the decoding)
          c.levels = !(c.no_nulls && (c.enc != E::PLAIN || size == (int64_t)nv * c.width));
        }
      } else {
        const auto &v2p = static_cast<const parquet::DataPageV2 &>(dp);
        int64_t rl = v2p.repetition_levels_byte_length(), dl = v2p.definition_levels_byte_length();
        if (rl < 0 || dl < 0 || rl + dl > size) return Status::Invalid("bad level sizes in ", c.descr->name());
        if (c.max_def > 0) c.def_dec->SetDataV2((int32_t)dl, c.max_def, nv, data + rl);
        data += rl + dl, size -= rl + dl;
        c.levels = c.max_def > 0 && v2p.num_nulls() != 0;  // V2 pages count their NULLs
        if (c.snappy && v2p.is_compressed()) {  // the levels are never compressed, the values are
          int64_t expect = dp.uncompressed_size() - rl - dl;
          ARROW_ASSIGN_OR_RAISE(data, unsnappy(c, data, size, expect));
          size = expect;
        }
      }
      if (c.strings && c.enc != E::PLAIN_DICTIONARY && c.enc != E::RLE_DICTIONARY)
        return Status::Invalid("column ", c.descr->name(), ": a ", parquet::EncodingToString(c.enc),
                               " page where the footer lists only dictionary encodings");
      if (c.enc == E::PLAIN) {
        c.plain = data, c.plain_end = data + size;
      } else if (c.enc == E::PLAIN_DICTIONARY || c.enc == E::RLE_DICTIONARY) {
        if (!c.dict_dec) return Status::Invalid("column ", c.descr->name(), ": dictionary-encoded page without a dictionary");
        c.dict_dec->SetData(nv, data, (int)size);
      } else {
        ARROW_RETURN_NOT_OK(by_type(c, [&](auto t) { return set_other<decltype(t)>(c, c.enc); }));
        c.other_dec->SetData(nv, data, (int)size);
      }
      return Status::OK();
    }
  }

  // A late column's deferred page, decompressed now that one of its rows is needed, and moved
  // past the rows skipped before that.
  Status ensure_open(Direct &c) {
    if (!c.pending) return Status::OK();
    c.pending = false;
    ARROW_RETURN_NOT_OK(open_page(c));
    for (int64_t done = 0; done < c.pending_skip;) {
      int64_t m = std::min(batch_rows_, c.pending_skip - done);
      ARROW_RETURN_NOT_OK(skip_values(c, m));
      done += m;
    }
    c.pending_skip = 0;
    return Status::OK();
  }

  // Skip the next n rows of column c (all in its current page) without building an array: a
  // deferred page only counts them (it is never decompressed if no later row of it is needed).
  Status skip_rows(Direct &c, int64_t n) {
    c.left -= n;
    if (c.pending) {
      c.pending_skip += n;
      if (c.left == 0) g_late_pages_skipped(), c.pending = false;
      return Status::OK();
    }
    return skip_values(c, n);
  }

  static void g_late_pages_skipped() { jgscan::g_late_chunks_skipped.fetch_add(1, std::memory_order_relaxed); }

  // Move column c's decoders past its next n rows (n <= batch_rows_), decoding into scratch only
  // what cannot be stepped over: levels (to count the values present), dictionary indices and
  // other encodings' values; PLAIN values are stepped over.
  Status skip_values(Direct &c, int64_t n) {
    using E = parquet::Encoding;
    int64_t dense = n;
    if (c.levels) {
      if (c.def_dec->Decode((int)n, c.def.data()) != n) return Status::Invalid("column ", c.descr->name(), ": levels ended early");
      dense = count_eq(c.def.data(), n, c.max_def);
    }
    if (c.enc == E::PLAIN_DICTIONARY || c.enc == E::RLE_DICTIONARY) {
      auto *idx = reinterpret_cast<int32_t *>(c.indices->mutable_data());
      return by_type(c, [&](auto t) {
        auto *dd = dynamic_cast<parquet::DictDecoder<decltype(t)> *>(c.dict_dec.get());
        if (!dd || dd->DecodeIndices((int)dense, idx) != dense)
          return Status::Invalid("column ", c.descr->name(), ": dictionary indices ended early");
        return Status::OK();
      });
    }
    if (c.enc == E::PLAIN) {
      int64_t bytes = dense * c.width;
      if (c.plain_end - c.plain < bytes) return Status::Invalid("column ", c.descr->name(), ": page ended early");
      c.plain += bytes;
      return Status::OK();
    }
    return by_type(c, [&](auto t) {
      using DType = decltype(t);
      auto *d = dynamic_cast<parquet::TypedDecoder<DType> *>(c.other_dec.get());
      auto *v = reinterpret_cast<typename DType::c_type *>(c.values->mutable_data());
      if (!d || d->Decode(v, (int)dense) != dense) return Status::Invalid("column ", c.descr->name(), ": values ended early");
      return Status::OK();
    });
  }

  // Written in blocks of a fixed count so that the compiler vectorizes them at -O2.
  static int64_t count_eq(const int16_t *v, int64_t n, int16_t x) {
    int64_t total = 0, j = 0;
    for (; j + 64 <= n; j += 64) {
      int block = 0;
      for (int k = 0; k < 64; k++) block += v[j + k] == x;
      total += block;
    }
    for (; j < n; j++) total += v[j] == x;
    return total;
  }
  static bool all_below(const int32_t *v, int64_t n, uint32_t limit) {
    uint32_t bad = 0;
    int64_t j = 0;
    for (; j + 64 <= n; j += 64)
      for (int k = 0; k < 64; k++) bad |= (uint32_t)v[j + k] >= limit;
    for (; j < n; j++) bad |= (uint32_t)v[j] >= limit;
    return !bad;
  }

  // Spread `dense` values at the front of `v` over the non-NULL rows of def[0..n), backwards.
  template <typename T>
  static void spread(T *v, const int16_t *def, int16_t max_def, int64_t n, int64_t dense) {
    int64_t k = dense - 1;
    for (int64_t j = n - 1; j >= 0; j--) v[j] = def[j] == max_def ? v[k--] : T{};
  }

  // The next n rows of column c (all in its current page) as an Arrow array: PLAIN values in
  // place in the page, dictionary-encoded ones as indices into the chunk's dictionary.
  Status read_rows(Direct &c, int64_t n, std::shared_ptr<arrow::ArrayData> *out) {
    using E = parquet::Encoding;
    int64_t nulls = 0;
    std::shared_ptr<arrow::Buffer> valid;
    const int16_t *def = nullptr;
    if (c.levels) {
      if (c.def_dec->Decode((int)n, c.def.data()) != n) return Status::Invalid("column ", c.descr->name(), ": levels ended early");
      def = c.def.data();
      nulls = n - count_eq(def, n, c.max_def);
      if (nulls) {
        uint8_t *bits = c.validity->mutable_data();
        memset(bits, 0, (size_t)arrow::bit_util::BytesForBits(n));
        for (int64_t j = 0; j < n; j++)
          if (def[j] == c.max_def) arrow::bit_util::SetBit(bits, j);
        valid = c.validity;
      }
    }
    const int64_t dense = n - nulls;
    c.left -= n;
    if (c.enc == E::PLAIN_DICTIONARY || c.enc == E::RLE_DICTIONARY) {
      auto *idx = reinterpret_cast<int32_t *>(c.indices->mutable_data());
      Status st = by_type(c, [&](auto t) {
        auto *dd = dynamic_cast<parquet::DictDecoder<decltype(t)> *>(c.dict_dec.get());
        if (!dd || dd->DecodeIndices((int)dense, idx) != dense)
          return Status::Invalid("column ", c.descr->name(), ": dictionary indices ended early");
        return Status::OK();
      });
      ARROW_RETURN_NOT_OK(st);
      // the driver reads dict[idx]: an index out of the dictionary is a bad file, never a read
      if (!all_below(idx, dense, (uint32_t)c.dict->length)) return Status::Invalid("column ", c.descr->name(), ": dictionary index out of range");
      if (nulls) spread(idx, def, c.max_def, n, dense);
      *out = arrow::ArrayData::Make(c.dict_type, n, {valid, c.indices}, nulls);
      (*out)->dictionary = c.dict;
      return Status::OK();
    }
    std::shared_ptr<arrow::Buffer> values;
    if (c.enc == E::PLAIN) {
      int64_t bytes = dense * c.width;
      if (c.plain_end - c.plain < bytes) return Status::Invalid("column ", c.descr->name(), ": page ended early");
      if (!nulls) {
        values = std::make_shared<arrow::Buffer>(c.plain, bytes);  // in place: no copy
      } else {
        memcpy(c.values->mutable_data(), c.plain, (size_t)bytes);
        values = c.values;
      }
      c.plain += bytes;
    } else {
      Status st = by_type(c, [&](auto t) {
        using DType = decltype(t);
        auto *d = dynamic_cast<parquet::TypedDecoder<DType> *>(c.other_dec.get());
        auto *v = reinterpret_cast<typename DType::c_type *>(c.values->mutable_data());
        if (!d || d->Decode(v, (int)dense) != dense) return Status::Invalid("column ", c.descr->name(), ": values ended early");
        return Status::OK();
      });
      ARROW_RETURN_NOT_OK(st);
      values = c.values;
    }
    if (nulls) {
      uint8_t *v = c.values->mutable_data();
      if (c.width == 8) spread(reinterpret_cast<int64_t *>(v), def, c.max_def, n, dense);
      else spread(reinterpret_cast<int32_t *>(v), def, c.max_def, n, dense);
    }
    *out = arrow::ArrayData::Make(c.type, n, {valid, values}, nulls);
    return Status::OK();
  }

  // A row group read page by page: a batch never spans a page of any column (it ends where the
  // first of the columns' current pages ends), so PLAIN values are handed out in place and
  // dictionary-encoded ones as indices, with the row prefilter testing each dictionary entry once.
  // Without `early`, every column of a batch is decoded and `on_batch` gets it. With `early` (late
  // materialization), the early columns are decoded, `filter` sees them, and the late ones are
  // decoded only for a batch in which some row passed; otherwise they are skipped, and a late
  // column's Snappy page none of whose rows passed is never decompressed.
  Status read_direct(int64_t i, const std::vector<bool> *early, const std::function<Status(const arrow::RecordBatch &)> &on_batch,
                     const FilterFn *filter, const RowsFn *rows_fn) {
    std::shared_ptr<parquet::RowGroupReader> rg = reader_->parquet_reader()->RowGroup((int)i);
    direct_cols_.resize(columns_.size());
    for (size_t k = 0; k < columns_.size(); k++) {
      Direct &c = direct_cols_[k];
      c.descr = md_->schema()->Column(columns_[k]);
      ARROW_ASSIGN_OR_RAISE(c.pages, open_pages(*rg, (int)i, columns_[k], c));
      c.max_def = c.descr->max_definition_level();
      std::shared_ptr<parquet::Statistics> st = md_->RowGroup((int)i)->ColumnChunk(columns_[k])->statistics();
      c.no_nulls = st && st->HasNullCount() && st->null_count() == 0;
      c.type = batch_schema_->field((int)k)->type();
      c.dict_type = arrow::dictionary(arrow::int32(), c.type);
      parquet::Type::type pt = c.descr->physical_type();
      c.width = pt == parquet::Type::INT64 || pt == parquet::Type::DOUBLE ? 8 : pt == parquet::Type::BYTE_ARRAY ? 0 : 4;
      c.strings = pt == parquet::Type::BYTE_ARRAY;
      c.page.reset();
      c.left = 0;
      c.dict.reset();
      c.dict_dec.reset();
      if (!c.values) {
        ARROW_ASSIGN_OR_RAISE(c.values, arrow::AllocateResizableBuffer(batch_rows_ * 8, jgscan::pool()));
        ARROW_ASSIGN_OR_RAISE(c.indices, arrow::AllocateResizableBuffer(batch_rows_ * 4, jgscan::pool()));
        ARROW_ASSIGN_OR_RAISE(c.validity, arrow::AllocateResizableBuffer(arrow::bit_util::BytesForBits(batch_rows_), jgscan::pool()));
        c.def.resize((size_t)batch_rows_);
      }
    }
    const int64_t rows = units_[(size_t)i].rows;
    const size_t ncols = columns_.size();
    auto is_late = [&](size_t k) { return early && !(*early)[k]; };
    std::vector<std::shared_ptr<arrow::ArrayData>> arrays(ncols);
    BatchSchema full, first;  // the whole batch's; the early columns' (late ones as placeholders)
    for (int64_t pos = 0; pos < rows;) {
      int64_t n = std::min(batch_rows_, rows - pos);
      for (size_t k = 0; k < ncols; k++) {
        Direct &c = direct_cols_[k];
        if (c.left == 0) ARROW_RETURN_NOT_OK(next_page(c, is_late(k)));
        n = std::min(n, c.left);
      }
      if (!early) {
        for (size_t k = 0; k < ncols; k++) ARROW_RETURN_NOT_OK(read_rows(direct_cols_[k], n, &arrays[k]));
        ARROW_RETURN_NOT_OK(on_batch(*full.batch(*batch_schema_, arrays, n)));
        pos += n;
        continue;
      }
      for (size_t k = 0; k < ncols; k++)
        if (is_late(k)) arrays[k] = jgscan::late_placeholder(n);
        else ARROW_RETURN_NOT_OK(read_rows(direct_cols_[k], n, &arrays[k]));
      ARROW_ASSIGN_OR_RAISE(jgscan::Kept kept, (*filter)(*first.batch(*batch_schema_, arrays, n), no_more()));
      const size_t passed = kept.n;
      for (size_t k = 0; k < ncols; k++) {
        if (!is_late(k)) continue;
        Direct &c = direct_cols_[k];
        if (passed == 0) {
          ARROW_RETURN_NOT_OK(skip_rows(c, n));
        } else {
          ARROW_RETURN_NOT_OK(ensure_open(c));
          ARROW_RETURN_NOT_OK(read_rows(c, n, &arrays[k]));
        }
      }
      if (passed == 0) jgscan::g_late_rows_skipped.fetch_add((uint64_t)n, std::memory_order_relaxed);
      ARROW_RETURN_NOT_OK((*rows_fn)(*full.batch(*batch_schema_, arrays, n), passed));
      pos += n;
    }
    for (Direct &c : direct_cols_) {
      c.page.reset(), c.pages.reset(), c.dict_dec.reset(), c.other_dec.reset(), c.other_enc = parquet::Encoding::UNKNOWN;
      c.pending = false;
    }
    return Status::OK();
  }

  // A batch over `arrays`, whose schema (names from the fields read, types from the arrays, which
  // change between plain and dictionary-encoded pages) is rebuilt only when a type changed.
  struct BatchSchema {
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::shared_ptr<arrow::Schema> schema;
    std::shared_ptr<arrow::RecordBatch> batch(const arrow::Schema &names, const std::vector<std::shared_ptr<arrow::ArrayData>> &arrays,
                                              int64_t n) {
      bool same = schema != nullptr;
      fields.resize(arrays.size());
      for (size_t k = 0; k < arrays.size(); k++)
        if (!schema || !fields[k]->type()->Equals(*arrays[k]->type)) {
          fields[k] = arrow::field(names.field((int)k)->name(), arrays[k]->type);
          same = false;
        }
      if (!same) schema = arrow::schema(fields);
      return arrow::RecordBatch::Make(schema, n, arrays);
    }
  };

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
  bool last_direct_ = false;   // the last read() took the direct path
  std::vector<Direct> direct_cols_;
};

const jgscan::Format kParquet = {"scan_parquet", "Parquet", "row group", "row_groups", true, ParquetFile::open,
                                  "row_groups_direct"};

}  // namespace

int main(int argc, char **argv) { return jgscan::run(argc, argv, &kParquet); }
