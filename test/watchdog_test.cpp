// The collective watchdog and the flight recorder: the ring buffer itself,
// `fsdpc flight` on hand-written dumps, and through `fsdpc train` under
// mpirun: a stopped rank ends the job at --timeout with the collective
// named and the recorders written, which `fsdpc flight` reads back;
// SIGUSR1 writes them without stopping the run.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "runtime/reliability/flight_recorder.h"
#include "test/golden.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Contains;
using nlohmann::json;

namespace {

using fsdpc::testing::read_file;
using fsdpc::testing::Run;
using fsdpc::testing::scratch;

// Runs a shell command line (output captured), under a time limit.
Run shell(const std::string& cmd, int limit_s = 60) {
  return fsdpc::testing::run_shell(cmd, {.merge = true, .timeout_s = limit_s});
}

const std::string kMpirun = fsdpc::testing::mpirun_command();
const std::string kTrain = fsdpc::testing::fsdpc_command("train --model gpt2-tiny --batch 4 --seq 16 --seed 3");

// Two ranks that write their pids to `pids`/<rank> before they start.
std::string two_ranks_with_pids(const fs::path& pids, const std::string& flags) {
  fs::create_directories(pids);
  return kMpirun + " -np 2 sh -c \"echo \\$\\$ > '" + pids.string() + "'/\\$OMPI_COMM_WORLD_RANK; exec " + kTrain +
         " " + flags + "\"";
}

int64_t lines(const fs::path& p) {
  std::ifstream l(p);
  return std::count(std::istreambuf_iterator<char>(l), std::istreambuf_iterator<char>(), '\n');
}

bool wait_for(const std::function<bool()>& ok, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

// A process this test stopped is killed whatever happens to the test.
struct KillOnExit {
  pid_t pid = 0;
  ~KillOnExit() {
    if (pid > 0) kill(pid, SIGKILL);
  }
};

// "ft3 = reduce_scatter(t_c)" -> "reduce_scatter"
std::string op_of(const std::string& statement) {
  const size_t from = statement.find("= ") + 2;
  return statement.substr(from, statement.find('(') - from);
}

// A hand-written dump: `ops` are the statements issued on group dp of
// ranks 0,1 in order, every one completed unless `open_from` says.
void write_dump(const fs::path& dir, int rank, const std::vector<std::string>& ops, size_t open_from = SIZE_MAX) {
  json collectives = json::array();
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool open = i >= open_from;
    collectives.push_back({{"seq", i}, {"group", "dp"}, {"group_index", 0}, {"group_seq", i},
                           {"op", op_of(ops[i])}, {"statement", ops[i]}, {"count", 16},
                           {"dtype", "f32"}, {"bytes", 64}, {"issued_at", 1000.0 + static_cast<double>(i)},
                           {"completed_at", open ? json(nullptr) : json(1000.5 + static_cast<double>(i))},
                           {"state", open ? "issued" : "completed"}});
  }
  json j = {{"fsdpc_flight", 1}, {"rank", rank}, {"world", 2}, {"reason", "test"}, {"written_at", 2000.0},
            {"groups", {{{"name", "dp"}, {"ranks", {0, 1}}, {"issued", ops.size()}}}},
            {"collectives", collectives}};
  fs::create_directories(dir);
  std::ofstream(dir / ("flight-rank" + std::to_string(rank) + ".json")) << j.dump(1);
}

Run flight(const fs::path& dir) { return shell(fsdpc::testing::fsdpc_command("flight '" + dir.string() + "'")); }

}  // namespace

TEST_CASE("the flight recorder keeps the last 1024 collectives in order", "[watchdog]") {
  fsdpc::FlightRecorder rec;
  const int n = 1500;
  for (int i = 0; i < n; ++i) {
    const std::string out = "ft" + std::to_string(i);
    const uint64_t id = rec.issued({"all_gather", out, "t_w", i % 3 ? "dp" : "shard", MPI_COMM_NULL, i, "f32", 4 * i});
    REQUIRE(id == static_cast<uint64_t>(i));
    if (i % 2 == 0) rec.completed(id);
  }
  rec.completed(3);  // long overwritten: nothing to mark, nothing broken
  const std::vector<fsdpc::FlightEntry> kept = rec.entries();
  REQUIRE(kept.size() == fsdpc::kFlightEntries);
  CHECK(rec.total() == n);
  for (size_t k = 0; k < kept.size(); ++k) {
    const int i = n - static_cast<int>(fsdpc::kFlightEntries) + static_cast<int>(k);
    INFO("entry " << k);
    CHECK(kept[k].seq == static_cast<uint64_t>(i));
    CHECK(std::string(kept[k].statement) == "ft" + std::to_string(i) + " = all_gather(t_w)");
    CHECK(kept[k].bytes == 4 * i);
    CHECK(rec.groups().at(kept[k].group).name == (i % 3 ? "dp" : "shard"));
    // Each group numbers its own collectives: i's place among its group's.
    CHECK(kept[k].group_seq == static_cast<uint64_t>(i % 3 ? i - i / 3 - 1 : i / 3));
    CHECK((kept[k].state == fsdpc::FlightState::completed) == (i % 2 == 0));
  }
  CHECK(rec.find(3) == nullptr);
  REQUIRE(rec.find(n - 1) != nullptr);
  // The dump says the same.
  const json j = json::parse(rec.to_json(0, 1, "test"));
  REQUIRE(j["collectives"].size() == fsdpc::kFlightEntries);
  CHECK(j["collectives"].front()["seq"] == n - 1024);
  CHECK(j["collectives"].back()["statement"] == "ft1499 = all_gather(t_w)");
  CHECK(j["collectives"].back()["state"] == "issued");
  CHECK(j["collectives"].back()["completed_at"].is_null());
  CHECK(j["groups"].size() == 2);
}

