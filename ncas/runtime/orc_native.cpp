// ORC streams decoded natively for the ORC scan NCA (see orc_native.h).
//
// A stripe is: index streams, data streams, the stripe footer (the list of streams with their
// column and length, in file order, and each column's encoding). Each needed column's streams are
// read and decompressed whole into padded buffers once per stripe; then every batch decodes the
// next rows of each column: the PRESENT stream (byte RLE of bits, 1 = not NULL) and the values of
// the non-NULL rows (integers and dates: RLE v1 for DIRECT, v2 for DIRECT_V2; bytes: byte RLE;
// booleans: byte RLE of bits; floats: little-endian IEEE; decimals: zigzag varints in DATA and
// their scales as integer RLE in SECONDARY). Every read is bounds-checked against the stream's
// end: a malformed stream is an error naming the column and stream, never a read outside it.
#include "orc_native.h"

#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/compression.h>

#include <algorithm>
#include <cstdlib>

#include "jg_snappy.h"
#include "jgrt.h" /* jg_pow10 */
#include "scan_arrow.h"

namespace jgorc {
namespace {

using arrow::Status;

// ORC type kinds (orc_proto.proto Type.Kind) and the few stream and encoding kinds used here.
enum Kind : uint32_t {
  kBoolean = 0, kByte = 1, kShort = 2, kInt = 3, kLong = 4, kFloat = 5, kDouble = 6, kString = 7,
  kBinary = 8, kStruct = 12, kDecimal = 14, kDate = 15, kVarchar = 16
};
enum StreamKind : uint32_t { kPresent = 0, kData = 1, kLength = 2, kDictionaryData = 3, kSecondary = 5 };
enum EncodingKind : uint32_t { kDirect = 0, kDictionary = 1, kDirectV2 = 2, kDictionaryV2 = 3 };

// Byte strings: LENGTH and DATA (DIRECT) or DICTIONARY_DATA (DICTIONARY) streams.
inline bool is_bytes_kind(uint32_t kind) { return kind == kString || kind == kVarchar || kind == kBinary; }

constexpr size_t kPad = 16;  // zero bytes after every stream buffer: 64-bit loads may run over

// A growable byte buffer without zero-filling, always followed by kPad zero bytes.
class Bytes {
 public:
  Bytes() = default;
  Bytes(const Bytes &) = delete;
  Bytes &operator=(const Bytes &) = delete;
  ~Bytes() { free(p_); }
  uint8_t *data() { return p_; }
  size_t size() const { return n_; }
  void clear() { n_ = 0; }
  bool reserve(size_t n) {
    if (n + kPad <= cap_) return true;
    size_t cap = std::max(n + kPad, cap_ * 2);
    auto *q = static_cast<uint8_t *>(realloc(p_, cap));
    if (!q) return false;
    p_ = q, cap_ = cap;
    return true;
  }
  uint8_t *tail() { return p_ + n_; }
  size_t spare() const { return cap_ - kPad - n_; }
  void grow(size_t k) { n_ += k; }
  void seal() { memset(p_ + n_, 0, kPad); }

