// Launch consistency: one MPI_Allgather of fixed-size digests decides; only
// when ranks differ do the values (and, for a trace, its text) travel, to
// name the difference.
#include "runtime/reliability/consistency.h"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "executors/comm/mpi_world.h"
#include "ir/error.h"
#include "runtime/io/sha256.h"

namespace fsdpc {

namespace {

constexpr size_t kShown = 160;  // longest value quoted in a message

struct Digest {
  uint8_t sha[32];  // of the fields, or of the error message
  int32_t has_error;
};

std::array<uint8_t, 32> fields_digest(const LaunchFingerprint& f) {
  Sha256 h;
  for (const LaunchFingerprint::Field& x : f.fields()) {
    h.update(x.name);
    h.update("\0", 1);
    h.update(x.value);
    h.update("\0", 1);
  }
  return h.digest();
}

// name, value and whether it stands for a text, length-prefixed.
std::string serialize(const LaunchFingerprint& f) {
  std::ostringstream os;
  for (const LaunchFingerprint::Field& x : f.fields())
    os << x.name.size() << ':' << x.name << x.value.size() << ':' << x.value << (x.text.empty() ? '0' : '1');
  return os.str();
}

struct Parsed {
  std::string name, value;
  bool is_text = false;
};

std::vector<Parsed> parse(const std::string& s) {
  std::vector<Parsed> out;
  size_t pos = 0;
  auto piece = [&] {
    const size_t colon = s.find(':', pos);
    const size_t n = std::stoull(s.substr(pos, colon - pos));
    std::string v = s.substr(colon + 1, n);
    pos = colon + 1 + n;
    return v;
  };
  while (pos < s.size()) {
    Parsed p;
    p.name = piece();
    p.value = piece();
    p.is_text = s[pos++] == '1';
    out.push_back(std::move(p));
  }
  return out;
}

std::string broadcast(const std::string& s, int root) {
  uint64_t n = s.size();
  watched_bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD, "launch check", "world");
  std::string out = s;
  out.resize(n);
  if (n > 0) watched_bcast(out.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD, "launch check", "world");
  return out;
}

std::string shown(const std::string& v) {
  std::string s = v.empty() ? "(none)" : v;
  return s.size() > kShown ? s.substr(0, kShown) + "..." : s;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// "the forward trace at line 12: rank 0 has `...`, rank 1 has `...`"
std::string first_text_difference(const std::string& name, const std::string& a, const std::string& b, int other) {
  const std::vector<std::string> la = lines(a), lb = lines(b);
  size_t i = 0;
  while (i < la.size() && i < lb.size() && la[i] == lb[i]) ++i;
  auto at = [](const std::vector<std::string>& l, size_t i) {
    if (i >= l.size()) return std::string("(the end)");
    std::string s = l[i];
    s.erase(0, s.find_first_not_of(' '));
    return "`" + shown(s) + "`";
  };
  return name + " at line " + std::to_string(i + 1) + ": rank 0 has " + at(la, i) + ", rank " + std::to_string(other) +
         " has " + at(lb, i);
}

}  // namespace

void LaunchFingerprint::add(const std::string& name, const std::string& value) { fields_.push_back({name, value, ""}); }

void LaunchFingerprint::add_text(const std::string& name, const std::string& text) {
  fields_.push_back({name, sha256_hex(text), text});
}

std::string launch_disagreement(const LaunchFingerprint& mine) {
  const int world = mpi_world_size(), rank = mpi_world_rank();
  Digest d{};
  d.has_error = mine.error().has_value();
  std::array<uint8_t, 32> sha;
  if (mine.error()) {
    Sha256 h;
    h.update(*mine.error());
    sha = h.digest();
  } else {
    sha = fields_digest(mine);
  }
  std::memcpy(d.sha, sha.data(), sha.size());
  std::vector<Digest> all(static_cast<size_t>(world));
  // Bounded by the watchdog (fsdpc train installs it first): a rank that
  // never arrives ends the job with this collective named, not a hang.
  watched_allgather(&d, sizeof d, MPI_BYTE, all.data(), MPI_COMM_WORLD, "launch check", "world");
  auto same = [&](int a, int b) { return std::memcmp(all[a].sha, all[b].sha, 32) == 0 && all[a].has_error == all[b].has_error; };

  int first_error = -1, errors = 0;
  for (int r = world - 1; r >= 0; --r)
    if (all[r].has_error) first_error = r, ++errors;
  if (first_error >= 0) {
    const std::string msg = broadcast(rank == first_error ? *mine.error() : "", first_error);
    bool everyone_same = errors == world;
    for (int r = 0; r < world && everyone_same; ++r) everyone_same = same(r, 0);
    return everyone_same ? msg : "rank " + std::to_string(first_error) + ": " + msg;
  }
  int other = -1, differing = 0;
  for (int r = world - 1; r > 0; --r)
    if (!same(r, 0)) other = r, ++differing;
  if (other < 0) return "";

  const std::vector<Parsed> f0 = parse(broadcast(rank == 0 ? serialize(mine) : "", 0));
  const std::vector<Parsed> fr = parse(broadcast(rank == other ? serialize(mine) : "", other));
  std::string msg;
  for (size_t i = 0; i < std::max(f0.size(), fr.size()) && msg.empty(); ++i) {
    const Parsed none{"", "(absent)", false};
    const Parsed& a = i < f0.size() ? f0[i] : none;
    const Parsed& b = i < fr.size() ? fr[i] : none;
    if (a.name == b.name && a.value == b.value) continue;
    if (a.name == b.name && a.is_text && b.is_text) {
      const std::string ta = broadcast(rank == 0 ? mine.fields()[i].text : "", 0);
      const std::string tb = broadcast(rank == other ? mine.fields()[i].text : "", other);
      msg = "ranks disagree on " + first_text_difference(a.name, ta, tb, other);
    } else {
      const std::string& name = a.name.empty() ? b.name : a.name;
      msg = "ranks disagree on " + name + ": rank 0 has " + shown(a.name == name ? a.value : "(absent)") + ", rank " +
            std::to_string(other) + " has " + shown(b.name == name ? b.value : "(absent)");
    }
  }
  if (msg.empty()) msg = "ranks disagree on what they run (equal fields, different digests)";
  if (differing > 1) msg += " (" + std::to_string(differing) + " ranks differ from rank 0)";
  return msg;
}

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open for reading");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  constexpr uint64_t kMiB = 1 << 20;
  Sha256 h;
  std::string buf;
  auto read = [&](uint64_t at, uint64_t n) {
    buf.resize(n);
    in.seekg(static_cast<std::streamoff>(at));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (!in) fail(path, ": read failed");
    h.update(buf);
  };
  read(0, std::min(size, kMiB));
  if (size > kMiB) read(std::max(kMiB, size - kMiB), size - std::max(kMiB, size - kMiB));
  return std::to_string(size) + " bytes, sha256 " + h.hex_digest().substr(0, 16) + " (first and last MiB)";
}

void exit_all_ranks(int code, const std::string& message) {
  std::fflush(stdout);
  if (mpi_world_rank() == 0) {
    std::fprintf(stderr, "fsdpc: error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  // Rank 0's message goes out before any rank's exit ends the job.
  watched_barrier(MPI_COMM_WORLD, "all-rank exit", "world");
  std::exit(code);  // mpi_init registered MPI_Finalize with atexit
}

}  // namespace fsdpc
