// Shared scans (docs/shared-scans.md): one read of the files serves the scan queries of several
// jobs. The generated file lists the members (jg_shared_members: each a scan query compiled under
// its own name, with the first of its output ports, message numbers and runtime filter slots in
// the process); this file defines the JG_QUERY every driver runs:
//
//   - its columns are the union of the members' (a column two members read alike is parsed once);
//   - its row function hands each member its own columns of the row, in its own order, through a
//     view of the worker's context (jgr_ctx_view): the member's ports, messages and filter slots
//     numbered from 0 as it was generated, its own scratch and its own failure;
//   - a member that fails (a data error in its own expressions, a consumer that went away) is cut
//     off alone: its streams are closed without their end markers, so its job fails, and the
//     other members go on. An error of the read itself (a malformed line) fails the process and
//     every member with it, as it would fail each of them alone;
//   - at the end of the phase each member's outcome is a `member` event before `done`.
//
// The worker contexts own no output ports here (jgr_worker_outputs = 0): each member view opens
// and ends its own, at the worker's first row or at its end.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jgrt.h"

extern "C" {
extern const jg_shared_member jg_shared_members[];
extern const uint32_t jg_shared_nmembers;
extern const int jgr_worker_outputs;
const int jgr_worker_outputs = 0;
}

namespace {

struct Union {
  std::vector<jg_column> columns;
  std::vector<std::vector<uint32_t>> maps;  // per member: its row index -> the union's
  uint32_t ports = 0;
};

bool same_column(const jg_column &a, const jg_column &b) {
  return a.name_len == b.name_len && std::memcmp(a.name, b.name, a.name_len) == 0 && a.type == b.type &&
         a.precision == b.precision && a.scale == b.scale;
}

Union make_union() {
  Union u;
  u.maps.resize(jg_shared_nmembers);
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    const jg_query *q = jg_shared_members[m].query;
    for (uint32_t c = 0; c < q->ncolumns; c++) {
      uint32_t at = 0;
      while (at < u.columns.size() && !same_column(u.columns[at], q->columns[c])) at++;
      if (at == u.columns.size()) u.columns.push_back(q->columns[c]);
      u.maps[m].push_back(at);
    }
    u.ports = std::max(u.ports, jg_shared_members[m].port_base + q->noutputs);
  }
  return u;
}

const Union U = make_union();

// What every worker knows of each member: cut off, its error, and its counters.
struct MemberState {
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> tuples_out{0}, bytes_out{0};
  std::string error;  // under mu, set once
};
std::mutex mu;
std::unique_ptr<MemberState[]> members(new MemberState[jg_shared_nmembers ? jg_shared_nmembers : 1]);

// One worker's views of the members (thread-local: a worker is one thread for its whole phase).
struct Worker {
  jg_ctx *parent = nullptr;
  std::vector<jg_ctx *> views;
  std::vector<std::vector<jg_val>> rows;
  std::vector<char> cut;  // this worker closed the member's streams already
};
thread_local Worker worker;

void cut_off(Worker &w, uint32_t m, const char *why) {
  {
    std::lock_guard<std::mutex> g(mu);
    if (!members[m].failed.load()) {
      members[m].error = why && *why ? why : "failed";
      members[m].failed.store(true);
    }
  }
  if (!w.cut[m]) jgr_outputs_abort(w.views[m]);
  w.cut[m] = 1;
}

void member_error(Worker &w, uint32_t m) {
  jgr_error err = {};
  jgr_row_error(w.views[m], &err);
  cut_off(w, m, err.message);
  jgr_error_clear(&err);
}

Worker &worker_of(jg_ctx *ctx) {
  Worker &w = worker;
  if (w.parent == ctx) return w;
  w.parent = ctx;
  w.views.clear();
  w.rows.clear();
  w.cut.assign(jg_shared_nmembers, 0);
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    const jg_shared_member &s = jg_shared_members[m];
    w.views.push_back(jgr_ctx_view(ctx, s.port_base, s.query->noutputs, s.msg_base, s.rf_base));
    w.rows.emplace_back(s.query->ncolumns ? s.query->ncolumns : 1);
  }
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    if (members[m].failed.load(std::memory_order_relaxed)) {
      w.cut[m] = 1;
      continue;
    }
    jgr_error err = {};
    if (jgr_outputs_open(w.views[m], &err) != 0) cut_off(w, m, err.message);
    jgr_error_clear(&err);
  }
  return w;
}