 private:
  uint8_t *p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

// ------------------------------------------------------------------ decompression

arrow::Result<std::unique_ptr<arrow::util::Codec>> make_codec(int kind) {
  switch (kind) {
    case kZlib: {
      arrow::util::GZipCodecOptions o;
      o.gzip_format = arrow::util::GZipFormat::DEFLATE;
      return arrow::util::Codec::Create(arrow::Compression::GZIP, o);
    }
    case kSnappy: return arrow::util::Codec::Create(arrow::Compression::SNAPPY);
    case kLz4: return arrow::util::Codec::Create(arrow::Compression::LZ4);
    case kZstd: return arrow::util::Codec::Create(arrow::Compression::ZSTD);
    default: return Status::NotImplemented("ORC compression kind ", kind);
  }
}

// ORC's compression framing: chunks with a 3-byte little-endian header (length << 1 | is_original),
// each decompressing to at most `block` bytes. Appends to `out`.
Status append_decompressed(const uint8_t *p, size_t size, int kind, uint64_t block, arrow::util::Codec *codec,
                           Bytes *out) {
  const uint8_t *e = p + size;
  if (kind == kNone) {
    if (!out->reserve(out->size() + size)) return Status::OutOfMemory("ORC stream");
    if (size) memcpy(out->tail(), p, size);
    out->grow(size);
    return Status::OK();
  }
  while (p < e) {
    if (e - p < 3) return Status::Invalid("truncated compression chunk header");
    uint32_t h = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    p += 3;
    size_t n = h >> 1;
    if (n > (size_t)(e - p)) return Status::Invalid("truncated compression chunk");
    if (h & 1) {
      if (!out->reserve(out->size() + n)) return Status::OutOfMemory("ORC stream");
      memcpy(out->tail(), p, n);
      out->grow(n);
    } else if (kind == kSnappy && jgscan::g_libsnappy) {
      if (!out->reserve(out->size() + (size_t)block)) return Status::OutOfMemory("ORC stream");
      ARROW_ASSIGN_OR_RAISE(size_t got, jgscan::snappy_decompress(p, n, out->tail(), (size_t)block));
      out->grow(got);
    } else if (kind == kZstd) {
      // Arrow's one-shot ZSTD decompression insists on knowing the exact output size: stream
      ARROW_ASSIGN_OR_RAISE(auto d, codec->MakeDecompressor());
      const uint8_t *in_at = p;
      int64_t left = (int64_t)n;
      for (int rounds = 0; !d->IsFinished(); rounds++) {
        if (!out->reserve(out->size() + (size_t)block)) return Status::OutOfMemory("ORC stream");
        ARROW_ASSIGN_OR_RAISE(auto r, d->Decompress(left, in_at, (int64_t)out->spare(), out->tail()));
        out->grow((size_t)r.bytes_written);
        in_at += r.bytes_read, left -= r.bytes_read;
        if ((left == 0 && r.bytes_written == 0 && !r.need_more_output) || rounds > (1 << 20)) break;
      }
    } else {
      if (!out->reserve(out->size() + (size_t)block)) return Status::OutOfMemory("ORC stream");
      ARROW_ASSIGN_OR_RAISE(int64_t got, codec->Decompress((int64_t)n, p, (int64_t)block, out->tail()));
      out->grow((size_t)got);
    }
    p += n;
  }
  return Status::OK();
}

// ------------------------------------------------------------------ stream decoders

// The unread part of a stream: [p, e), with kPad readable zero bytes after e.
struct In {
  const uint8_t *p = nullptr, *e = nullptr;
  size_t left() const { return (size_t)(e - p); }
};

inline int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

inline uint64_t load_be64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}

// An unsigned LEB128 varint of at most 10 bytes; false past the end or when longer.
inline bool read_uvarint(In &in, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (in.p >= in.e) return false;
    uint8_t b = *in.p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return *out = v, true;
  }
  return false;
}

// Step over the next k varints (of at most 10 bytes each, as read_uvarint reads them). A varint
// ends at each byte without its high bit, so 8 bytes at a time hold as many ends as such bytes (a
// popcount), and a word with fewer ends than are still wanted is stepped over whole. False when
// the stream ends first or a varint runs over 10 bytes.
inline bool skip_varints(In &in, int64_t k) {
  const uint8_t *p = in.p;
  int run = 0;  // continuation bytes (high bit set) since the last end
  while (k > 0 && in.e - p >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    const uint64_t ends = ~w & 0x8080808080808080ull;  // byte i's end at bit 8i + 7 (little-endian)
    if (ends == 0) {
      if ((run += 8) >= 10) return false;
      p += 8;
      continue;
    }
    if (run + __builtin_ctzll(ends) / 8 >= 10) return false;  // the varint this word finishes
    const int m = __builtin_popcountll(ends);
    if (m < k) {
      k -= m;
      run = __builtin_clzll(ends) / 8;  // the bytes after the word's last end
      p += 8;
      continue;
    }
    uint64_t e = ends;
    for (int64_t i = 1; i < k; i++) e &= e - 1;  // the k-th end is now the lowest
    p += __builtin_ctzll(e) / 8 + 1;
    k = 0;
    run = 0;
  }
  for (; k > 0; p++) {
    if (p >= in.e) return false;
    if (!(*p & 0x80)) k--, run = 0;
    else if (++run >= 10) return false;
  }
  in.p = p;
  return true;
}

// A batch's late decimals are decoded at the kept rows only when at most one row in this many
// was kept: stepping over a varint costs a fraction of decoding one, but a kept row costs a
// little more than in a batch decoded whole.
constexpr size_t kSparseKept = 4;

// The RLE v2 5-bit width codes.
inline int decode_width(uint32_t code) {
  static const int w[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                            17, 18, 19, 20, 21, 22, 23, 24, 26, 28, 30, 32, 40, 48, 56, 64};
  return w[code & 31];
}
inline int closest_fixed_bits(int n) {
  if (n == 0) return 1;
  if (n <= 24) return n;
  if (n <= 26) return 26;
  if (n <= 28) return 28;
  if (n <= 30) return 30;
  if (n <= 32) return 32;
  if (n <= 40) return 40;
  if (n <= 48) return 48;
  if (n <= 56) return 56;
  return 64;
}

// n big-endian bit-packed values of w bits (1..64) from in, ending on a byte boundary.
bool unpack(In &in, int w, int n, uint64_t *out) {
  size_t bytes = ((size_t)n * (size_t)w + 7) / 8;
  if (bytes > in.left()) return false;
  const uint8_t *p = in.p;
  switch (w) {
    case 8:
      for (int i = 0; i < n; i++) out[i] = p[i];
      break;
    case 16:
      for (int i = 0; i < n; i++) out[i] = (uint64_t)p[2 * i] << 8 | p[2 * i + 1];
      break;
    case 32:
      for (int i = 0; i < n; i++) out[i] = load_be64(p + 4 * i) >> 32;  // padding covers the last
      break;
    case 64:
      for (int i = 0; i < n; i++) out[i] = load_be64(p + 8 * i);
      break;
    default: {
      // w <= 56: any w bits at bit offset b sit in the 8 bytes from b / 8 (the padding covers the end)
      uint64_t bit = 0;
      const int sh = 64 - w;
      for (int i = 0; i < n; i++, bit += (uint64_t)w) out[i] = (load_be64(p + (bit >> 3)) << (bit & 7)) >> sh;
    }
  }
  in.p += bytes;
  return true;
}

// Integer run-length decoding, version 1 or 2, signed or not (ORC's integer streams). A run of
// one repeated value (v2's SHORT_REPEAT and DELTA runs whose delta is 0, v1's runs of delta 0) is
// kept as that value, not expanded into the buffer.
class IntRle {
 public:
  void reset(In in, bool v2, bool is_signed) {
    in_ = in, v2_ = v2, signed_ = is_signed, pos_ = len_ = 0, same_ = false;
  }
  // The next n values as T (the caller's narrowing, as ORC's readers do).
  template <typename T>
  bool read(T *out, int64_t n) {
    while (n > 0) {
      if (pos_ == len_ && !(v2_ ? run_v2() : run_v1())) return false;
      int64_t k = std::min<int64_t>(n, len_ - pos_);
      if (same_) {
        const T v = (T)(int64_t)same_value_;
        for (int64_t j = 0; j < k; j++) out[j] = v;
      } else {
        const uint64_t *b = buf_ + pos_;
        for (int64_t j = 0; j < k; j++) out[j] = (T)(int64_t)b[j];
      }
      out += k, n -= k, pos_ += (int)k;
    }
    return true;
  }
  // The next n values as read() gives them, or, when they are all one value from runs of a
  // repeated value (a decimal column's scales, mostly), only that value: *all_same is then true,
  // *value that value (0 when n is 0), and `out` not written.
  bool read_same(int64_t *out, int64_t n, bool *all_same, int64_t *value) {
    bool same = true;
    uint64_t v = 0;
    for (int64_t done = 0; done < n;) {
      if (pos_ == len_ && !(v2_ ? run_v2() : run_v1())) return false;
      const int64_t k = std::min<int64_t>(n - done, len_ - pos_);
      if (same && same_ && (done == 0 || same_value_ == v)) {
        v = same_value_;
      } else {
        if (same) {  // the values so far were all v
          for (int64_t j = 0; j < done; j++) out[j] = (int64_t)v;
          same = false;
        }
        if (same_)
          for (int64_t j = 0; j < k; j++) out[done + j] = (int64_t)same_value_;
        else
          for (int64_t j = 0; j < k; j++) out[done + j] = (int64_t)buf_[pos_ + j];
      }
      done += k, pos_ += (int)k;
    }
    *all_same = same, *value = (int64_t)v;
    return true;
  }
  // Step over the next n values (their runs are still parsed: RLE has no index).
  bool skip(int64_t n) {
    while (n > 0) {
      if (pos_ == len_ && !(v2_ ? run_v2() : run_v1())) return false;
      int64_t k = std::min<int64_t>(n, len_ - pos_);
      n -= k, pos_ += (int)k;
    }
    return true;
  }

 private:
  bool run_v1() {
    if (in_.left() < 1) return false;
    int8_t h = (int8_t)*in_.p++;
    uint64_t v;
    if (h >= 0) {  // a run of h + 3 values with a constant delta
      if (in_.left() < 1) return false;
      int8_t delta = (int8_t)*in_.p++;
      if (!read_uvarint(in_, &v)) return false;
      uint64_t x = signed_ ? (uint64_t)unzigzag(v) : v;
      len_ = h + 3;
      same_ = delta == 0, same_value_ = x;
      if (!same_)
        for (int i = 0; i < len_; i++, x += (uint64_t)(int64_t)delta) buf_[i] = x;
    } else {
      same_ = false;
      len_ = -h;
      for (int i = 0; i < len_; i++) {
        if (!read_uvarint(in_, &v)) return false;
        buf_[i] = signed_ ? (uint64_t)unzigzag(v) : v;
      }
    }
    pos_ = 0;
    return true;
  }

