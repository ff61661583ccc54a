// tokenize_files: the pieces of every input (cut where the tokenizer allows,
// else one per document) go to a PieceEncoder's threads; the calling thread
// writes their ids in order to a temporary file, with the separator between
// documents, reports progress, splits off the val file and renames both.
#include "tokenizer/tokenize_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>

#include "ir/error.h"
#include "tokenizer/piece_encoder.h"

namespace fsdpc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

static_assert(std::endian::native == std::endian::little, "token files are little-endian: write them byte-swapped here");

// A read-only mapping of a whole input file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    if (fs::is_directory(path)) fail(path, ": is a folder, expected a text file");
    fd_ = ::open(path.c_str(), O_RDONLY);
    if (fd_ < 0) fail(path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    ::fstat(fd_, &st);
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      if (data_ == MAP_FAILED) fail(path, ": cannot map: ", std::strerror(errno));
      ::madvise(data_, size_, MADV_SEQUENTIAL);
    }
  }
  ~MappedFile() {
    if (data_ != nullptr && data_ != MAP_FAILED) ::munmap(data_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view text() const { return size_ ? std::string_view(static_cast<const char*>(data_), size_) : std::string_view(); }

 private:
  int fd_ = -1;
  void* data_ = nullptr;
  size_t size_ = 0;
};

bool graphic(char c) { return c >= 0x21 && c <= 0x7E; }

// The first cut at or after `target`: just after a '\n' between two
// printable ASCII characters (tokenizer.h), or the end.
size_t next_cut(std::string_view text, size_t target) {
  for (size_t at = std::max<size_t>(target, 2); at < text.size();) {
    const void* nl = std::memchr(text.data() + at - 1, '\n', text.size() - at);
    if (nl == nullptr) break;
    const size_t p = static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
    if (p >= 2 && p < text.size() && graphic(text[p - 2]) && graphic(text[p])) return p;
    at = p + 1;
  }
  return text.size();
}

// A temporary file renamed over its name when done, removed if not.
class OutputFile {
 public:
  explicit OutputFile(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp-" + std::to_string(::getpid())) {
    file_ = std::fopen(temp_.c_str(), "w+b");
    if (file_ == nullptr) fail(path_, ": cannot write: ", std::strerror(errno));
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(temp_.c_str());
  }
  void write(const void* data, size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail(path_, ": write failed: ", std::strerror(errno));
  }
  FILE* file() { return file_; }
  void commit() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0 || std::fclose(file_) != 0) {
      file_ = nullptr;
      fail(path_, ": write failed: ", std::strerror(errno));
    }
    file_ = nullptr;
    if (std::rename(temp_.c_str(), path_.c_str()) != 0) fail(path_, ": cannot rename into place: ", std::strerror(errno));
    committed_ = true;
  }
  const std::string& temp() const { return temp_; }

 private:
  std::string path_, temp_;
  FILE* file_ = nullptr;
  bool committed_ = false;
};

void write_ids(OutputFile& out, const std::vector<TokenId>& ids, int width) {
  if (width == 4) {
    out.write(ids.data(), ids.size() * 4);
    return;
  }
  thread_local std::vector<uint16_t> narrow;
  narrow.assign(ids.begin(), ids.end());
  out.write(narrow.data(), narrow.size() * 2);
}

// Moves the last `val_tokens` ids of the written train file into `val`.
void split_off_val(OutputFile& train, OutputFile& val, int64_t train_tokens, int64_t val_tokens, int width) {
  FILE* f = train.file();
  std::fflush(f);
  std::vector<char> buffer(size_t{8} << 20);
  int64_t left = val_tokens * width;
  std::fseek(f, static_cast<long>(train_tokens * width), SEEK_SET);
  while (left > 0) {
    const size_t n = std::fread(buffer.data(), 1, std::min<size_t>(buffer.size(), static_cast<size_t>(left)), f);
    if (n == 0) fail(train.temp(), ": read back failed");
    val.write(buffer.data(), n);
    left -= static_cast<int64_t>(n);
  }
  std::fflush(f);
  if (::ftruncate(::fileno(f), static_cast<off_t>(train_tokens * width)) != 0)
    fail(train.temp(), ": cannot truncate: ", std::strerror(errno));
}

}  // namespace

std::string val_path_for(const std::string& out) {
  const fs::path p(out);
  std::string name = p.filename().string();
  if (const size_t at = name.rfind("train"); at != std::string::npos) name.replace(at, 5, "val");
  else name = p.stem().string() + ".val" + p.extension().string();
  return (p.parent_path() / name).string();
}

