// ORC scan NCA: the process `main` and the ORC format of the columnar scan driver (scan_arrow.h).
//
// One stripe is one unit, read as batches of `scan.batch_rows` rows with only the needed fields.
// When every needed field is of a kind orc_native.cpp decodes (integers, dates, decimals of up to
// 18 digits, floats, booleans, STRING/VARCHAR/BINARY) and the stripe's encodings are ones it knows,
// the stripe is decoded there, straight into Arrow arrays of the adapter's types (dictionary-encoded
// strings as dictionary arrays); any other stripe (CHAR, nested fields, other encodings; or every
// stripe with `scan.orc_native 0`) comes from Apache ORC C++ through Arrow's adapter
// (arrow/adapters/orc). The adapter does
// not expose statistics, so the stripe statistics used for pruning are read here from the file
// tail (PostScript -> Footer for the column ids -> Metadata: one ColumnStatistics per stripe and
// column), decompressed with Arrow's codecs. Anything unexpected in the tail just means "no
// statistics": pruning is an optimisation, never a source of errors.
#include <arrow/adapters/orc/adapter.h>
#include <arrow/buffer.h>
#include <arrow/memory_pool.h>
#include <arrow/util/compression.h>

#include <cstring>
#include <string_view>

#include "orc_native.h"
#include "scan_arrow.h"

namespace {

using arrow::Status;
using jgorc::decompress;
using jgorc::kNone;
using jgorc::Pb;
using jgscan::RawStats;
using jgscan::Tri;

// Stripe statistics by stripe and ORC column id, parsed lazily from the Metadata section.
class OrcTail {
 public:
  Status load(arrow::io::RandomAccessFile &f) {
    ARROW_ASSIGN_OR_RAISE(int64_t size, f.GetSize());
    if (size < 4) return Status::Invalid("file too small");
    int64_t tail_len = std::min<int64_t>(size, 1 << 14);
    ARROW_ASSIGN_OR_RAISE(auto tail, f.ReadAt(size - tail_len, tail_len));
    const uint8_t *t = tail->data();
    size_t ps_len = t[tail_len - 1];
    if ((int64_t)ps_len + 1 > tail_len) return Status::Invalid("bad postscript length");
    uint64_t footer_len = 0, metadata_len = 0, block = 256 << 10;
    int kind = kNone;
    Pb ps(std::string_view(reinterpret_cast<const char *>(t + tail_len - 1 - ps_len), ps_len));
    for (uint32_t fld, w; ps.next(&fld, &w);) {
      if (fld == 1 && w == 0) footer_len = ps.varint();
      else if (fld == 2 && w == 0) kind = (int)ps.varint();
      else if (fld == 3 && w == 0) block = ps.varint();
      else if (fld == 5 && w == 0) metadata_len = ps.varint();
      else if (fld == 6 && w == 0) writer_version_ = (uint32_t)ps.varint();
      else ps.skip(w);
    }
    if (!ps.ok()) return Status::Invalid("bad postscript");
    int64_t footer_at = size - 1 - (int64_t)ps_len - (int64_t)footer_len;
    int64_t meta_at = footer_at - (int64_t)metadata_len;
    if (meta_at < 0 || block > (64u << 20)) return Status::Invalid("bad tail lengths");
    ARROW_ASSIGN_OR_RAISE(auto fbuf, f.ReadAt(footer_at, (int64_t)footer_len));
    ARROW_ASSIGN_OR_RAISE(std::string footer, decompress(std::string_view(*fbuf), kind, block));
    ARROW_RETURN_NOT_OK(parse_footer(footer));
    ARROW_ASSIGN_OR_RAISE(auto mbuf, f.ReadAt(meta_at, (int64_t)metadata_len));
    ARROW_ASSIGN_OR_RAISE(metadata_, decompress(std::string_view(*mbuf), kind, block));
    Pb m(metadata_);
    for (uint32_t fld, w; m.next(&fld, &w);) {
      if (fld != 1 || w != 2) {
        m.skip(w);
        continue;
      }
      std::vector<std::string_view> cols;
      Pb ss(m.bytes());
      for (uint32_t f2, w2; ss.next(&f2, &w2);)
        if (f2 == 1 && w2 == 2) cols.push_back(ss.bytes());
        else ss.skip(w2);
      if (!ss.ok()) return Status::Invalid("bad stripe statistics");
      stripes_.push_back(std::move(cols));
    }
    if (!m.ok()) return Status::Invalid("bad metadata");
    return Status::OK();
  }