  bool run_v2() {
    if (in_.left() < 1) return false;
    uint8_t h = *in_.p;
    same_ = false;
    switch (h >> 6) {
      case 0: {  // SHORT_REPEAT: 3..10 copies of one value of 1..8 big-endian bytes
        int w = ((h >> 3) & 7) + 1;
        if (in_.left() < (size_t)w + 1) return false;
        uint64_t v = 0;
        for (int i = 1; i <= w; i++) v = v << 8 | in_.p[i];
        in_.p += w + 1;
        if (signed_) v = (uint64_t)unzigzag(v);
        len_ = (h & 7) + 3;
        same_ = true, same_value_ = v;
        break;
      }
      case 1: {  // DIRECT: bit-packed values
        if (in_.left() < 2) return false;
        int w = decode_width((h >> 1) & 31);
        len_ = ((h & 1) << 8 | in_.p[1]) + 1;
        in_.p += 2;
        if (!unpack(in_, w, len_, buf_)) return false;
        if (signed_)
          for (int i = 0; i < len_; i++) buf_[i] = (uint64_t)unzigzag(buf_[i]);
        break;
      }
      case 2: {  // PATCHED_BASE: a base, small offsets from it, and patches of the outliers' high bits
        if (in_.left() < 4) return false;
        int w = decode_width((h >> 1) & 31);
        len_ = ((h & 1) << 8 | in_.p[1]) + 1;
        int bw = ((in_.p[2] >> 5) & 7) + 1;
        int pw = decode_width(in_.p[2] & 31);
        int pgw = ((in_.p[3] >> 5) & 7) + 1;
        int pl = in_.p[3] & 31;
        in_.p += 4;
        if (pl == 0 || pw + pgw > 64 || w + pw > 64 || in_.left() < (size_t)bw) return false;
        uint64_t b = 0;
        for (int i = 0; i < bw; i++) b = b << 8 | in_.p[i];
        in_.p += bw;
        uint64_t sign = (uint64_t)1 << (bw * 8 - 1);  // the base is sign and magnitude
        int64_t base = (b & sign) ? -(int64_t)(b & ~sign) : (int64_t)b;
        if (!unpack(in_, w, len_, buf_)) return false;
        uint64_t patches[32];
        if (!unpack(in_, closest_fixed_bits(pw + pgw), pl, patches)) return false;
        uint64_t pmask = pw == 64 ? ~(uint64_t)0 : ((uint64_t)1 << pw) - 1;
        int64_t at = 0;
        for (int k = 0; k < pl; k++) {
          uint64_t gap = pw == 64 ? 0 : patches[k] >> pw, patch = patches[k] & pmask;
          at += (int64_t)gap;
          if (gap == 255 && patch == 0) continue;  // a gap longer than 255: no patch here
          if (at >= len_) return false;
          buf_[at] |= patch << w;
        }
        for (int i = 0; i < len_; i++) buf_[i] = (uint64_t)base + buf_[i];
        break;
      }
      default: {  // DELTA: a base, a first delta, then bit-packed absolute deltas of its sign
        if (in_.left() < 2) return false;
        uint32_t code = (h >> 1) & 31;
        int w = code ? decode_width(code) : 0;
        len_ = ((h & 1) << 8 | in_.p[1]) + 1;
        in_.p += 2;
        uint64_t b, d;
        if (!read_uvarint(in_, &b) || !read_uvarint(in_, &d)) return false;
        uint64_t base = signed_ ? (uint64_t)unzigzag(b) : b;
        int64_t delta = unzigzag(d);
        if (w == 0 && delta == 0) {  // one value repeated (a long constant run)
          same_ = true, same_value_ = base;
          break;
        }
        buf_[0] = base;
        if (w == 0) {
          for (int i = 1; i < len_; i++) buf_[i] = buf_[i - 1] + (uint64_t)delta;
        } else if (len_ >= 2) {
          buf_[1] = base + (uint64_t)delta;
          if (!unpack(in_, w, len_ - 2, buf_ + 2)) return false;
          if (delta < 0)
            for (int i = 2; i < len_; i++) buf_[i] = buf_[i - 1] - buf_[i];
          else
            for (int i = 2; i < len_; i++) buf_[i] = buf_[i - 1] + buf_[i];
        }
        break;
      }
    }
    pos_ = 0;
    return true;
  }

  In in_;
  bool v2_ = true, signed_ = true;
  int pos_ = 0, len_ = 0;
  bool same_ = false;        // the current run is len_ copies of same_value_ (buf_ not filled)
  uint64_t same_value_ = 0;
  uint64_t buf_[512];
};

// Byte run-length decoding (byte columns, and under booleans and PRESENT streams).
class ByteRle {
 public:
  void reset(In in) { in_ = in, left_ = 0; }
  bool read(uint8_t *out, int64_t n) {
    while (n > 0) {
      if (left_ == 0) {
        if (in_.left() < 1) return false;
        int8_t h = (int8_t)*in_.p++;
        if (h >= 0) {
          if (in_.left() < 1) return false;
          repeat_ = true, left_ = h + 3, value_ = *in_.p++;
        } else {
          repeat_ = false, left_ = -h;
          if (in_.left() < (size_t)left_) return false;
        }
      }
      int64_t k = std::min<int64_t>(n, left_);
      if (repeat_) {
        memset(out, value_, (size_t)k);
      } else {
        memcpy(out, in_.p, (size_t)k);
        in_.p += k;
      }
      out += k, n -= k, left_ -= (int)k;
    }
    return true;
  }

 private:
  In in_;
  bool repeat_ = false;
  int left_ = 0;
  uint8_t value_ = 0;
};

// Booleans: byte RLE of bytes holding 8 values each, most significant bit first.
class BoolRle {
 public:
  void reset(In in) { bytes_.reset(in), bits_ = 0; }
  // The next n values as bytes 0/1; returns the number of 1s, or -1 at a malformed stream.
  int64_t read(uint8_t *out, int64_t n) {
    int64_t ones = 0, j = 0;
    while (j < n && bits_ > 0) {  // what is left of the current byte
      uint8_t b = (cur_ >> 7) & 1;
      cur_ <<= 1, bits_--;
      out[j++] = b, ones += b;
    }
    int64_t whole = (n - j) / 8;
    if (whole > 0) {
      if (scratch_.size() < (size_t)whole) scratch_.resize((size_t)whole);
      if (!bytes_.read(scratch_.data(), whole)) return -1;
      for (int64_t k = 0; k < whole; k++) {
        uint8_t b = scratch_[(size_t)k];
        ones += __builtin_popcount(b);
        for (int t = 0; t < 8; t++) out[j++] = (b >> (7 - t)) & 1;
      }
    }
    if (j < n) {
      if (!bytes_.read(&cur_, 1)) return -1;
      bits_ = 8;
      while (j < n) {
        uint8_t b = (cur_ >> 7) & 1;
        cur_ <<= 1, bits_--;
        out[j++] = b, ones += b;
      }
    }
    return ones;
  }

