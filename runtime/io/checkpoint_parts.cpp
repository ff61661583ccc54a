// Reading and writing where a checkpoint rank file's rows sit (see
// checkpoint_parts.h).
#include "runtime/io/checkpoint_parts.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "ir/error.h"

namespace fsdpc {

void write_placement(std::map<std::string, std::string>& meta, const std::string& param, const PartPlacement& p) {
  meta[param + ".row_begin"] = std::to_string(p.row_begin);
  meta[param + ".tp"] = std::to_string(p.tp);
  if (p.tp == 1) return;
  // The split is recorded, not only implied by the path: a reader checks
  // that its model cuts the parameter the same way before trusting the rows.
  meta[param + ".tp_rank"] = std::to_string(p.tp_rank);
  meta[param + ".tp_dim"] = std::to_string(p.split.dim);
  meta[param + ".tp_blocks"] = std::to_string(p.split.blocks);
  meta[param + ".tp_pad"] = p.split.pad ? "1" : "0";
}

RankFiles::RankFiles(const std::string& dir) : dir_(dir) {
  files_.push_back(std::make_unique<SafetensorsFile>(dir + "/rank-0.safetensors"));
  const int64_t world = meta(0, "world");
  if (world < 1) fail(files_[0]->path(), ": metadata 'world' is ", world, ", expected at least 1");
  for (int64_t k = 1; k < world; ++k)
    files_.push_back(std::make_unique<SafetensorsFile>(dir + "/rank-" + std::to_string(k) + ".safetensors"));
}

int64_t RankFiles::meta(size_t k, const std::string& key) const {
  auto it = files_[k]->metadata().find(key);
  if (it == files_[k]->metadata().end()) fail(files_[k]->path(), ": metadata has no '", key, "'");
  const std::string& s = it->second;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    fail(files_[k]->path(), ": metadata '", key, "' is '", s, "', not an integer");
  return v;
}

bool RankFiles::has_meta(size_t k, const std::string& key) const {
  return files_[k]->metadata().count(key) > 0;
}

void RankFiles::keep_only(const std::string& key, int64_t value) {
  std::vector<std::unique_ptr<SafetensorsFile>> kept;
  for (size_t k = 0; k < files_.size(); ++k)
    if (meta(k, key) == value) kept.push_back(std::move(files_[k]));
  if (kept.empty()) fail(dir_, ": no rank file has ", key, " ", value);
  files_ = std::move(kept);
}

PartPlacement RankFiles::placement(size_t k, const std::string& param, const Shape& full,
                                   const TensorParallelPlan& plan) const {
  const std::string& path = files_[k]->path();
  PartPlacement p;
  p.row_begin = meta(k, param + ".row_begin");
  if (p.row_begin < 0) fail(path, ": ", param, ".row_begin is ", p.row_begin);
  // Files written before tensor parallelism could be saved have no ".tp":
  // they hold rows of the full parameter.
  const int64_t tp = files_[k]->metadata().count(param + ".tp") ? meta(k, param + ".tp") : 1;
  if (tp < 1) fail(path, ": ", param, ".tp is ", tp, ", expected at least 1");
  p.tp = static_cast<int>(tp);
  if (p.tp == 1) return p;
  const int64_t rank = meta(k, param + ".tp_rank");
  if (rank < 0 || rank >= tp) fail(path, ": ", param, ".tp_rank is ", rank, ", not a rank of tp ", tp);
  p.tp_rank = static_cast<int>(rank);
  // Files written before vocabularies were padded have no ".tp_pad": their
  // parts were never padded.
  const bool pad = files_[k]->metadata().count(param + ".tp_pad") && meta(k, param + ".tp_pad") != 0;
  p.split = {param, meta(k, param + ".tp_dim"), meta(k, param + ".tp_blocks"), pad};
  const std::optional<TensorParallelSplit> ours = plan.split(param, full, p.tp);
  if (!ours || ours->dim != p.split.dim || ours->blocks != p.split.blocks || ours->pad != p.split.pad)
    fail(path, ": ", param, " was cut on dim ", p.split.dim, " in ", p.split.blocks, " blocks",
         p.split.pad ? ", padded" : "", "; this model's tensor parallelism ",
         ours ? "cuts it otherwise" : "does not cut it");
  try {
    tensor_parallel_runs(p.split, full, p.tp, p.tp_rank);  // the shape takes the cut
  } catch (const Error& e) {
    fail(path, ": ", param, ": ", e.what());
  }
  return p;
}

bool RankFiles::holds_tp_parts(const std::string& param) const {
  for (size_t k = 0; k < files_.size(); ++k)
    if (files_[k]->metadata().count(param + ".tp") && meta(k, param + ".tp") > 1) return true;
  return false;
}

bool RankFiles::holds(size_t k, const std::string& name) const {
  if (files_[k]->find(name)) return true;
  // Files written before pipeline stages could be saved have no "pp".
  const bool stage_file = files_[k]->metadata().count("pp") && meta(k, "pp") > 1;
  if (!stage_file) fail(files_[k]->path(), ": no tensor ", name);
  return false;
}

int64_t RankFiles::param_meta(const std::string& param, const std::string& key) const {
  for (size_t k = 0; k < files_.size(); ++k)
    if (holds(k, param)) return meta(k, key);
  fail(dir_, ": no rank file holds ", param);
}

void RankFiles::read_rows(const std::string& name, const std::string& param, int64_t full_rows, int64_t row_begin,
                          int64_t rows, int64_t cols, float* out) const {
  std::fill(out, out + rows * cols, 0.0f);
  const int64_t want_end = std::min(row_begin + rows, full_rows);
  // Rows read so far, each counted once: several files hold the same rows
  // (replicas, and the tp ranks of a parameter tp left whole), and counting
  // a row twice would stop the reading before every row was read.
  std::vector<char> have(static_cast<size_t>(std::max<int64_t>(0, want_end - row_begin)), 0);
  int64_t covered = 0;
  for (size_t k = 0; k < files_.size() && covered < want_end - row_begin; ++k) {
    if (!holds(k, name)) continue;
    const SafetensorsEntry* e = files_[k]->find(name);
    const int64_t e_rows = e->shape.empty() ? 1 : e->shape[0];
    if ((e_rows ? numel(e->shape) / e_rows : cols) != cols)
      fail(files_[k]->path(), ": ", name, " has shape ", shape_str(e->shape), ", rows of ", cols, " elements expected");
    const int64_t first = meta(k, param + ".row_begin");
    const int64_t lo = std::max(row_begin, first), hi = std::min(want_end, first + e_rows);
    if (lo >= hi) continue;
    files_[k]->read_rows_f32(*e, lo - first, hi - lo, out + (lo - row_begin) * cols);
    for (int64_t r = lo; r < hi; ++r) covered += have[static_cast<size_t>(r - row_begin)] ? 0 : 1;
    std::fill(have.begin() + (lo - row_begin), have.begin() + (hi - row_begin), 1);
  }
  if (covered < std::max<int64_t>(0, want_end - row_begin))
    fail(dir_, ": checkpoint rows ", row_begin, "..", want_end, " of ", name, " are not in any rank file");
}

std::vector<float> RankFiles::read_full(const std::string& name, const std::string& param, const Shape& full,
                                       const TensorParallelPlan& plan) const {
  // The whole tensor on the host: one parameter at a time, which at the
  // model sizes fsdpc trains on the CPU is small next to the run itself.
  const int64_t n = numel(full);
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  std::vector<char> have(static_cast<size_t>(n), 0);  // replicas hold the same elements: count each once
  int64_t missing = n;
  // Every file's metadata is checked, also of files whose rows are not needed
  // once the others covered the tensor: a damaged checkpoint fails on every
  // rank alike.
  std::vector<PartPlacement> placements;
  std::vector<bool> held;
  for (size_t k = 0; k < files_.size(); ++k) {
    held.push_back(holds(k, name));
    placements.push_back(held.back() ? placement(k, param, full, plan) : PartPlacement{});
  }
  for (size_t k = 0; k < files_.size() && missing > 0; ++k) {
    if (!held[k]) continue;
    const SafetensorsEntry* e = files_[k]->find(name);
    const PartPlacement& pl = placements[k];
    // A padded vocabulary's part ends in padding rows, which no run maps
    // back: they are never read into the full tensor.
    const Shape part = pl.tp > 1 ? tensor_parallel_part_shape(pl.split, full, pl.tp) : full;
    const int64_t part_n = numel(part), part_rows = part.empty() ? 1 : part[0];
    const int64_t cols = part_rows ? part_n / part_rows : 0;
    const int64_t e_rows = e->shape.empty() ? 1 : e->shape[0];
    if ((e_rows ? numel(e->shape) / e_rows : cols) != cols)
      fail(files_[k]->path(), ": ", name, " has shape ", shape_str(e->shape), ", rows of ", cols,
           " elements expected (", pl.tp > 1 ? "tp part " + std::to_string(pl.tp_rank) + " of " +
                                                   std::to_string(pl.tp) + " of "
                                             : std::string(),
           shape_str(full), ")");
    // Elements [lo, hi) of the part are in this file; rows past the part's
    // end are FSDP padding.
    const int64_t rows = std::min(e_rows, part_rows - pl.row_begin);
    if (rows <= 0) continue;
    const int64_t lo = pl.row_begin * cols, hi = lo + rows * cols;
    std::vector<float> buf(static_cast<size_t>(hi - lo));
    files_[k]->read_rows_f32(*e, 0, rows, buf.data());
    const std::vector<TensorParallelRun> runs =
        pl.tp > 1 ? tensor_parallel_runs(pl.split, full, pl.tp, pl.tp_rank) : std::vector<TensorParallelRun>{{0, 0, n}};
    for (const TensorParallelRun& r : runs) {
      const int64_t a = std::max(lo, r.part), b = std::min(hi, r.part + r.count);
      for (int64_t i = a; i < b; ++i) {
        const size_t at = static_cast<size_t>(r.full + (i - r.part));
        out[at] = buf[static_cast<size_t>(i - lo)];
        if (!have[at]) {
          have[at] = 1;
          --missing;
        }
      }
    }
  }
  if (missing > 0) {
    const int64_t first = std::find(have.begin(), have.end(), 0) - have.begin();
    fail(dir_, ": ", missing, " of the ", n, " elements of ", name, " (the first at flat index ", first,
         ") are not in any rank file");
  }
  return out;
}

}  // namespace fsdpc