  // Statistics of top-level field `field` in stripe `stripe`.
  RawStats stats(int64_t stripe, int field) const {
    RawStats r;
    if (field < 0 || (size_t)field >= field_columns_.size() || stripe < 0 || (size_t)stripe >= stripes_.size())
      return r;
    uint32_t col = field_columns_[(size_t)field];
    const auto &cols = stripes_[(size_t)stripe];
    if (col >= cols.size()) return r;
    parse_column_stats(cols[col], &r);
    return r;
  }

 private:
  Status parse_footer(const std::string &footer) {
    Pb f(footer);
    bool first_type = true;
    for (uint32_t fld, w; f.next(&fld, &w);) {
      if (fld == 4 && w == 2) {  // types: the first is the root struct
        std::string_view type = f.bytes();
        if (!first_type) continue;
        first_type = false;
        Pb t(type);
        uint64_t kind = 0;
        for (uint32_t f2, w2; t.next(&f2, &w2);) {
          if (f2 == 1 && w2 == 0) kind = t.varint();
          else if (f2 == 2 && w2 == 2) {  // packed subtypes
            Pb packed(t.bytes());
            while (packed.ok() && packed.more()) field_columns_.push_back((uint32_t)packed.varint());
          } else if (f2 == 2 && w2 == 0) {
            field_columns_.push_back((uint32_t)t.varint());
          } else {
            t.skip(w2);
          }
        }
        if (!t.ok() || kind != 12 /* STRUCT */) return Status::Invalid("root type is not a struct");
      } else {
        f.skip(w);
      }
    }
    return f.ok() ? Status::OK() : Status::Invalid("bad footer");
  }

  static bool parse_decimal(std::string_view s, __int128 *v, int *scale) {
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    __int128 x = 0;
    int digits = 0, frac = -1;
    for (; i < s.size(); i++) {
      if (s[i] >= '0' && s[i] <= '9') {
        if (++digits > 38) return false;
        x = x * 10 + (s[i] - '0');
        if (frac >= 0) frac++;
      } else if (s[i] == '.' && frac < 0) {
        frac = 0;
      } else {
        return false;
      }
    }
    if (digits == 0) return false;
    *v = neg ? -x : x;
    *scale = frac < 0 ? 0 : frac;
    return true;
  }