 private:
  ByteRle bytes_;
  uint8_t cur_ = 0;
  int bits_ = 0;
  std::vector<uint8_t> scratch_;
};

// ------------------------------------------------------------------ the file

struct ColumnType {
  uint32_t kind = 0;
  uint32_t precision = 0, scale = 0;
};

struct Stripe {
  uint64_t offset = 0, index_length = 0, data_length = 0, footer_length = 0, rows = 0;
};

// One needed column while a stripe is read.
struct Column {
  uint32_t id = 0;  // ORC column id
  ColumnType type;
  std::shared_ptr<arrow::DataType> arrow_type;
  Bytes present, data, secondary, length, dict_data;
  bool has_present = false, has_secondary = false, has_length = false, v2 = true;
  BoolRle present_dec, bools;
  ByteRle bytes;
  IntRle ints, scales;
  In raw;  // floats, doubles, decimal varints, the bytes of DIRECT strings
  // Strings: lengths (DIRECT) or dictionary indices (DICTIONARY), both unsigned integer RLE. A
  // dictionary-encoded stripe is handed out as dictionary<int32, utf8|binary> arrays sharing one
  // dictionary built from LENGTH + DICTIONARY_DATA when the stripe is loaded.
  IntRle lengths, indices;
  bool dict = false;
  uint64_t dict_size = 0;  // the stripe footer's ColumnEncoding.dictionarySize
  std::shared_ptr<arrow::ArrayData> dictionary;
  std::shared_ptr<arrow::DataType> out_type;  // the arrays' type in this stripe
  std::shared_ptr<arrow::ResizableBuffer> values, validity;
  std::vector<uint8_t> valid_bytes, scratch;
  std::vector<int64_t> scale_buf;  // decimal scales; string lengths or indices
  // Where its streams are in the stripe, read and decompressed by load_column(); a late column's
  // only once one of its rows is needed, after skipping the `pending_skip` rows passed over before.
  struct Want {
    uint64_t at, len;
    Bytes *into;
  };
  std::vector<Want> wants;
  bool loaded = false;
  int64_t pending_skip = 0;
};

int value_width(uint32_t kind) {
  switch (kind) {
    case kBoolean: return 1;  // bytes 0/1 while decoding, bits in the array
    case kByte: return 1;
    case kShort: return 2;
    case kInt:
    case kDate:
    case kFloat: return 4;
    case kLong:
    case kDouble: return 8;
    case kDecimal: return 16;
    case kString:
    case kVarchar:
    case kBinary: return 4;  // int32 offsets (one more than rows) or dictionary indices
    default: return 0;
  }
}

class File final : public NativeFile {
 public:
  Status load(std::shared_ptr<arrow::io::RandomAccessFile> in) {
    in_ = std::move(in);
    ARROW_ASSIGN_OR_RAISE(int64_t size, in_->GetSize());
    if (size < 4) return Status::Invalid("file too small");
    int64_t tail_len = std::min<int64_t>(size, 1 << 14);
    ARROW_ASSIGN_OR_RAISE(auto tail, in_->ReadAt(size - tail_len, tail_len));
    if (tail->size() != tail_len) return Status::Invalid("short read of the file tail");
    const uint8_t *t = tail->data();
    size_t ps_len = t[tail_len - 1];
    if ((int64_t)ps_len + 1 > tail_len) return Status::Invalid("bad postscript length");
    uint64_t footer_len = 0;
    std::vector<uint64_t> version;
    Pb ps(std::string_view(reinterpret_cast<const char *>(t + tail_len - 1 - ps_len), ps_len));
    for (uint32_t fld, w; ps.next(&fld, &w);) {
      if (fld == 1 && w == 0) footer_len = ps.varint();
      else if (fld == 2 && w == 0) compression_ = (int)ps.varint();
      else if (fld == 3 && w == 0) block_ = ps.varint();
      else if (fld == 4 && w == 0) version.push_back(ps.varint());
      else if (fld == 4 && w == 2) {
        Pb packed(ps.bytes());
        while (packed.more()) version.push_back(packed.varint());
      } else ps.skip(w);
    }
    if (!ps.ok()) return Status::Invalid("bad postscript");
    // ORC 0.11 and 0.12 (Hive 0.11, 0.12 and on); a later major version may encode decimals otherwise
    if (!version.empty() && version[0] != 0) return Status::NotImplemented("ORC file version ", version[0]);
    if (block_ == 0 || block_ > (16u << 20)) return Status::Invalid("bad compression block size");
    int64_t footer_at = size - 1 - (int64_t)ps_len - (int64_t)footer_len;
    if (footer_at < 0) return Status::Invalid("bad footer length");
    if (compression_ != kNone) {
      ARROW_ASSIGN_OR_RAISE(codec_, make_codec(compression_));
    }
    ARROW_ASSIGN_OR_RAISE(auto fbuf, in_->ReadAt(footer_at, (int64_t)footer_len));
    ARROW_ASSIGN_OR_RAISE(std::string footer, decompress(std::string_view(*fbuf), compression_, block_));
    file_size_ = (uint64_t)size;
    return parse_footer(footer);
  }

  bool supports(int field, const arrow::DataType &t) const override {
    if (field < 0 || (size_t)field >= field_columns_.size()) return false;
    uint32_t col = field_columns_[(size_t)field];
    if (col >= types_.size()) return false;
    const ColumnType &ct = types_[col];
    using T = arrow::Type;
    switch (ct.kind) {
      case kBoolean: return t.id() == T::BOOL;
      case kByte: return t.id() == T::INT8;
      case kShort: return t.id() == T::INT16;
      case kInt: return t.id() == T::INT32;
      case kLong: return t.id() == T::INT64;
      case kFloat: return t.id() == T::FLOAT;
      case kDouble: return t.id() == T::DOUBLE;
      case kDate: return t.id() == T::DATE32;
      // the adapter reads CHAR as fixed_size_binary (padded), which is left to it
      case kString:
      case kVarchar: return t.id() == T::STRING;
      case kBinary: return t.id() == T::BINARY;
      case kDecimal: {
        if (t.id() != T::DECIMAL128 || ct.precision < 1 || ct.precision > 18 || ct.scale > ct.precision) return false;
        const auto &d = static_cast<const arrow::Decimal128Type &>(t);
        return (uint32_t)d.precision() == ct.precision && (uint32_t)d.scale() == ct.scale;
      }
      default: return false;
    }
  }

  int64_t num_stripes() const override { return (int64_t)stripes_.size(); }
  int64_t stripe_rows(int64_t i) const override { return (int64_t)stripes_[(size_t)i].rows; }

  Status read(int64_t stripe, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
              int64_t batch_rows, const std::function<Status(const arrow::RecordBatch &)> &on_batch,
              bool *handled) override {
    return read_stripe(stripe, fields, schema, batch_rows, nullptr, on_batch, nullptr, nullptr, handled);
  }

  Status read_late(int64_t stripe, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
                   int64_t batch_rows, const std::vector<bool> &early, const FilterFn &filter, const RowsFn &rows,
                   bool *handled) override {
    return read_stripe(stripe, fields, schema, batch_rows, &early, nullptr, &filter, &rows, handled);
  }

