// The pipeline step-time replay (runtime/planner/pipeline_timing.h) against the
// closed forms of the pipeline literature: P equal stages with forward f and
// backward b over M micro-batches take (M + P - 1)(f + b) in GPipe's order
// and in 1F1B's (the same bubble, (P - 1)(f + b)), each transfer t adds 2(P - 1)t
// to GPipe's critical path, a stage twice as slow sets the pace, and a
// once-a-step gather and reduce add their time at both ends.
#include <catch2/catch.hpp>

#include "ir/error.h"
#include "runtime/planner/pipeline_timing.h"

using namespace fsdpc;

TEST_CASE("equal stages take (M + P - 1)(f + b) in both orders, their idle time the bubble", "[pp]") {
  const double f = 1.0, b = 2.0;
  for (PipelineSchedule order : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b})
    for (int p : {1, 2, 4})
      for (int m : {1, 3, 8}) {
        INFO(pipeline_schedule_name(order) << " P " << p << " M " << m);
        const PipelineTiming t = pipeline_timing(std::vector<PipelineStageTimes>(p, {f, b}), 0, order, m);
        CHECK(t.seconds == Approx((m + p - 1) * (f + b)));
        for (int s = 0; s < p; ++s) {
          CHECK(t.busy[s] == Approx(m * (f + b)));
          CHECK(t.idle[s] == Approx((p - 1) * (f + b)));
        }
      }
}

TEST_CASE("transfers lengthen GPipe's critical path by 2(P - 1) of them", "[pp]") {
  const double t = 0.25;
  for (int p : {2, 3})
    for (int m : {1, 4}) {
      INFO("P " << p << " M " << m);
      const PipelineTiming g = pipeline_timing(std::vector<PipelineStageTimes>(p, {1, 2}), t, PipelineSchedule::gpipe, m);
      CHECK(g.seconds == Approx((m + p - 1) * 3.0 + 2 * (p - 1) * t));
      // 1F1B waits on the same transfers, at least once each way.
      const PipelineTiming o =
          pipeline_timing(std::vector<PipelineStageTimes>(p, {1, 2}), t, PipelineSchedule::one_f_one_b, m);
      CHECK(o.seconds >= (m + p - 1) * 3.0 + 2 * (p - 1) * t - 1e-12);
    }
}

TEST_CASE("the slowest stage sets the pace; a gather and a reduce add at both ends", "[pp]") {
  // Stage 1 twice as slow: once the pipeline is full it runs back to back.
  const std::vector<PipelineStageTimes> uneven{{1, 2}, {2, 4}};
  const int m = 6;
  const PipelineTiming t = pipeline_timing(uneven, 0, PipelineSchedule::one_f_one_b, m);
  CHECK(t.busy[1] == Approx(m * 6.0));
  CHECK(t.seconds == Approx(1 + m * 6.0 + 2));  // stage 0's first forward, stage 1 busy, stage 0's last backward
  CHECK(t.idle[1] == Approx(3.0));
  // Once a step: every stage gathers for 5 before its first micro-batch and
  // reduces for 7 after its last.
  std::vector<PipelineStageTimes> kept(2, {1, 2, 5, 7});
  const PipelineTiming k = pipeline_timing(kept, 0, PipelineSchedule::gpipe, 4);
  CHECK(k.seconds == Approx(5 + (4 + 1) * 3.0 + 7));
  CHECK(k.busy[0] == Approx(5 + 4 * 3.0 + 7));
}

TEST_CASE("pipeline timing refuses what no pipeline has", "[pp]") {
  CHECK_THROWS_WITH(pipeline_timing({}, 0, PipelineSchedule::gpipe, 1), Catch::Contains("no stages"));
  CHECK_THROWS_WITH(pipeline_timing({{1, 1}}, 0, PipelineSchedule::gpipe, 0), Catch::Contains("0 micro-batches"));
  CHECK_THROWS_WITH(pipeline_timing({{1, 1}}, -1, PipelineSchedule::gpipe, 1), Catch::Contains("negative transfer"));
  CHECK_THROWS_WITH(pipeline_timing({{-1, 1}}, 0, PipelineSchedule::gpipe, 1), Catch::Contains("negative stage time"));
}