TEST_CASE("fsdpc flight names the first collective the ranks part ways on", "[watchdog]") {
  const std::vector<std::string> ops = {"ft1 = all_gather(t_a)", "ft2 = all_gather(t_b)", "ft3 = reduce_scatter(t_c)",
                                        "ft4 = all_gather(t_d)"};
  SECTION("they agree") {
    const fs::path d = scratch("agree");
    write_dump(d, 0, ops);
    write_dump(d, 1, ops);
    Run r = flight(d);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("all 2 ranks agree"));
  }
  SECTION("they disagree") {
    const fs::path d = scratch("disagree");
    std::vector<std::string> other = ops;
    other[2] = "ft3 = all_reduce(t_c)";
    write_dump(d, 0, ops, 2);
    write_dump(d, 1, other, 2);
    Run r = flight(d);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("first problem: group dp (ranks 0,1), collective #2: ranks disagree: rank 0 issued "
                               "`ft3 = reduce_scatter(t_c)`"));
    CHECK_THAT(r.out, Contains("rank 1 issued `ft3 = all_reduce(t_c)`"));
  }
  SECTION("one rank never issued it") {
    const fs::path d = scratch("never");
    write_dump(d, 0, ops, 3);
    write_dump(d, 1, {ops.begin(), ops.begin() + 3});
    Run r = flight(d);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("collective #3: `ft4 = all_gather(t_d)` (all_gather, 16 x f32, 64 bytes) issued by "
                               "rank 0, never by rank 1 (its last there: #2 `ft3 = reduce_scatter(t_c)`); not "
                               "completed on rank 0"));
  }
  SECTION("a rank left no file") {
    const fs::path d = scratch("missing");
    write_dump(d, 0, ops, 1);
    Run r = flight(d);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("collective #1: `ft2 = all_gather(t_b)`"));
    CHECK_THAT(r.out, Contains("not completed on rank 0; rank 1 left no flight file"));
  }
  SECTION("malformed or missing files exit 2 with the file named") {
    const fs::path d = scratch("malformed");
    write_dump(d, 0, ops);
    std::ofstream(d / "flight-rank1.json") << "{\"fsdpc_flight\": 1, \"rank\": 1";
    Run r = flight(d);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("fsdpc: error: " + (d / "flight-rank1.json").string() + ": not valid JSON"));
    std::ofstream(d / "flight-rank1.json") << "{\"fsdpc_flight\": 1, \"rank\": 1, \"world\": 2}";
    r = flight(d);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("flight-rank1.json: not a flight recorder dump: no \"groups\""));
    r = flight(scratch("no-such-folder"));
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("not a folder"));
    fs::create_directories(scratch("empty"));
    r = flight(scratch("empty"));
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Contains("no flight-rank{R}.json files"));
  }
}