 private:
  // Without `early`: every column of every batch decoded, to `on_batch`. With it: the early
  // columns, `filter`, then the late ones decoded or skipped, to `rows_fn` (see read_late).
  Status read_stripe(int64_t stripe, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
                     int64_t batch_rows, const std::vector<bool> *early,
                     const std::function<Status(const arrow::RecordBatch &)> &on_batch, const FilterFn *filter,
                     const RowsFn *rows_fn, bool *handled) {
    *handled = false;
    if (stripe < 0 || (size_t)stripe >= stripes_.size()) return Status::OK();
    const Stripe &s = stripes_[(size_t)stripe];
    auto is_late = [&](size_t k) { return early && !(*early)[k]; };
    ARROW_RETURN_NOT_OK(load_stripe(s, fields, schema, handled));
    if (!*handled) return Status::OK();
    for (size_t k = 0; k < cols_.size(); k++)
      if (!is_late(k)) ARROW_RETURN_NOT_OK(load_column(*cols_[k], s.rows));
    // dictionary-encoded string columns come as dictionary arrays: the batches' schema says so
    std::shared_ptr<arrow::Schema> batch_schema = schema, early_schema;
    for (size_t k = 0; k < cols_.size(); k++)
      if (cols_[k]->dict) batch_schema = *batch_schema->SetField((int)k, schema->field((int)k)->WithType(cols_[k]->out_type));
    if (early) {
      early_schema = batch_schema;
      for (size_t k = 0; k < cols_.size(); k++)
        if (is_late(k)) early_schema = *early_schema->SetField((int)k, schema->field((int)k)->WithType(arrow::null()));
    }
    const int64_t rows = (int64_t)s.rows;
    std::vector<std::shared_ptr<arrow::ArrayData>> arrays(cols_.size());
    std::vector<char> decoded(cols_.size());  // this batch's late columns decoded so far
    for (int64_t pos = 0; pos < rows; pos += batch_rows) {
      int64_t n = std::min(batch_rows, rows - pos);
      if (!early) {
        for (size_t k = 0; k < cols_.size(); k++) ARROW_RETURN_NOT_OK(decode(*cols_[k], n, batch_rows, &arrays[k]));
        ARROW_RETURN_NOT_OK(on_batch(*arrow::RecordBatch::Make(batch_schema, n, arrays)));
        continue;
      }
      for (size_t k = 0; k < cols_.size(); k++)
        if (is_late(k)) arrays[k] = jgscan::late_placeholder(n);
        else ARROW_RETURN_NOT_OK(decode(*cols_[k], n, batch_rows, &arrays[k]));
      std::fill(decoded.begin(), decoded.end(), 0);
      // a late column for `kept` (a staged filter's further predicates, then the rows' other columns)
      auto late = [&](size_t k, const Kept &kept) -> Status {
        Column &c = *cols_[k];
        if (!c.loaded) {
          ARROW_RETURN_NOT_OK(load_column(c, s.rows));
          ARROW_RETURN_NOT_OK(skip(c, c.pending_skip, batch_rows));
          c.pending_skip = 0;
        }
        decoded[k] = 1;
        // few rows kept: a decimal column is decoded at those rows only (decode_kept)
        if (kept.rows != nullptr && kept.n * kSparseKept <= (size_t)n && c.type.kind == kDecimal && !c.has_present)
          return decode_kept(c, n, batch_rows, kept, &arrays[k]);
        return decode(c, n, batch_rows, &arrays[k]);
      };
      const Materialize more = [&](int k, const Kept &kept) -> arrow::Result<std::shared_ptr<arrow::ArrayData>> {
        if (k < 0 || (size_t)k >= cols_.size() || !is_late((size_t)k))
          return Status::Invalid("ORC batch column ", k, " asked for is not a late one");
        if (!decoded[(size_t)k]) ARROW_RETURN_NOT_OK(late((size_t)k, kept));
        return arrays[(size_t)k];
      };
      ARROW_ASSIGN_OR_RAISE(Kept kept, (*filter)(*arrow::RecordBatch::Make(early_schema, n, arrays), more));
      const size_t passed = kept.n;
      for (size_t k = 0; k < cols_.size(); k++) {
        if (!is_late(k) || decoded[k]) continue;
        Column &c = *cols_[k];
        if (passed == 0) {
          if (c.loaded) ARROW_RETURN_NOT_OK(skip(c, n, batch_rows));
          else c.pending_skip += n;
          continue;
        }
        ARROW_RETURN_NOT_OK(late(k, kept));
      }
      if (passed == 0) jgscan::g_late_rows_skipped.fetch_add((uint64_t)n, std::memory_order_relaxed);
      ARROW_RETURN_NOT_OK((*rows_fn)(*arrow::RecordBatch::Make(batch_schema, n, arrays), passed));
    }
    for (auto &cp : cols_)
      if (!cp->loaded) jgscan::g_late_chunks_skipped.fetch_add(cp->wants.size(), std::memory_order_relaxed);
    return Status::OK();
  }

  // Step column c (loaded) over its next n rows without building an array: PRESENT, lengths,
  // scales and RLE runs are still parsed, fixed-width values and string bytes stepped over.
  Status skip(Column &c, int64_t n, int64_t batch_rows) {
    while (n > 0) {
      const int64_t m = std::min(n, batch_rows);
      n -= m;
      int64_t dense = m;
      if (c.has_present) {
        if (c.valid_bytes.size() < (size_t)m) c.valid_bytes.resize((size_t)m);
        dense = c.present_dec.read(c.valid_bytes.data(), m);
        if (dense < 0) return bad(c, "PRESENT stream");
      }
      if (c.scratch.size() < (size_t)dense) c.scratch.resize((size_t)dense);
      if (c.scale_buf.size() < (size_t)dense) c.scale_buf.resize((size_t)dense);
      const int width = value_width(c.type.kind);
      switch (c.type.kind) {
        case kString:
        case kVarchar:
        case kBinary:
          if (c.dict) {
            if (!c.indices.skip(dense)) return bad(c, "DATA stream");
          } else {
            if (!c.lengths.read(c.scale_buf.data(), dense)) return bad(c, "LENGTH stream");
            uint64_t total = 0;
            for (int64_t j = 0; j < dense; j++) {
              uint64_t l = (uint64_t)c.scale_buf[(size_t)j];  // unsigned: a "negative" length is a huge one
              if (l > c.raw.left() - total) return bad(c, "LENGTH stream (past the end of DATA)");
              total += l;
            }
            c.raw.p += total;
          }
          break;
        case kBoolean:
          if (c.bools.read(c.scratch.data(), dense) < 0) return bad(c, "DATA stream");
          break;
        case kByte:
          if (!c.bytes.read(c.scratch.data(), dense)) return bad(c, "DATA stream");
          break;
        case kShort:
        case kInt:
        case kDate:
        case kLong:
          if (!c.ints.skip(dense)) return bad(c, "DATA stream");
          break;
        case kFloat:
        case kDouble: {
          size_t bytes = (size_t)dense * (size_t)width;
          if (bytes > c.raw.left()) return bad(c, "DATA stream");
          c.raw.p += bytes;
          break;
        }
        case kDecimal:
          if (!c.scales.skip(dense)) return bad(c, "SECONDARY stream");
          if (!skip_varints(c.raw, dense)) return bad(c, "DATA stream");
          break;
        default: return Status::NotImplemented("ORC type kind ", c.type.kind);
      }
    }
    return Status::OK();
  }

 public:

 private:
  Status parse_footer(const std::string &footer) {
    Pb f(footer);
    for (uint32_t fld, w; f.next(&fld, &w);) {
      if (fld == 3 && w == 2) {  // StripeInformation
        Pb si(f.bytes());
        Stripe s;
        for (uint32_t f2, w2; si.next(&f2, &w2);) {
          if (w2 != 0) si.skip(w2);
          else if (f2 == 1) s.offset = si.varint();
          else if (f2 == 2) s.index_length = si.varint();
          else if (f2 == 3) s.data_length = si.varint();
          else if (f2 == 4) s.footer_length = si.varint();
          else if (f2 == 5) s.rows = si.varint();
          else si.skip(w2);
        }
        if (!si.ok()) return Status::Invalid("bad stripe information");
        uint64_t end = s.offset + s.index_length + s.data_length + s.footer_length;
        if (end < s.offset || end > file_size_ || s.rows > ((uint64_t)1 << 40))
          return Status::Invalid("stripe outside the file");
        stripes_.push_back(s);
      } else if (fld == 4 && w == 2) {  // Type
        Pb t(f.bytes());
        ColumnType ct;
        std::vector<uint32_t> subtypes;
        for (uint32_t f2, w2; t.next(&f2, &w2);) {
          if (f2 == 1 && w2 == 0) ct.kind = (uint32_t)t.varint();
          else if (f2 == 2 && w2 == 2) {
            Pb packed(t.bytes());
            while (packed.more()) subtypes.push_back((uint32_t)packed.varint());
            if (!packed.ok()) return Status::Invalid("bad type");
          } else if (f2 == 2 && w2 == 0) subtypes.push_back((uint32_t)t.varint());
          else if (f2 == 5 && w2 == 0) ct.precision = (uint32_t)t.varint();
          else if (f2 == 6 && w2 == 0) ct.scale = (uint32_t)t.varint();
          else t.skip(w2);
        }
        if (!t.ok()) return Status::Invalid("bad type");
        if (types_.empty()) {
          if (ct.kind != kStruct) return Status::Invalid("root type is not a struct");
          field_columns_ = subtypes;
        }
        types_.push_back(ct);
      } else {
        f.skip(w);
      }
    }
    return f.ok() ? Status::OK() : Status::Invalid("bad footer");
  }

