// The flight report (runtime/reliability/flight_report.h; `fsdpc flight
// DIR`): reads every rank's flight recorder dump
// (flight-rank{R}.json, runtime/reliability/flight_recorder.h) and names the first
// collective, in each communicator's own order, on which the ranks part
// ways: issued differently (op, statement or count), issued by some ranks
// and never by others, or issued and never completed; and the ranks that
// left no file.
#include "runtime/reliability/flight_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "runtime/io/files.h"

namespace fsdpc {

namespace {

using nlohmann::json;

// printf onto the end of `out`.
[[gnu::format(printf, 2, 3)]] void appendf(std::string& out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(n) + 1);
  std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, format, again);
  va_end(again);
  out.resize(at + static_cast<size_t>(n));
}

struct Record {
  std::string op, statement, dtype, state;
  int64_t count = 0, bytes = 0;
  double issued_at = 0;
};

// One rank's view of one communicator.
struct RankGroup {
  uint64_t issued = 0;  // collectives it issued there in all
  std::map<uint64_t, Record> kept;  // by group_seq
};

struct Group {
  std::string name;
  std::vector<int> ranks;
  std::map<int, RankGroup> by_rank;  // ranks whose file mentions it
};

std::string ranks_str(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::string plural(const std::vector<int>& ranks) { return (ranks.size() == 1 ? "rank " : "ranks ") + ranks_str(ranks); }

template <class T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) fail(where, ": not a flight recorder dump: no \"", key, "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail(where, ": not a flight recorder dump: \"", key, "\" has the wrong type");
  }
}

struct Dumps {
  int world = 0;
  std::vector<int> present;
  std::map<std::string, Group> groups;  // by name and members
};

void read_dump(const std::filesystem::path& path, int rank, Dumps& d) {
  const std::string where = path.string();
  json j;
  try {
    j = json::parse(read_file(where));
  } catch (const json::exception& e) {
    fail(where, ": not valid JSON (", e.what(), ")");
  }
  if (field<int>(j, "fsdpc_flight", where) != 1) fail(where, ": flight recorder format ", j["fsdpc_flight"], ", expected 1");
  if (field<int>(j, "rank", where) != rank) fail(where, ": says rank ", j["rank"], ", its name says ", rank);
  const int world = field<int>(j, "world", where);
  if (world < 1 || rank >= world) fail(where, ": rank ", rank, " of a world of ", world);
  if (d.world && world != d.world) fail(where, ": a world of ", world, ", other files say ", d.world);
  d.world = world;
  const auto groups = field<std::vector<json>>(j, "groups", where);
  std::vector<std::string> keys;
  for (const json& g : groups) {
    Group info{field<std::string>(g, "name", where), field<std::vector<int>>(g, "ranks", where), {}};
    const std::string key = info.name + "[" + ranks_str(info.ranks) + "]";
    Group& mine = d.groups.emplace(key, info).first->second;
    mine.by_rank[rank].issued = field<uint64_t>(g, "issued", where);
    keys.push_back(key);
  }
  for (const json& c : field<std::vector<json>>(j, "collectives", where)) {
    const auto index = field<size_t>(c, "group_index", where);
    if (index >= keys.size()) fail(where, ": a collective of group ", index, ", the file lists ", keys.size());
    Record r{field<std::string>(c, "op", where),    field<std::string>(c, "statement", where),
             field<std::string>(c, "dtype", where), field<std::string>(c, "state", where),
             field<int64_t>(c, "count", where),     field<int64_t>(c, "bytes", where),
             field<double>(c, "issued_at", where)};
    if (r.state != "issued" && r.state != "completed") fail(where, ": state '", r.state, "', expected issued or completed");
    d.groups[keys[index]].by_rank[rank].kept[field<uint64_t>(c, "group_seq", where)] = r;
  }
}

std::string describe(const Record& r) {
  std::ostringstream os;
  os << "`" << r.statement << "` (" << r.op;
  if (!r.dtype.empty()) os << ", " << r.count << " x " << r.dtype;
  os << ", " << r.bytes << " bytes)";
  return os.str();
}

struct Finding {
  double when = 0;  // issue time of the collective, to order groups
  std::string text;
};

