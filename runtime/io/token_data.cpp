// Token windows read straight from a memory-mapped file (see runtime/io/token_data.h);
// the kernel pages in only what a step touches, so multi-GB data sets cost no heap.
#include "runtime/io/token_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "ir/error.h"
#include "runtime/random.h"

namespace fsdpc {

namespace {
constexpr uint64_t kWindowStream = 0x77696e646f77ULL;  // "window"

std::string os_error() { return std::strerror(errno); }

// Closes fd on every path out of the constructor, including a throw.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);  // read-only: a failed close loses no data
  }
};

int64_t uniform_below(uint64_t bits, int64_t n) {
  // Lemire's multiply-shift: bias below n / 2^64, no division.
  return static_cast<int64_t>((static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(n)) >> 64);
}

int width_of(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::uint16: return 2;
    case TokenDtype::uint32: return 4;
    default: return 1;
  }
}
}  // namespace

std::optional<Sampling> parse_sampling(std::string_view name) {
  if (name == "sequential") return Sampling::sequential;
  if (name == "random") return Sampling::random;
  return std::nullopt;
}

std::optional<TokenDtype> parse_token_dtype(std::string_view name) {
  for (TokenDtype d : {TokenDtype::automatic, TokenDtype::uint8, TokenDtype::uint16, TokenDtype::uint32})
    if (name == token_dtype_name(d)) return d;
  return std::nullopt;
}

std::string_view token_dtype_name(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::automatic: return "auto";
    case TokenDtype::uint8: return "uint8";
    case TokenDtype::uint16: return "uint16";
    case TokenDtype::uint32: return "uint32";
  }
  return "?";
}

TokenDtype resolve_token_dtype(const std::string& path, TokenDtype requested) {
  if (requested != TokenDtype::automatic) return requested;
  const std::filesystem::path suffix = std::filesystem::path(path).extension();
  if (suffix == ".bin") return TokenDtype::uint16;
  if (suffix == ".u32") return TokenDtype::uint32;
  return TokenDtype::uint8;
}

TokenData::TokenData(const std::string& path, int64_t vocab, int64_t seq, Sampling sampling, uint64_t seed,
                     TokenDtype dtype)
    : path_(path), vocab_(vocab), seq_(seq), sampling_(sampling), seed_(seed),
      width_(width_of(resolve_token_dtype(path, dtype))) {
  if (vocab < 1) fail("token data ", path, ": vocabulary size must be at least 1, got ", vocab);
  if (seq < 1) fail("token data ", path, ": sequence length must be at least 1, got ", seq);
  const std::string_view read_as = token_dtype_name(resolve_token_dtype(path, dtype));
  // Automatic bytes are text, fine for any model. Ids that the user or the
  // .bin suffix declared must reach the model's vocabulary, or the file holds
  // ids that wrapped when written, or wider ids that would be read in halves.
  if (vocab > vocab_of_file() && (dtype != TokenDtype::automatic || width_ > 1))
    fail("token data ", path, ": the model's vocabulary of ", vocab, " does not fit ", read_as, " ids (below ",
         vocab_of_file(), ", from ", dtype == TokenDtype::automatic ? "the file's suffix" : "--data-dtype",
         "); a file of uint32 ids reads with --data-dtype uint32 or a .u32 name, and narrower ids written from a "
         "larger vocabulary have wrapped: write them again as uint32");

  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail("token data ", path, ": cannot open: ", os_error());
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail("token data ", path, ": cannot stat: ", os_error());
  if (!S_ISREG(st.st_mode)) fail("token data ", path, ": not a regular file");

  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size % width_ != 0)
    fail("token data ", path, ": ", read_as, " ids are ", width_, " bytes each, but the file's ", size,
         " bytes are not a multiple of ", width_);
  tokens_ = size / width_;
  if (tokens_ < seq + 1)
    fail("token data ", path, ": ", tokens_, " tokens is shorter than one window of ", seq + 1,
         " tokens (sequence length ", seq, " plus the shifted target)");

  bytes_ = static_cast<size_t>(size);
  void* map = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) fail("token data ", path, ": cannot map ", size, " bytes: ", os_error());
  data_ = static_cast<const unsigned char*>(map);
  // Random windows land anywhere; read-ahead around them would be wasted I/O.
  if (sampling == Sampling::random && ::madvise(map, bytes_, MADV_RANDOM) != 0) {
    const std::string why = os_error();
    release();
    fail("token data ", path, ": madvise(MADV_RANDOM) failed: ", why);
  }
}