  // Parse the stripe footer, check the encodings, read and decompress the needed streams.
  Status load_stripe(const Stripe &s, const std::vector<int> &fields, const std::shared_ptr<arrow::Schema> &schema,
                     bool *handled) {
    while (cols_.size() < fields.size()) cols_.push_back(std::make_unique<Column>());
    cols_.resize(fields.size());
    std::vector<int> slot_of(types_.size(), -1);  // ORC column id -> cols_ index
    for (size_t k = 0; k < fields.size(); k++) {
      Column &c = *cols_[k];
      if (!supports(fields[k], *schema->field((int)k)->type())) return Status::OK();
      c.id = field_columns_[(size_t)fields[k]];
      c.type = types_[c.id];
      c.arrow_type = schema->field((int)k)->type();
      c.has_present = c.has_secondary = c.has_length = c.dict = false;
      c.dict_size = 0;
      c.dictionary.reset();
      c.out_type = c.arrow_type;
      slot_of[c.id] = (int)k;
    }
    uint64_t footer_at = s.offset + s.index_length + s.data_length;
    ARROW_ASSIGN_OR_RAISE(auto fbuf, in_->ReadAt((int64_t)footer_at, (int64_t)s.footer_length));
    if ((uint64_t)fbuf->size() != s.footer_length) return Status::Invalid("short read of a stripe footer");
    ARROW_ASSIGN_OR_RAISE(std::string footer, decompress(std::string_view(*fbuf), compression_, block_));
    for (auto &cp : cols_) cp->wants.clear(), cp->loaded = false, cp->pending_skip = 0;
    std::vector<uint32_t> encodings;
    std::vector<uint64_t> dict_sizes;
    uint64_t at = s.offset, end = s.offset + s.index_length + s.data_length;
    Pb f(footer);
    for (uint32_t fld, w; f.next(&fld, &w);) {
      if (fld == 1 && w == 2) {  // Stream
        Pb st(f.bytes());
        uint64_t kind = 0, column = 0, length = 0;
        for (uint32_t f2, w2; st.next(&f2, &w2);) {
          if (f2 == 1 && w2 == 0) kind = st.varint();
          else if (f2 == 2 && w2 == 0) column = st.varint();
          else if (f2 == 3 && w2 == 0) length = st.varint();
          else st.skip(w2);
        }
        if (!st.ok()) return Status::Invalid("bad stream in a stripe footer");
        if (length > end - at) return Status::Invalid("stream outside its stripe");
        if (column < slot_of.size() && slot_of[column] >= 0) {
          Column &c = *cols_[(size_t)slot_of[column]];
          if (kind == kPresent) c.wants.push_back({at, length, &c.present}), c.has_present = true;
          else if (kind == kData) c.wants.push_back({at, length, &c.data});
          else if (kind == kSecondary) c.wants.push_back({at, length, &c.secondary}), c.has_secondary = true;
          else if (kind == kLength && is_bytes_kind(c.type.kind)) c.wants.push_back({at, length, &c.length}), c.has_length = true;
          else if (kind == kDictionaryData && is_bytes_kind(c.type.kind)) c.wants.push_back({at, length, &c.dict_data});
          else if (kind < 6) return Status::OK();  // e.g. DICTIONARY_COUNT: not an encoding of ours
        }
        at += length;
      } else if (fld == 2 && w == 2) {  // ColumnEncoding
        Pb ce(f.bytes());
        uint32_t kind = 0;
        uint64_t dict_size = 0;
        for (uint32_t f2, w2; ce.next(&f2, &w2);)
          if (f2 == 1 && w2 == 0) kind = (uint32_t)ce.varint();
          else if (f2 == 2 && w2 == 0) dict_size = ce.varint();
          else ce.skip(w2);
        if (!ce.ok()) return Status::Invalid("bad column encoding in a stripe footer");
        encodings.push_back(kind);
        dict_sizes.push_back(dict_size);
      } else if (fld == 6) {
        return Status::OK();  // encrypted columns (ORC 1.6 and on): the adapter's business
      } else {
        f.skip(w);
      }
    }
    if (!f.ok()) return Status::Invalid("bad stripe footer");
    for (auto &cp : cols_) {
      Column &c = *cp;
      if (c.id >= encodings.size()) return Status::Invalid("stripe footer has no encoding for column ", c.id);
      uint32_t e = encodings[c.id];
      // dictionaries only for STRING and VARCHAR (ORC writes BINARY directly)
      bool dict = (e == kDictionary || e == kDictionaryV2) && (c.type.kind == kString || c.type.kind == kVarchar);
      if (e != kDirect && e != kDirectV2 && !dict) return Status::OK();
      c.v2 = e == kDirectV2 || e == kDictionaryV2;
      if (c.type.kind == kDecimal && !c.has_secondary) return Status::OK();  // ORC 2's decimal64: not ours
      if (dict) {
        c.dict = true;
        c.dict_size = dict_sizes[c.id];
        c.out_type = arrow::dictionary(arrow::int32(), c.arrow_type);
      }
      c.length.clear(), c.dict_data.clear();
      c.present.clear(), c.data.clear(), c.secondary.clear();
    }
    *handled = true;  // from here on, anything unexpected is a bad file
    return Status::OK();
  }

  // Read and decompress column c's streams in the current stripe (of `stripe_rows` rows), and set
  // up its decoders.
  Status load_column(Column &c, uint64_t stripe_rows) {
    for (const Column::Want &wt : c.wants) {
      ARROW_ASSIGN_OR_RAISE(auto b, in_->ReadAt((int64_t)wt.at, (int64_t)wt.len));
      if ((uint64_t)b->size() != wt.len) return Status::Invalid("short read of a stream");
      Status st = append_decompressed(b->data(), (size_t)b->size(), compression_, block_, codec_.get(), wt.into);
      if (!st.ok()) return Status::Invalid("column ", column_name(*wt.into), ": ", st.message());
    }
    c.loaded = true;
    {
      for (Bytes *b : {&c.present, &c.data, &c.secondary, &c.length, &c.dict_data}) {
        if (!b->reserve(b->size())) return Status::OutOfMemory("ORC stream");
        b->seal();
      }
      auto in_of = [](Bytes &b) { return In{b.data(), b.data() + b.size()}; };
      if (c.has_present) c.present_dec.reset(in_of(c.present));
      In d = in_of(c.data);
      switch (c.type.kind) {
        case kBoolean: c.bools.reset(d); break;
        case kByte: c.bytes.reset(d); break;
        case kFloat:
        case kDouble: c.raw = d; break;
        case kDecimal:
          c.raw = d;
          c.scales.reset(in_of(c.secondary), c.v2, true);
          break;
        case kString:
        case kVarchar:
        case kBinary:
          if (c.dict) {
            c.indices.reset(d, c.v2, false);
            ARROW_RETURN_NOT_OK(load_dictionary(c, stripe_rows));
          } else {
            c.raw = d;
            c.lengths.reset(in_of(c.length), c.v2, false);
          }
          break;
        default: c.ints.reset(d, c.v2, true); break;
      }
    }
    return Status::OK();
  }