TEST_CASE("a stopped rank ends the job at --timeout, naming the collective; fsdpc flight finds it",
          "[mpi][watchdog]") {
  const fs::path pids = scratch("stop-pids"), dir = scratch("stop-flight"), log = scratch("stop.jsonl");
  Run r;
  std::chrono::steady_clock::time_point stopped_at;
  std::thread run([&] {
    r = shell(two_ranks_with_pids(pids, "--steps 100000 --log-every 1000 --timeout 5 --flight-dir '" + dir.string() +
                                            "' --log-json '" + log.string() + "'"));
  });
  KillOnExit guard;
  const bool started = wait_for([&] { return lines(log) >= 1 && fs::exists(pids / "1"); }, 50);
  if (started) {
    guard.pid = std::stoi(read_file(pids / "1"));
    kill(guard.pid, SIGSTOP);
    stopped_at = std::chrono::steady_clock::now();
  }
  run.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  REQUIRE(started);
  INFO(r.out);
  CHECK(r.code == 4);
  CHECK(took < 20);
  CHECK_THAT(r.out, Contains("fsdpc: error: rank 0: a collective timed out after 5"));
  REQUIRE(fs::exists(dir / "flight-rank0.json"));
  // The collectives some rank issued and never saw complete: the message
  // names one of rank 0's, and fsdpc flight the first of them. (Open MPI's
  // abort wakes the stopped rank with SIGCONT before it kills it, so rank 1
  // may time out and write its recorder too.)
  std::set<std::string> open, open0;
  for (int rank : {0, 1}) {
    const fs::path file = dir / ("flight-rank" + std::to_string(rank) + ".json");
    if (!fs::exists(file)) continue;
    const json dump = json::parse(read_file(file));
    CHECK(dump["reason"] == "timeout");
    for (const json& c : dump["collectives"])
      if (c["state"] == "issued") (rank == 0 ? open0 : open).insert(c["statement"].get<std::string>());
  }
  REQUIRE(!open0.empty());
  open.insert(open0.begin(), open0.end());
  bool named = false;
  for (const std::string& s : open0) named = named || r.out.find("`" + s + "` (") != std::string::npos;
  CHECK(named);
  Run f = flight(dir);
  INFO(f.out);
  CHECK(f.code == 0);
  const std::string head = "first problem: group ";
  REQUIRE(f.out.find(head) != std::string::npos);
  const size_t from = f.out.find(": `", f.out.find(head)) + 3;
  const std::string stalled = f.out.substr(from, f.out.find('`', from) - from);
  INFO("fsdpc flight names `" << stalled << "`");
  CHECK(open.count(stalled) == 1);
  CHECK_THAT(f.out, Contains("not completed on rank"));
  if (!fs::exists(dir / "flight-rank1.json")) CHECK_THAT(f.out, Contains("rank 1 left no flight file"));
}

TEST_CASE("SIGUSR1 writes every rank's flight recorder and training goes on to the end", "[mpi][watchdog]") {
  const fs::path pids = scratch("usr1-pids"), dir = scratch("usr1-flight"), log = scratch("usr1.jsonl");
  Run r;
  std::thread run([&] {
    r = shell(two_ranks_with_pids(pids, "--steps 300 --log-every 100 --flight-dir '" + dir.string() + "' --log-json '" +
                                            log.string() + "'"));
  });
  const bool started = wait_for([&] { return lines(log) >= 1 && fs::exists(pids / "1"); }, 50);
  if (started)
    for (const char* rank : {"0", "1"}) kill(std::stoi(read_file(pids / rank)), SIGUSR1);
  run.join();
  REQUIRE(started);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(lines(log) == 300);
  CHECK_THAT(r.out, Contains("done: 300 steps"));
  for (int rank : {0, 1}) {
    const fs::path f = dir / ("flight-rank" + std::to_string(rank) + ".json");
    REQUIRE(fs::exists(f));
    const json j = json::parse(read_file(f));
    CHECK(j["reason"] == "SIGUSR1");
    CHECK(j["rank"] == rank);
    CHECK(!j["collectives"].empty());
  }
  CHECK_THAT(r.out, Contains("flight recorder written to " + (dir / "flight-rank1.json").string() + " (SIGUSR1)"));
  Run f = flight(dir);  // a dump mid-run: the ranks may be a collective apart, never in disagreement
  INFO(f.out);
  CHECK(f.code == 0);
  CHECK_THAT(f.out, !Contains("disagree"));
}

TEST_CASE("the timeout and flight folder may differ across ranks; a bad timeout is refused", "[mpi][watchdog]") {
  auto rank = [](const std::string& flags) { return "-np 1 " + kTrain + " --steps 2 " + flags; };
  Run r = shell(kMpirun + " " + rank("--timeout 30 --flight-dir '" + scratch("a").string() + "'") + " : " +
                rank("--timeout 60"));
  INFO(r.out);
  CHECK(r.code == 0);
  for (const char* bad : {"0", "-1", "5s", "inf"}) {
    Run b = shell(kTrain + " --steps 1 --timeout=" + bad);
    INFO(b.out);
    CHECK(b.code == 2);
    CHECK_THAT(b.out, Contains(std::string("fsdpc: error: --timeout '") + bad + "': expected a positive number"));
  }
  Run e = shell("env FSDPC_TIMEOUT_S=soon " + kTrain + " --steps 1");
  CHECK(e.code == 2);
  CHECK_THAT(e.out, Contains("FSDPC_TIMEOUT_S 'soon'"));
}
