// The NCCL executor's staging for a gather or reduce-scatter along a dim
// other than 0 (executors/comm/nccl_staging.h), run on host buffers around
// an emulation of what NCCL itself does (members' blocks back to back; an
// elementwise sum, member r keeping block r):
//  - against the collectives' definitions, index by index, for 1 to 4
//    members and every dim of a 3-d tensor;
//  - against the MPI executor's own results on 2 ranks under mpirun (the
//    path the CPU runs), byte for byte.
// The device runs the same plans with cudaMemcpy2DAsync in
// test/gpu/gpu_nccl_dim_test.cpp.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "executors/comm/mpi_executor.h"
#include "executors/comm/mpi_world.h"
#include "executors/comm/nccl_staging.h"
#include "ir/builder.h"
#include "ir/mesh.h"
#include "test/collective_samples.h"
#include "test/nccl_staging_samples.h"
#include "test/run_cli.h"

using namespace fsdpc;
using namespace fsdpc::test;

namespace {

// Row-major flat index of `idx` in `shape`.
int64_t flat(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + idx[i];
  return f;
}

// Every index of `shape`, in row-major order.
std::vector<std::vector<int64_t>> indices(const Shape& shape) {
  std::vector<std::vector<int64_t>> all;
  std::vector<int64_t> i(shape.size(), 0);
  for (int64_t n = 0; n < prod(shape, 0, shape.size()); ++n) {
    all.push_back(i);
    for (size_t d = shape.size(); d-- > 0;)
      if (++i[d] < shape[d]) break;
      else i[d] = 0;
  }
  return all;
}

}  // namespace

TEST_CASE("nccl staging: gathers along every dim equal the definition", "[nccl]") {
  const Shape x{2, 3, 4};
  for (int members = 1; members <= 4; ++members)
    for (size_t dim = 0; dim < x.size(); ++dim) {
      std::vector<Floats> xs;
      for (int k = 0; k < members; ++k) xs.push_back(input_of(k, prod(x, 0, 3)));
      const Floats got = nccl_all_gather(xs, x, dim);
      Shape out = x;
      out[dim] *= members;
      INFO("members " << members << ", dim " << dim);
      REQUIRE(got.size() == static_cast<size_t>(prod(out, 0, 3)));
      // out[..., m * x[dim] + j, ...] = member m's x[..., j, ...]
      for (const auto& i : indices(out)) {
        std::vector<int64_t> j = i;
        const int64_t m = i[dim] / x[dim];
        j[dim] = i[dim] % x[dim];
        CHECK(got[static_cast<size_t>(flat(out, i))] == xs[static_cast<size_t>(m)][static_cast<size_t>(flat(x, j))]);
      }
    }
}

TEST_CASE("nccl staging: reduce-scatters along every dim equal the definition", "[nccl]") {
  for (int members = 1; members <= 4; ++members)
    for (size_t dim = 0; dim < 3; ++dim) {
      Shape in{2, 3, 2};
      in[dim] *= members;
      Shape part = in;
      part[dim] /= members;
      std::vector<Floats> xs;
      for (int k = 0; k < members; ++k) xs.push_back(input_of(k, prod(in, 0, 3)));
      for (int r = 0; r < members; ++r) {
        const Floats got = nccl_reduce_scatter(xs, in, dim, r);
        INFO("members " << members << ", dim " << dim << ", rank " << r);
        REQUIRE(got.size() == static_cast<size_t>(prod(part, 0, 3)));
        // part[..., j, ...] = sum over k of x_k[..., r * part[dim] + j, ...]
        for (const auto& i : indices(part)) {
          std::vector<int64_t> j = i;
          j[dim] += r * part[dim];
          float want = 0;
          for (const Floats& x : xs) want += x[static_cast<size_t>(flat(in, j))];
          CHECK(got[static_cast<size_t>(flat(part, i))] == want);
        }
      }
    }
}

TEST_CASE("nccl staging: empty and single-row plans move nothing or everything", "[nccl]") {
  CHECK(gather_unpack_plan(0, 16, 2).empty());
  CHECK(scatter_pack_plan(3, 0, 2).empty());
  const std::vector<Copy2D> one = gather_unpack_plan(1, 8, 3);
  REQUIRE(one.size() == 3);
  CHECK(one[2].dst_offset == 16);
  CHECK(one[2].src_offset == 16);
  CHECK(one[2].height == 1);
}

// Run by the next case under mpirun (hidden from the suite): each rank runs
// every staged case through the MPI executor and prints its result.
TEST_CASE("the MPI executor's gathers and reduce-scatters along every dim", "[.nccl_staging_helper]") {
  mpi_init();
  MpiContext ctx(flat_mesh(2));
  const int rank = mpi_world_rank();
  const Executor& mpi = mpi_executor();
  for (size_t c = 0; c < std::size(kStagedCases); ++c) {
    const StagedCase& k = kStagedCases[c];
    Attrs attrs = test::collective_attrs(k.op);
    attrs.set("dim", k.dim);
    const Trace t = test::collective_trace(k.op, test::tensor_on(k.shape, DType::f32, DeviceKind::cpu), attrs);
    const BoundSymbol& issue = t.bsyms[0];
    const BoundSymbol& wait = t.bsyms[1];
    Floats x = input_of(rank, prod(k.shape, 0, k.shape.size()));
    Floats future(static_cast<size_t>(numel(issue.output().type.shape))), result(future.size());
    mpi.kernel(issue.op)(ctx, issue, {{x.data(), &t.args[0].type}}, {{future.data(), &issue.output().type}});
    mpi.kernel(wait.op)(ctx, wait, {{future.data(), &issue.output().type}}, {{result.data(), &wait.output().type}});
    std::ostringstream line;
    line << "case " << c << " rank " << rank << ":";
    for (float v : result) line << ' ' << v;
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);  // one whole line at a time through mpirun
  }
}

TEST_CASE("nccl staging: the same layouts as the MPI executor on 2 ranks", "[mpi][nccl]") {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const fsdpc::testing::Run r = fsdpc::testing::run_shell(
      fsdpc::testing::mpirun_command(2) + " '" + self + "' '[.nccl_staging_helper]' --use-colour no", {.merge = true});
  const std::string& out = r.out;
  INFO(out);
  REQUIRE(r.code == 0);
  std::map<std::string, Floats> mpi;  // "case C rank R" -> result
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    const size_t at = l.find("case ");
    if (at == std::string::npos) continue;
    l = l.substr(at);
    const size_t colon = l.find(':');
    std::istringstream values(l.substr(colon + 1));
    Floats v;
    for (float f; values >> f;) v.push_back(f);
    mpi[l.substr(0, colon)] = v;
  }
  REQUIRE(mpi.size() == 2 * std::size(kStagedCases));
  for (size_t c = 0; c < std::size(kStagedCases); ++c) {
    const StagedCase& k = kStagedCases[c];
    const std::vector<Floats> xs = {input_of(0, prod(k.shape, 0, 3)), input_of(1, prod(k.shape, 0, 3))};
    for (int r = 0; r < 2; ++r) {
      INFO("case " << c << " (" << op_name(k.op) << " along dim " << k.dim << "), rank " << r);
      const Floats nccl = k.op == OpId::AllGather ? nccl_all_gather(xs, k.shape, static_cast<size_t>(k.dim))
                                                  : nccl_reduce_scatter(xs, k.shape, static_cast<size_t>(k.dim), r);
      CHECK(nccl == mpi["case " + std::to_string(c) + " rank " + std::to_string(r)]);
    }
  }
}