  // A stripe's string dictionary: dictionarySize lengths from LENGTH, the entries' bytes one after
  // another in DICTIONARY_DATA; copied into an Arrow string array that the stripe's batches share
  // (the driver may keep it past a batch, unlike the reused stream buffers).
  Status load_dictionary(Column &c, uint64_t stripe_rows) {
    // every entry is some row's value: a larger dictionary is a bad footer, not a huge allocation
    if (c.dict_size > stripe_rows) return bad(c, "stripe footer: dictionary larger than the stripe");
    const int64_t n = (int64_t)c.dict_size;
    IntRle lens;
    lens.reset(In{c.length.data(), c.length.data() + c.length.size()}, c.v2, false);
    if (c.scale_buf.size() < (size_t)n) c.scale_buf.resize((size_t)n);
    int64_t *len = c.scale_buf.data();
    if (!lens.read(len, n)) return bad(c, "LENGTH stream");
    ARROW_ASSIGN_OR_RAISE(auto offsets, arrow::AllocateBuffer((n + 1) * 4, jgscan::pool()));
    auto *off = reinterpret_cast<int32_t *>(offsets->mutable_data());
    const uint64_t avail = c.dict_data.size();
    uint64_t total = 0;
    off[0] = 0;
    for (int64_t j = 0; j < n; j++) {
      uint64_t l = (uint64_t)len[j];  // unsigned: a "negative" length is a huge one
      if (l > avail - total) return bad(c, "LENGTH stream (past the end of DICTIONARY_DATA)");
      total += l;
      if (total > (uint64_t)INT32_MAX) return bad(c, "DICTIONARY_DATA stream (over 2 GiB)");
      off[j + 1] = (int32_t)total;
    }
    ARROW_ASSIGN_OR_RAISE(auto bytes, arrow::AllocateBuffer((int64_t)total, jgscan::pool()));
    if (total) memcpy(bytes->mutable_data(), c.dict_data.data(), (size_t)total);
    c.dictionary = arrow::ArrayData::Make(c.arrow_type, n, {nullptr, std::move(offsets), std::move(bytes)}, 0);
    return Status::OK();
  }

  std::string column_name(const Bytes &b) const {
    for (const auto &cp : cols_)
      if (&cp->present == &b || &cp->data == &b || &cp->secondary == &b || &cp->length == &b || &cp->dict_data == &b)
        return std::to_string(cp->id);
    return "?";
  }

  static Status bad(const Column &c, const char *what) {
    return Status::Invalid("ORC column ", c.id, ": malformed or truncated ", what);
  }

  // Spread `dense` values of `width` bytes at the front of v over the rows whose valid byte is 1.
  static void spread(uint8_t *v, const uint8_t *valid, int64_t n, int64_t dense, int width) {
    int64_t k = dense - 1;
    for (int64_t j = n - 1; j >= 0 && k < j; j--) {
      if (valid[j]) memmove(v + j * width, v + k-- * width, (size_t)width);
      else memset(v + j * width, 0, (size_t)width);
    }
  }

  // Column c's reusable value and validity buffers, large enough for a batch.
  Status batch_buffers(Column &c, int64_t batch_rows) {
    const int64_t value_bytes = (batch_rows + 1) * value_width(c.type.kind);  // + 1: string offsets
    if (!c.values) {
      ARROW_ASSIGN_OR_RAISE(c.values, arrow::AllocateResizableBuffer(value_bytes, jgscan::pool()));
      ARROW_ASSIGN_OR_RAISE(c.validity, arrow::AllocateResizableBuffer(arrow::bit_util::BytesForBits(batch_rows), jgscan::pool()));
    } else if (c.values->size() < value_bytes) {
      ARROW_RETURN_NOT_OK(c.values->Resize(value_bytes));
      ARROW_RETURN_NOT_OK(c.validity->Resize(arrow::bit_util::BytesForBits(batch_rows)));
    }
    return Status::OK();
  }

  // The next n rows of column c as an Arrow array (buffers reused from batch to batch: the
  // driver is done with a batch when its callback returns).
  Status decode(Column &c, int64_t n, int64_t batch_rows, std::shared_ptr<arrow::ArrayData> *out) {
    const int width = value_width(c.type.kind);
    ARROW_RETURN_NOT_OK(batch_buffers(c, batch_rows));
    int64_t dense = n;
    if (c.has_present) {
      if (c.valid_bytes.size() < (size_t)n) c.valid_bytes.resize((size_t)n);
      dense = c.present_dec.read(c.valid_bytes.data(), n);
      if (dense < 0) return bad(c, "PRESENT stream");
    }
    const int64_t nulls = n - dense;
    uint8_t *v = c.values->mutable_data();
    std::shared_ptr<arrow::Buffer> str_data;  // DIRECT strings: this batch's bytes
    switch (c.type.kind) {
      case kString:
      case kVarchar:
      case kBinary:
        if (c.dict) ARROW_RETURN_NOT_OK(decode_indices(c, dense, reinterpret_cast<int32_t *>(v)));
        else ARROW_RETURN_NOT_OK(decode_direct(c, n, dense, nulls ? c.valid_bytes.data() : nullptr,
                                               reinterpret_cast<int32_t *>(v), &str_data));
        break;
      case kBoolean: {
        if (c.scratch.size() < (size_t)n) c.scratch.resize((size_t)n);
        if (c.bools.read(c.scratch.data(), dense) < 0) return bad(c, "DATA stream");
        memset(v, 0, (size_t)arrow::bit_util::BytesForBits(n));
        const uint8_t *valid = nulls ? c.valid_bytes.data() : nullptr;
        for (int64_t j = 0, k = 0; j < n; j++)
          if (!valid || valid[j])
            if (c.scratch[(size_t)k++]) arrow::bit_util::SetBit(v, j);
        break;
      }
      case kByte:
        if (!c.bytes.read(v, dense)) return bad(c, "DATA stream");
        break;
      case kShort:
        if (!c.ints.read(reinterpret_cast<int16_t *>(v), dense)) return bad(c, "DATA stream");
        break;
      case kInt:
      case kDate:
        if (!c.ints.read(reinterpret_cast<int32_t *>(v), dense)) return bad(c, "DATA stream");
        break;
      case kLong:
        if (!c.ints.read(reinterpret_cast<int64_t *>(v), dense)) return bad(c, "DATA stream");
        break;
      case kFloat:
      case kDouble: {
        size_t bytes = (size_t)dense * (size_t)width;
        if (bytes > c.raw.left()) return bad(c, "DATA stream");
        memcpy(v, c.raw.p, bytes);
        c.raw.p += bytes;
        break;
      }
      case kDecimal:
        ARROW_RETURN_NOT_OK(decode_decimals(c, dense, reinterpret_cast<int64_t *>(v)));
        break;
      default: return Status::NotImplemented("ORC type kind ", c.type.kind);
    }
    std::shared_ptr<arrow::Buffer> validity;
    const bool offsets = str_data != nullptr;  // already laid out over every row
    if (nulls) {
      if (c.type.kind != kBoolean && !offsets) spread(v, c.valid_bytes.data(), n, dense, width);
      uint8_t *bits = c.validity->mutable_data();
      memset(bits, 0, (size_t)arrow::bit_util::BytesForBits(n));
      const uint8_t *valid = c.valid_bytes.data();
      for (int64_t j = 0; j < n; j++)
        if (valid[j]) arrow::bit_util::SetBit(bits, j);
      validity = c.validity;
    }
    if (offsets) {
      *out = arrow::ArrayData::Make(c.arrow_type, n, {validity, c.values, std::move(str_data)}, nulls);
    } else {
      *out = arrow::ArrayData::Make(c.out_type, n, {validity, c.values}, nulls);
      if (c.dict) (*out)->dictionary = c.dictionary;
    }
    return Status::OK();
  }

  // Dictionary indices of the next n non-NULL values, each checked against the dictionary's size.
  Status decode_indices(Column &c, int64_t n, int32_t *out) {
    if (c.scale_buf.size() < (size_t)n) c.scale_buf.resize((size_t)n);
    int64_t *idx = c.scale_buf.data();
    if (!c.indices.read(idx, n)) return bad(c, "DATA stream");
    uint64_t bad_bits = 0;  // any index past the dictionary, without a branch per value
    for (int64_t j = 0; j < n; j++) {
      bad_bits |= (uint64_t)((uint64_t)idx[j] >= c.dict_size);
      out[j] = (int32_t)idx[j];
    }
    if (bad_bits) return Status::Invalid("ORC column ", c.id, ": dictionary index past the dictionary's ", c.dict_size, " entries");
    return Status::OK();
  }