TokenData::~TokenData() { release(); }

TokenData::TokenData(TokenData&& other) noexcept { *this = std::move(other); }

TokenData& TokenData::operator=(TokenData&& other) noexcept {
  if (this == &other) return *this;
  release();
  path_ = std::move(other.path_);
  vocab_ = other.vocab_;
  seq_ = other.seq_;
  sampling_ = other.sampling_;
  seed_ = other.seed_;
  width_ = other.width_;
  tokens_ = other.tokens_;
  data_ = std::exchange(other.data_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  return *this;
}

void TokenData::release() noexcept {
  if (data_ == nullptr) return;
  // munmap of a mapping we own can only fail on a corrupted pointer.
  FSDPC_CHECK(::munmap(const_cast<unsigned char*>(data_), bytes_) == 0) << "munmap: " << os_error();
  data_ = nullptr;
  bytes_ = 0;
}

int64_t TokenData::steps_per_epoch(int64_t global_batch) const {
  if (global_batch < 1) fail("token data ", path_, ": global batch must be at least 1, got ", global_batch);
  return (windows() + global_batch - 1) / global_batch;
}

int64_t TokenData::token(int64_t offset) const {
  const size_t k = static_cast<size_t>(offset);
  // Assembled byte by byte: the file is little-endian whatever the host is,
  // and an id need not be aligned in the mapping.
  const unsigned char* p = data_ + k * static_cast<size_t>(width_);
  uint32_t v = 0;
  for (int b = width_ - 1; b >= 0; --b) v = (v << 8) | p[b];
  return static_cast<int64_t>(v);
}

int64_t TokenData::window_start(int64_t step, int64_t global_batch, int64_t row) const {
  if (sampling_ == Sampling::random) {
    const uint64_t key = derive_key(derive_key(derive_key(seed_, kWindowStream), static_cast<uint64_t>(step)),
                                    static_cast<uint64_t>(row));
    return uniform_below(random_bits(key, 0), tokens_ - seq_);
  }
  // 128-bit so that step * global_batch cannot overflow on long runs.
  const auto w = (static_cast<__int128>(step) * global_batch + row) % windows();
  return static_cast<int64_t>(w) * seq_;
}

void TokenData::batch(int64_t step, int64_t dp_rank, int64_t dp_world, int64_t global_batch, int64_t* idx,
                      int64_t* targets) const {
  if (step < 0) fail("token data ", path_, ": step must be at least 0, got ", step);
  if (global_batch < 1) fail("token data ", path_, ": global batch must be at least 1, got ", global_batch);
  if (dp_world < 1 || dp_rank < 0 || dp_rank >= dp_world)
    fail("token data ", path_, ": data-parallel rank ", dp_rank, " is outside a world of ", dp_world);
  if (global_batch % dp_world != 0)
    fail("token data ", path_, ": global batch ", global_batch, " is not divisible by the data-parallel world of ",
         dp_world);
  const int64_t local = global_batch / dp_world;
  for (int64_t i = 0; i < local; ++i) {
    const int64_t start = window_start(step, global_batch, dp_rank * local + i);
    for (int64_t t = 0; t <= seq_; ++t) {
      const int64_t v = token(start + t);
      if (v >= vocab_)
        fail("token data ", path_, ": token ", v, " at token offset ", start + t,
             " is outside the model's vocabulary of ", vocab_);
      if (t < seq_) idx[i * seq_ + t] = v;
      if (t > 0) targets[i * seq_ + t - 1] = v;
    }
  }
}

}  // namespace fsdpc