int token_file_width(const std::string& out, int64_t vocab_size) {
  const std::string ext = fs::path(out).extension().string();
  if (ext == ".u32") return 4;
  if (ext != ".bin") fail("--out ", out, ": the name must end in .bin (uint16 ids) or .u32 (uint32 ids), as --data reads them");
  if (vocab_size > 65536)
    fail("--out ", out, ": a .bin file holds uint16 ids, but the vocabulary has ", vocab_size,
         " ids; name it .u32 (uint32 ids)");
  return 2;
}

namespace {

// The pieces of every document: cut where the tokenizer allows, else whole.
std::vector<TextPiece> plan_pieces(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                                   const std::vector<std::unique_ptr<MappedFile>>& documents, size_t piece_bytes,
                                   std::vector<size_t>& first_piece) {
  std::vector<TextPiece> pieces;
  for (size_t d = 0; d < documents.size(); ++d) {
    first_piece.push_back(pieces.size());
    const std::string_view text = documents[d]->text();
    size_t at = 0;
    do {
      const size_t end = tokenizer.cuts_at_newlines() ? next_cut(text, at + piece_bytes) : text.size();
      pieces.push_back({text.substr(at, end - at), &inputs[d], at});
      at = end;
    } while (at < text.size());
  }
  return pieces;
}

void check_options(const Tokenizer& tokenizer, const TokenizeOptions& options) {
  if (options.inputs.empty()) fail("no input files");
  if (options.val_fraction < 0 || options.val_fraction >= 1) fail("--val-fraction ", options.val_fraction, " must be in [0, 1)");
  if (options.inputs.size() > 1 && !options.separator)
    fail(tokenizer.source(), " names no end-of-text token to put between the ", options.inputs.size(),
         " documents; name one (--eot TOKEN)");
  if (options.val_fraction > 0 && val_path_for(options.out) == options.out)
    fail("--out ", options.out, ": the validation file would be the same file");
}

}  // namespace

TokenizeResult tokenize_files(const Tokenizer& tokenizer, const TokenizeOptions& options) {
  const auto start = Clock::now();
  TokenizeResult result;
  result.width = token_file_width(options.out, tokenizer.vocab_size());
  check_options(tokenizer, options);
  result.train_path = options.out;
  if (options.val_fraction > 0) result.val_path = val_path_for(options.out);

  std::vector<std::unique_ptr<MappedFile>> documents;
  for (const std::string& input : options.inputs) {
    documents.push_back(std::make_unique<MappedFile>(input));
    result.bytes += static_cast<int64_t>(documents.back()->text().size());
  }
  std::vector<size_t> first_piece;  // of each document
  std::vector<TextPiece> pieces = plan_pieces(tokenizer, options.inputs, documents, options.piece_bytes, first_piece);
  std::vector<size_t> piece_sizes;
  for (const TextPiece& p : pieces) piece_sizes.push_back(p.text.size());
  const size_t count = pieces.size();
  const size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                             : std::max<size_t>(1, std::thread::hardware_concurrency());

  OutputFile train(result.train_path);
  PieceEncoder encoder(tokenizer, std::move(pieces), threads, options.parse_special);
  TokenizeProgress progress{0, result.bytes, 0, 0};
  auto last_report = Clock::now();
  size_t document = 0;
  for (size_t i = 0; i < count;) {
    if (std::optional<std::vector<TokenId>> ids = encoder.next(std::chrono::milliseconds(200))) {
      for (; document + 1 < first_piece.size() && first_piece[document + 1] <= i; ++document) {
        write_ids(train, {*options.separator}, result.width);  // between documents
        ++result.tokens;
      }
      write_ids(train, *ids, result.width);
      result.tokens += static_cast<int64_t>(ids->size());
      progress.bytes_done += static_cast<int64_t>(piece_sizes[i]);
      ++i;
    }
    if (options.progress && Clock::now() - last_report > std::chrono::milliseconds(500)) {
      progress.tokens = result.tokens;
      progress.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      options.progress(progress);
      last_report = Clock::now();
    }
  }
  result.train_tokens = result.tokens;
  if (options.val_fraction > 0) {
    // nanoGPT's int(n * 0.9) for train, the rest for val.
    result.train_tokens = static_cast<int64_t>(static_cast<double>(result.tokens) * (1 - options.val_fraction));
    result.val_tokens = result.tokens - result.train_tokens;
    OutputFile val(result.val_path);
    split_off_val(train, val, result.train_tokens, result.val_tokens, result.width);
    val.commit();
  }
  train.commit();
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace fsdpc