  // The next n rows of a DIRECT string column: int32 offsets over every row (a NULL row is empty)
  // into `*bytes`, a view of the DATA stream (alive until the next stripe is loaded; the driver is
  // done with a batch when its callback returns). valid is NULL when no row is NULL.
  Status decode_direct(Column &c, int64_t n, int64_t dense, const uint8_t *valid, int32_t *off,
                       std::shared_ptr<arrow::Buffer> *bytes) {
    if (c.scale_buf.size() < (size_t)dense) c.scale_buf.resize((size_t)dense);
    int64_t *len = c.scale_buf.data();
    if (!c.lengths.read(len, dense)) return bad(c, "LENGTH stream");
    const uint64_t avail = std::min<uint64_t>(c.raw.left(), (uint64_t)INT32_MAX);
    uint64_t total = 0;
    off[0] = 0;
    for (int64_t j = 0, k = 0; j < n; j++) {
      if (!valid || valid[j]) {
        uint64_t l = (uint64_t)len[k++];  // unsigned: a "negative" length is a huge one
        if (l > avail - total) {
          if (c.raw.left() > (uint64_t)INT32_MAX) return Status::Invalid("ORC column ", c.id, ": over 2 GiB of strings in one batch");
          return bad(c, "LENGTH stream (past the end of DATA)");
        }
        total += l;
      }
      off[j + 1] = (int32_t)total;
    }
    *bytes = std::make_shared<arrow::Buffer>(c.raw.p, (int64_t)total);
    c.raw.p += total;
    return Status::OK();
  }

  // Decimals of up to 18 digits: zigzag varints in DATA, each value's scale in SECONDARY, brought
  // to the column's scale as ORC's reader does (multiplied up or divided down); written as Arrow
  // Decimal128 (two little-endian 64-bit words).
  Status decode_decimals(Column &c, int64_t n, int64_t *out) {
    ARROW_ASSIGN_OR_RAISE(const int64_t *sc, decimal_scales(c, n));
    const int64_t want = (int64_t)c.type.scale;
    In in = c.raw;
    for (int64_t j = 0; j < n; j++)
      if (!decimal_at(in, sc ? sc[j] : want, want, out + 2 * j)) return bad(c, "DATA stream");
    c.raw = in;
    return Status::OK();
  }

  // A late decimal column (no NULLs) in a batch where few rows passed: the values at the kept rows
  // only, the varints between them stepped over (skip_varints). Every row's scale is still read
  // and checked, so that a bad one fails the job as decode() would. The other rows' values are
  // whatever the buffer held.
  Status decode_kept(Column &c, int64_t n, int64_t batch_rows, const Kept &kept,
                     std::shared_ptr<arrow::ArrayData> *out) {
    ARROW_RETURN_NOT_OK(batch_buffers(c, batch_rows));
    ARROW_ASSIGN_OR_RAISE(const int64_t *sc, decimal_scales(c, n));
    const int64_t want = (int64_t)c.type.scale;
    int64_t *v = reinterpret_cast<int64_t *>(c.values->mutable_data());
    In in = c.raw;
    int64_t at = 0;  // the row the stream is at
    for (size_t j = 0; j < kept.n; j++) {
      const int64_t r = kept.rows[j];
      if (r < at || r >= n || !skip_varints(in, r - at) || !decimal_at(in, sc ? sc[r] : want, want, v + 2 * r))
        return bad(c, "DATA stream");
      at = r + 1;
    }
    if (!skip_varints(in, n - at)) return bad(c, "DATA stream");
    c.raw = in;
    jgscan::g_late_values_skipped.fetch_add((uint64_t)(n - (int64_t)kept.n), std::memory_order_relaxed);
    *out = arrow::ArrayData::Make(c.out_type, n, {nullptr, c.values}, 0);
    return Status::OK();
  }

  // The scales of the next n decimals (SECONDARY), each checked: within 18 of the column's. Null
  // when every one is the column's own scale (writers store one scale per column: its runs are
  // then not expanded, and no value needs rescaling).
  arrow::Result<const int64_t *> decimal_scales(Column &c, int64_t n) {
    if (c.scale_buf.size() < (size_t)n) c.scale_buf.resize((size_t)n);
    int64_t *sc = c.scale_buf.data();
    bool same = false;
    int64_t one = 0;
    if (!c.scales.read_same(sc, n, &same, &one)) return bad(c, "SECONDARY stream");
    if (same) {
      if (n == 0 || one == (int64_t)c.type.scale) return nullptr;
      std::fill(sc, sc + n, one);  // checked below with the rest
    }
    // s - want + 18 in 0..36, computed unsigned: a file's scale may be any 64-bit value
    const uint64_t low = (uint64_t)c.type.scale - 18u;
    uint64_t far = 0;  // any scale out of range, without a branch per value
    for (int64_t j = 0; j < n; j++) far |= (uint64_t)sc[j] - low > 36u;
    if (far)
      for (int64_t j = 0; j < n; j++)
        if ((uint64_t)sc[j] - low > 36u)
          return Status::Invalid("ORC column ", c.id, ": decimal scale ", sc[j], " out of range");
    return sc;
  }

  // The next varint of `in` as a decimal of scale s, brought to scale `want` (multiplied up or
  // divided down, as ORC's reader does; |s - want| <= 18, decimal_scales), into out[0..2) as Arrow's
  // Decimal128 words. False when the varint is cut short or longer than 10 bytes.
  static bool decimal_at(In &in, int64_t s, int64_t want, int64_t *out) {
    uint64_t u;
    if (in.e - in.p >= 10) {  // the common case: no end check per byte
      const uint8_t *p = in.p;
      u = p[0] & 0x7f;
      int i = 0;
      while (p[i] & 0x80) {
        if (++i == 10) return false;
        u |= (uint64_t)(p[i] & 0x7f) << (7 * i);
      }
      in.p = p + i + 1;
    } else if (!read_uvarint(in, &u)) {
      return false;
    }
    int64_t v = unzigzag(u);
    if (s < want) v = (int64_t)((uint64_t)v * (uint64_t)jg_pow10[want - s]);
    else if (s > want) v /= jg_pow10[s - want];
    out[0] = v;
    out[1] = v >> 63;
    return true;
  }

  std::shared_ptr<arrow::io::RandomAccessFile> in_;
  uint64_t file_size_ = 0;
  int compression_ = kNone;
  uint64_t block_ = 256 << 10;
  std::unique_ptr<arrow::util::Codec> codec_;
  std::vector<Stripe> stripes_;
  std::vector<ColumnType> types_;        // by ORC column id
  std::vector<uint32_t> field_columns_;  // ORC column id of each top-level field
  std::vector<std::unique_ptr<Column>> cols_;
};

}  // namespace

arrow::Result<std::string> decompress(std::string_view in, int kind, uint64_t block) {
  if (kind == kNone) return std::string(in);
  ARROW_ASSIGN_OR_RAISE(auto codec, make_codec(kind));
  Bytes out;
  ARROW_RETURN_NOT_OK(append_decompressed(reinterpret_cast<const uint8_t *>(in.data()), in.size(), kind,
                                          std::max<uint64_t>(block, 1), codec.get(), &out));
  if (out.size() == 0) return std::string();
  return std::string(reinterpret_cast<const char *>(out.data()), out.size());
}

arrow::Result<std::unique_ptr<NativeFile>> NativeFile::open(std::shared_ptr<arrow::io::RandomAccessFile> in) {
  auto f = std::make_unique<File>();
  ARROW_RETURN_NOT_OK(f->load(std::move(in)));
  return std::unique_ptr<NativeFile>(std::move(f));
}

}  // namespace jgorc