// The first collective of `g` on which its ranks with files part ways.
std::optional<Finding> first_problem(const Group& g, const std::vector<int>& absent) {
  std::vector<int> members = g.ranks;
  if (members.empty())
    for (const auto& [r, _] : g.by_rank) members.push_back(r);
  std::vector<int> present;
  for (int r : members)
    if (!std::count(absent.begin(), absent.end(), r)) present.push_back(r);
  auto view = [&](int r) {
    static const RankGroup none;
    auto it = g.by_rank.find(r);
    return it == g.by_rank.end() ? &none : &it->second;
  };
  uint64_t lo = 0, hi = 0;  // the sequence numbers every present rank still keeps (or never reached)
  for (int r : present) {
    const RankGroup* v = view(r);
    lo = std::max(lo, v->kept.empty() ? v->issued : v->kept.begin()->first);
    hi = std::max(hi, v->issued);
  }
  const std::string head = "group " + g.name + " (" + plural(members) + ")";
  const std::string gone =
      absent.empty() ? "" : "; " + plural(absent) + " left no flight file (stopped, killed or hung before writing one)";
  for (uint64_t s = lo; s < hi; ++s) {
    std::vector<int> never, open, with;
    const Record* first = nullptr;
    bool differ = false;
    for (int r : present) {
      const RankGroup* v = view(r);
      auto it = v->kept.find(s);
      if (it == v->kept.end()) {
        if (s >= v->issued) never.push_back(r);
        continue;
      }
      with.push_back(r);
      const Record& rec = it->second;
      if (!first) first = &rec;
      differ = differ || rec.op != first->op || rec.statement != first->statement || rec.count != first->count;
      if (rec.state == "issued") open.push_back(r);
    }
    if (!first || (never.empty() && open.empty() && !differ)) continue;
    std::ostringstream os;
    os << head << ", collective #" << s << ": ";
    if (differ) {
      os << "ranks disagree:";
      for (int r : with) os << " rank " << r << " issued " << describe(view(r)->kept.at(s)) << (r == with.back() ? "" : ";");
    } else {
      os << describe(*first) << " issued by " << plural(with);
      if (!never.empty()) {
        os << ", never by " << plural(never);
        const RankGroup* v = view(never.front());
        if (!v->kept.empty()) os << " (its last there: #" << v->kept.rbegin()->first << " `" << v->kept.rbegin()->second.statement << "`)";
      }
      if (!open.empty()) os << "; not completed on " << plural(open);
    }
    os << gone;
    return Finding{first->issued_at, os.str()};
  }
  if (!absent.empty()) return Finding{1e300, head + ": the ranks with files agree" + gone};
  return std::nullopt;
}

}  // namespace

std::string flight_report(const std::string& dir) {
  std::string out;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, ": not a folder (expected the --flight-dir of a run)");
  Dumps d;
  const std::regex name("flight-rank([0-9]+)\\.json");
  std::vector<std::pair<int, fs::path>> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, name)) files.emplace_back(std::stoi(m[1].str()), e.path());
  }
  if (files.empty()) fail(dir, ": no flight-rank{R}.json files");
  std::sort(files.begin(), files.end());
  for (const auto& [rank, path] : files) {
    read_dump(path, rank, d);
    d.present.push_back(rank);
  }
  std::vector<int> absent;
  for (int r = 0; r < d.world; ++r)
    if (!std::count(d.present.begin(), d.present.end(), r)) absent.push_back(r);
  appendf(out, "%zu flight file%s of a world of %d (%s)\n", files.size(), files.size() == 1 ? "" : "s", d.world,
          plural(d.present).c_str());
  std::vector<Finding> findings;
  for (const auto& [key, g] : d.groups) {
    std::vector<int> gone;
    for (int r : g.ranks.empty() ? d.present : g.ranks)
      if (std::count(absent.begin(), absent.end(), r)) gone.push_back(r);
    if (auto f = first_problem(g, gone)) findings.push_back(*f);
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) { return a.when < b.when; });
  if (findings.empty() && absent.empty()) {
    appendf(out,
            "all %d ranks agree: every collective kept by their recorders was issued alike and completed (%zu "
            "group%s)\n",
            d.world, d.groups.size(), d.groups.size() == 1 ? "" : "s");
    return out;
  }
  if (findings.empty()) {  // files from some ranks only, and no group to compare
    appendf(out, "first problem: %s left no flight file\n", plural(absent).c_str());
    return out;
  }
  appendf(out, "first problem: %s\n", findings.front().text.c_str());
  for (size_t i = 1; i < findings.size(); ++i) appendf(out, "also: %s\n", findings[i].text.c_str());
  return out;
}

}  // namespace fsdpc