int shared_row(jg_ctx *ctx, const jg_val *row) {
  Worker &w = worker_of(ctx);
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    if (JGR_UNLIKELY(members[m].failed.load(std::memory_order_relaxed))) {
      if (!w.cut[m]) jgr_outputs_abort(w.views[m]), w.cut[m] = 1;
      continue;
    }
    jg_ctx *v = w.views[m];
    jg_val *mine = w.rows[m].data();
    const std::vector<uint32_t> &map = U.maps[m];
    for (size_t c = 0; c < map.size(); c++) mine[c] = row[map[c]];
    jgr_scratch_reset(v);
    if (JGR_UNLIKELY(jg_shared_members[m].query->row(v, mine) != JG_ROW_OK || v->flags != 0)) member_error(w, m);
  }
  return JG_ROW_OK;
}

// Each member's outcome, as a `member` event before the phase's `done`: sent by the last worker to
// end, when every member's counters are in (the drivers own control.c's stats hook).
std::atomic<int> workers_done{0};

void member_events() {
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    std::string error;
    {
      std::lock_guard<std::mutex> g(mu);
      error = members[m].error;
    }
    std::string escaped(error.size() * 6 + 1, '\0');
    escaped.resize(jgr_json_escape(&escaped[0], error.data(), error.size()));
    std::string line = "{\"event\":\"member\",\"member\":" + std::to_string(m) +
                       ",\"tuples_out\":" + std::to_string(members[m].tuples_out.load()) +
                       ",\"bytes_out\":" + std::to_string(members[m].bytes_out.load());
    if (members[m].failed.load()) line += ",\"error\":\"" + escaped + "\"";
    jgr_event((line + "}").c_str());
  }
}

void add_stats(jgr_stats &to, const jgr_stats &from) {
  to.wait_out_ns += from.wait_out_ns;
  to.tuples_out += from.tuples_out;
  to.bytes_out += from.bytes_out;
  to.rf_tested += from.rf_tested;
  to.rf_removed += from.rf_removed;
}

int shared_finish(jg_ctx *ctx) {
  Worker &w = worker_of(ctx);  // a worker that had no row opens its streams here
  for (uint32_t m = 0; m < jg_shared_nmembers; m++) {
    jg_ctx *v = w.views[m];
    const jg_query *q = jg_shared_members[m].query;
    if (q->finish) {
      // Every worker runs every member's finish, even one cut off (its streams are closed, what it
      // emits goes nowhere): a complete aggregation's finish merges the workers' tables and waits
      // at a barrier for all of them (agg_table.c), which a worker skipping it would never pass.
      jgr_scratch_reset(v);
      if ((q->finish(v) != JG_ROW_OK || v->flags != 0) && !members[m].failed.load()) member_error(w, m);
    }
    if (members[m].failed.load()) {
      if (!w.cut[m]) jgr_outputs_abort(v), w.cut[m] = 1;
    } else {
      jgr_error err = {};
      if (jgr_outputs_finish(v, &err) != 0) cut_off(w, m, err.message);
      jgr_error_clear(&err);
    }
    members[m].tuples_out += v->stats.tuples_out;
    members[m].bytes_out += v->stats.bytes_out;
    add_stats(ctx->stats, v->stats);  // the process's totals are its members'
    jgr_ctx_free(v);
  }
  w.views.clear();
  w.parent = nullptr;
  if (workers_done.fetch_add(1) + 1 == ctx->proc->threads) member_events();
  return JG_ROW_OK;
}

jg_query make_query() {
  jg_query q = {};
  q.columns = U.columns.empty() ? nullptr : U.columns.data();
  q.ncolumns = (uint32_t)U.columns.size();
  q.noutputs = U.ports;
  q.row = shared_row;
  q.finish = shared_finish;
  return q;  // no batch function and no runtime filters of its own: each member tests its own
}

}  // namespace

extern "C" const jg_query JG_QUERY = make_query();
