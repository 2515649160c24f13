// Snappy blocks decompressed with the system's libsnappy (Debian's libsnappy-dev, installed by
// scripts/setup.sh) rather than the copy built into the pyarrow wheel's libarrow.
//
// Why: Snappy is most of what a columnar scan of a Snappy-compressed file spends, and on the
// data analytics files hold most (8-byte integers and decimals with a few significant bytes,
// which Snappy turns into runs of short literals and copies) the wheel's build decompresses TPC-H
// lineitem's l_extendedprice at about 0.65 GB/s where libsnappy does about 1 GB/s on the same
// blocks (bench/README.md). Used for Parquet pages (scan_parquet.cpp) and ORC compression chunks
// (orc_native.cpp); every other codec stays on Arrow's.
#pragma once

#include <arrow/result.h>
#include <arrow/status.h>
#include <snappy.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace jgscan {

// Whether Snappy goes through libsnappy (the default) or Arrow's codec: `scan.libsnappy 0` picks
// Arrow's, for comparisons (bench/scan_columnar.py) and as a way out. Set once while the NCA is
// configured, before any reading.
inline bool g_libsnappy = true;
// Bytes libsnappy produced in this process (the `done` stats' `libsnappy_bytes`).
inline std::atomic<uint64_t> g_libsnappy_bytes{0};

// The length the Snappy block [in, in + n) says it decompresses to.
inline arrow::Result<size_t> snappy_length(const uint8_t *in, size_t n) {
  size_t len = 0;
  if (!snappy::GetUncompressedLength(reinterpret_cast<const char *>(in), n, &len))
    return arrow::Status::Invalid("corrupt Snappy block (bad length preamble)");
  return len;
}

// Decompress the Snappy block [in, in + n) into out[0, cap); returns the decompressed length. A
// block that is corrupt or says it is longer than `cap` is an error (a bad file), never a write
// past `out`: libsnappy checks every tag against the length the preamble gave.
inline arrow::Result<size_t> snappy_decompress(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
  ARROW_ASSIGN_OR_RAISE(size_t len, snappy_length(in, n));
  if (len > cap)
    return arrow::Status::Invalid("Snappy block decompresses to ", len, " bytes, more than the ", cap, " expected");
  if (!snappy::RawUncompress(reinterpret_cast<const char *>(in), n, reinterpret_cast<char *>(out)))
    return arrow::Status::Invalid("corrupt Snappy block");
  g_libsnappy_bytes.fetch_add(len, std::memory_order_relaxed);
  return len;
}

}  // namespace jgscan