  void parse_column_stats(std::string_view b, RawStats *r) const {
    Pb p(b);
    bool have_count = false;
    uint64_t count = 0, trues = 0;
    bool have_bucket = false;
    for (uint32_t fld, w; p.next(&fld, &w);) {
      if (fld == 1 && w == 0) {
        count = p.varint();
        have_count = true;
      } else if (fld == 10 && w == 0) {
        r->has_null = p.varint() ? Tri::kYes : Tri::kNo;
      } else if (w == 2 && (fld == 2 || fld == 3 || fld == 4 || fld == 5 || fld == 6 || fld == 7)) {
        Pb s(p.bytes());
        bool has_min = false, has_max = false;
        std::string_view smin, smax, lower, upper;
        for (uint32_t f2, w2; s.next(&f2, &w2);) {
          if (fld == 2 && w2 == 0 && (f2 == 1 || f2 == 2)) {  // int: sint64
            (f2 == 1 ? r->imin : r->imax) = s.zigzag();
            (f2 == 1 ? has_min : has_max) = true;
          } else if (fld == 7 && w2 == 0 && (f2 == 1 || f2 == 2)) {  // date: sint32 days
            (f2 == 1 ? r->imin : r->imax) = s.zigzag();
            (f2 == 1 ? has_min : has_max) = true;
          } else if (fld == 3 && w2 == 1 && (f2 == 1 || f2 == 2)) {  // double
            (f2 == 1 ? r->fmin : r->fmax) = s.dbl();
            (f2 == 1 ? has_min : has_max) = true;
          } else if ((fld == 4 || fld == 6) && w2 == 2 && f2 >= 1 && f2 <= 5 && f2 != 3) {  // string, decimal
            std::string_view v = s.bytes();
            if (f2 == 1) smin = v, has_min = true;
            else if (f2 == 2) smax = v, has_max = true;
            else if (f2 == 4 && fld == 4) lower = v;
            else if (f2 == 5 && fld == 4) upper = v;
          } else if (fld == 5 && f2 == 1) {  // bucket: count of true values
            if (w2 == 2) {
              Pb packed(s.bytes());
              if (packed.more()) trues = packed.varint();
            } else if (w2 == 0) {
              trues = s.varint();
            } else {
              s.skip(w2);
            }
            have_bucket = true;
          } else {
            s.skip(w2);
          }
        }
        if (!s.ok()) return;
        if (fld == 2 || fld == 7) {
          if (has_min && has_max) r->kind = RawStats::kInt;
        } else if (fld == 3) {
          if (has_min && has_max) r->kind = RawStats::kDouble;
        } else if (fld == 4) {
          // bounds of truncated long strings live in lowerBound/upperBound; very old writers
          // (before HIVE-8732) compared strings wrongly: no string bounds from them
          if (!has_min && !lower.empty()) smin = lower, has_min = true;
          if (!has_max && !upper.empty()) smax = upper, has_max = true;
          if (has_min && has_max && writer_version_ >= 1) {
            r->kind = RawStats::kBytes;
            r->smin.assign(smin);
            r->smax.assign(smax);
          }
        } else if (fld == 6) {
          int s1 = 0, s2 = 0;
          if (has_min && has_max && parse_decimal(smin, &r->dmin, &s1) && parse_decimal(smax, &r->dmax, &s2)) {
            // bring both to the larger scale
            int sc = std::max(s1, s2);
            if (sc <= 38) {
              __int128 m = 1;
              for (int i = s1; i < sc; i++) m *= 10;
              r->dmin *= m;
              m = 1;
              for (int i = s2; i < sc; i++) m *= 10;
              r->dmax *= m;
              r->dscale = sc;
              r->kind = RawStats::kDecimal;
            }
          }
        }
      } else {
        p.skip(w);
      }
    }
    if (!p.ok()) {
      *r = RawStats();
      return;
    }
    if (have_count) r->has_value = count > 0 ? Tri::kYes : Tri::kNo;
    if (have_bucket && have_count && count > 0) {
      r->kind = RawStats::kInt;
      r->imin = trues == count ? 1 : 0;
      r->imax = trues > 0 ? 1 : 0;
    }
  }

  std::string metadata_;  // decompressed; the views below point into it
  std::vector<std::vector<std::string_view>> stripes_;
  std::vector<uint32_t> field_columns_;  // ORC column id of each top-level field
  uint32_t writer_version_ = 0;
};

// ------------------------------------------------------------------ the format

class OrcFile final : public jgscan::ColumnarFile {
 public:
  static arrow::Result<std::unique_ptr<jgscan::ColumnarFile>> open(const std::string &path,
                                                                   std::shared_ptr<arrow::io::RandomAccessFile> in) {
    (void)path;
    auto f = std::make_unique<OrcFile>();
    f->in_ = in;
    ARROW_ASSIGN_OR_RAISE(f->reader_, arrow::adapters::orc::ORCFileReader::Open(in, jgscan::pool()));
    ARROW_ASSIGN_OR_RAISE(f->schema_, f->reader_->ReadSchema());
    int64_t n = f->reader_->NumberOfStripes();
    for (int64_t i = 0; i < n; i++) {
      auto s = f->reader_->GetStripeInformation(i);
      f->units_.push_back({i, s.first_row_id, s.num_rows, s.length});
    }
    return std::unique_ptr<jgscan::ColumnarFile>(std::move(f));
  }

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }
  int64_t num_units() const override { return (int64_t)units_.size(); }
  jgscan::UnitInfo unit(int64_t i) const override { return units_[(size_t)i]; }

  RawStats stats(int64_t i, int field) override {
    if (!tail_loaded_) {
      tail_loaded_ = true;
      tail_ok_ = tail_.load(*in_).ok();
    }
    return tail_ok_ ? tail_.stats(i, field) : RawStats();
  }

  void configure(const jgr_proc *p) override {
    const char *v = jgr_param(p, "scan.orc_native");  // "0": always through the adapter
    native_allowed_ = !(v && strcmp(v, "0") == 0);
  }

