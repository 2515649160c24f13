// Baseline for bench/scan_json_raw.py: simdjson's own parse of a JSON Lines file, read the way
// the scan NCA reads it (16 MiB chunks cut at the last newline, iterate_many with a 1 MiB
// window), touching every field of every object (each value converted by its JSON kind).
//
//   simdjson_raw FILE  ->  prints {"bytes": N, "docs": N, "seconds": S, "checksum": X}
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <simdjson.h>

using namespace simdjson;

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) return perror("open"), 1;
  const size_t chunk = 16u << 20, batch = 1u << 20;
  size_t cap = chunk;
  char *buf = static_cast<char *>(malloc(cap + SIMDJSON_PADDING));
  ondemand::parser parser;
  uint64_t bytes = 0, docs = 0, sum = 0;
  double fsum = 0;
  size_t have = 0;
  bool eof = false;
  auto t0 = std::chrono::steady_clock::now();
  while (!eof || have) {
    ssize_t k = eof ? 0 : read(fd, buf + have, cap - have);
    if (k < 0) return perror("read"), 1;
    if (k == 0) eof = true;
    have += (size_t)k;
    bytes += (size_t)k;
    size_t n = have;
    if (!eof) {
      const char *nl = static_cast<const char *>(memrchr(buf, '\n', have));
      if (!nl) return fprintf(stderr, "line longer than a chunk\n"), 1;
      n = (size_t)(nl - buf) + 1;
    }
    ondemand::document_stream stream;
    if (parser.iterate_many(reinterpret_cast<const uint8_t *>(buf), n, batch).get(stream)) return 1;
    for (auto doc : stream) {
      ondemand::object obj;
      if (doc.get_object().get(obj)) return fprintf(stderr, "not an object\n"), 1;
      for (auto field : obj) {
        ondemand::raw_json_string key;
        if (field.key().get(key)) return 1;
        sum += (uint8_t)key.raw()[0];
        ondemand::value v = field.value();
        ondemand::json_type t;
        if (v.type().get(t)) return 1;
        switch (t) {
          case ondemand::json_type::number: {
            double d;
            if (v.get_double().get(d)) return 1;
            fsum += d;
            break;
          }
          case ondemand::json_type::string: {
            std::string_view s;
            if (v.get_string().get(s)) return 1;
            sum += s.size();
            break;
          }
          case ondemand::json_type::boolean: {
            bool b;
            if (v.get_bool().get(b)) return 1;
            sum += b;
            break;
          }
          default: break;  // null; nested values are skipped
        }
      }
      docs++;
    }
    memmove(buf, buf + n, have - n);
    have -= n;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("{\"bytes\": %llu, \"docs\": %llu, \"seconds\": %.6f, \"checksum\": %.1f}\n", (unsigned long long)bytes,
         (unsigned long long)docs, s, (double)sum + fsum);
  return 0;
}