  Status select(const std::vector<int> &fields, int64_t batch_rows) override {
    fields_ = fields;
    batch_rows_ = batch_rows;
    std::vector<std::shared_ptr<arrow::Field>> selected;
    for (int f : fields) selected.push_back(schema_->field(f));
    batch_schema_ = arrow::schema(selected);
    native_.reset();
    if (!native_allowed_) return Status::OK();
    // a tail the native reader does not understand leaves the file to the adapter, which has
    // already accepted it
    auto n = jgorc::NativeFile::open(in_);
    if (!n.ok()) return Status::OK();
    for (size_t k = 0; k < fields.size(); k++)
      if (!(*n)->supports(fields[k], *selected[k]->type())) return Status::OK();
    if ((*n)->num_stripes() != (int64_t)units_.size()) return Status::OK();
    for (size_t k = 0; k < units_.size(); k++)
      if ((*n)->stripe_rows((int64_t)k) != units_[k].rows) return Status::OK();
    native_ = std::move(*n);
    return Status::OK();
  }

  bool last_read_native() const override { return last_native_; }

  Status read(int64_t i, const std::function<Status(const arrow::RecordBatch &)> &on_batch) override {
    const jgscan::UnitInfo &u = units_[(size_t)i];
    last_native_ = false;
    if (native_) {
      bool handled = false;
      ARROW_RETURN_NOT_OK(native_->read(i, fields_, batch_schema_, batch_rows_, on_batch, &handled));
      last_native_ = handled;
      if (handled) return Status::OK();
    }
    return read_adapter(u, on_batch);
  }

  // Late materialization on natively decoded stripes (the adapter decodes every column).
  Status read_late(int64_t i, const std::vector<bool> &early, const FilterFn &filter, const RowsFn &rows) override {
    last_native_ = false;
    if (native_) {
      bool handled = false;
      const jgorc::NativeFile::FilterFn native_filter =
          [&](const arrow::RecordBatch &b, const jgorc::NativeFile::Materialize &more) -> arrow::Result<jgorc::Kept> {
        const Materialize driver_more = [&](int column, const jgscan::Kept &k) { return more(column, {k.n, k.rows}); };
        ARROW_ASSIGN_OR_RAISE(jgscan::Kept kept, filter(b, driver_more));
        return jgorc::Kept{kept.n, kept.rows};
      };
      ARROW_RETURN_NOT_OK(native_->read_late(i, fields_, batch_schema_, batch_rows_, early, native_filter, rows, &handled));
      last_native_ = handled;
      if (handled) return Status::OK();
    }
    return read_adapter(units_[(size_t)i], [&](const arrow::RecordBatch &b) -> Status {
      ARROW_ASSIGN_OR_RAISE(jgscan::Kept kept, filter(b, no_more()));
      return rows(b, kept.n);
    });
  }

 private:
  Status read_adapter(const jgscan::UnitInfo &u, const std::function<Status(const arrow::RecordBatch &)> &on_batch) {
    ARROW_RETURN_NOT_OK(reader_->Seek(u.first_row));
    ARROW_ASSIGN_OR_RAISE(auto rr, reader_->NextStripeReader(batch_rows_, fields_));
    if (!rr) return Status::Invalid("no stripe at row ", u.first_row);
    int64_t got = 0;
    for (;;) {
      std::shared_ptr<arrow::RecordBatch> b;
      ARROW_RETURN_NOT_OK(rr->ReadNext(&b));
      if (!b) break;
      got += b->num_rows();
      ARROW_RETURN_NOT_OK(on_batch(*b));
    }
    if (got != u.rows) return Status::Invalid("stripe has ", got, " rows, its footer says ", u.rows);
    return Status::OK();
  }

 private:
  std::shared_ptr<arrow::io::RandomAccessFile> in_;
  std::unique_ptr<arrow::adapters::orc::ORCFileReader> reader_;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<jgscan::UnitInfo> units_;
  std::vector<int> fields_;
  std::shared_ptr<arrow::Schema> batch_schema_;  // the fields read, in order
  std::unique_ptr<jgorc::NativeFile> native_;    // every field read is of a kind it decodes
  bool native_allowed_ = true, last_native_ = false;
  int64_t batch_rows_ = 65536;
  OrcTail tail_;
  bool tail_loaded_ = false, tail_ok_ = false;
};

const jgscan::Format kOrc = {"scan_orc", "ORC", "stripe", "stripes", false, OrcFile::open, "stripes_native", "streams",
                             /*staged_filter=*/true};

}  // namespace

int main(int argc, char **argv) { return jgscan::run(argc, argv, &kOrc); }
