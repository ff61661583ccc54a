// Reads a Hugging Face tokenizer.json into an HfTokenizer. Every key is
// checked: a kind of normalizer, pre-tokenizer, model or decoder these
// parts do not implement, or an option that would change the ids (BPE
// dropout, truncation), is refused by name with where it is and what is
// supported, so a file is either encoded as the reference encodes it or
// not at all.
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "tokenizer/hf_tokenizer.h"

namespace fsdpc {
namespace {

using json = nlohmann::json;

// The file and a JSON path inside it, for messages.
struct Where {
  const std::string& file;
  std::string path;
  Where at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  Where at(size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  std::string str() const { return file + ": " + (path.empty() ? "the file" : path); }
};

const char* kind_of(const json& j) { return j.type_name(); }

const json& object(const json& j, const Where& w) {
  if (!j.is_object()) fail(w.str(), " is ", kind_of(j), ", expected an object");
  return j;
}

// Refuses keys of `j` outside `known`: a key this reader does not know may
// change the ids.
void known_keys(const json& j, const Where& w, std::initializer_list<const char*> known) {
  const std::set<std::string> names(known.begin(), known.end());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!names.count(it.key())) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(w.at(it.key()).str(), ": this key is not supported (known here: ", list, ")");
    }
  }
}

const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const json& j, const char* key, const Where& w) {
  const json* v = member(j, key);
  if (v == nullptr || !v->is_string()) fail(w.at(key).str(), " must be a string");
  return v->get<std::string>();
}

bool bool_at(const json& j, const char* key, const Where& w, bool fallback) {
  const json* v = member(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(w.at(key).str(), " is ", kind_of(*v), ", expected true or false");
  return v->get<bool>();
}

uint64_t count_at(const json& j, const char* key, const Where& w, uint64_t max) {
  const json* v = member(j, key);
  if (v == nullptr || !v->is_number_unsigned() || v->get<uint64_t>() > max)
    fail(w.at(key).str(), " must be a whole number from 0 to ", max);
  return v->get<uint64_t>();
}

std::string type_of(const json& j, const Where& w) {
  object(j, w);
  return string_at(j, "type", w);
}

[[noreturn]] void unsupported(const Where& w, const std::string& type, const char* supported) {
  fail(w.at("type").str(), " '", type, "' is not supported (supported: ", supported, ")");
}

// The patterns known to split at a '\n' between printable characters
// whatever is around them (tokenizer.h: cuts_at_newlines): Llama 3's and
// Qwen2's. GPT-2's is ByteLevel's own.
bool cuts_at_newlines_pattern(const std::string& pattern) {
  static const std::set<std::string> known = {
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
  };
  return known.count(pattern) > 0;
}

// A Metaspace's replacement and prepend scheme (pre-tokenizer and decoder
// alike): prepend_scheme "always" | "first" | "never", or, in files before
// it, add_prefix_space (true: always).
std::pair<std::string, PrependScheme> read_metaspace(const json& j, const Where& w) {
  known_keys(j, w, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
  const std::string replacement = string_at(j, "replacement", w);
  PrependScheme scheme = bool_at(j, "add_prefix_space", w, true) ? PrependScheme::always : PrependScheme::never;
  if (member(j, "prepend_scheme")) {
    const std::string name = string_at(j, "prepend_scheme", w);
    if (name == "always") scheme = PrependScheme::always;
    else if (name == "first") scheme = PrependScheme::first;
    else if (name == "never") scheme = PrependScheme::never;
    else fail(w.at("prepend_scheme").str(), " '", name, "' is not supported (supported: always, first, never)");
  }
  return {replacement, scheme};
}

// {"String": ...} or {"Regex": ...}: the text and whether it is a regex.
std::pair<std::string, bool> read_pattern(const json& j, const Where& w) {
  const json* pattern = member(j, "pattern");
  if (pattern == nullptr || !pattern->is_object() || pattern->size() != 1)
    fail(w.at("pattern").str(), " must be {\"Regex\": ...} or {\"String\": ...}");
  const bool regex = pattern->contains("Regex");
  if (!regex && !pattern->contains("String"))
    fail(w.at("pattern").str(), " has '", pattern->begin().key(), "', expected Regex or String");
  return {string_at(*pattern, regex ? "Regex" : "String", w.at("pattern")), regex};
}

struct PreTokenizerInfo {
  bool byte_level = false;        // a ByteLevel step: the model works on bytes
  bool cuts_at_newlines = true;   // every step keeps the cut (tokenizer.h)
  bool splits = false;            // some step splits where the cut would be
};

std::unique_ptr<PreTokenizer> read_pre_tokenizer(const json& j, const Where& w, PreTokenizerInfo& info) {
  const std::string type = type_of(j, w);
  if (type == "ByteLevel") {
    known_keys(j, w, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    const bool prefix = bool_at(j, "add_prefix_space", w, true);
    const bool regex = bool_at(j, "use_regex", w, true);
    info.byte_level = true;
    if (prefix) info.cuts_at_newlines = false;  // a cut's second part would gain a space
    info.splits = info.splits || regex;
    return make_byte_level(prefix, regex);
  }
  if (type == "Split") {
    known_keys(j, w, {"type", "pattern", "behavior", "invert"});
    const auto [text, regex] = read_pattern(j, w);
    const std::string behavior = string_at(j, "behavior", w);
    static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::removed},
        {"Isolated", SplitBehavior::isolated},
        {"MergedWithPrevious", SplitBehavior::merged_with_previous},
        {"MergedWithNext", SplitBehavior::merged_with_next},
        {"Contiguous", SplitBehavior::contiguous}};
    std::optional<SplitBehavior> b;
    for (const auto& [name, value] : kBehaviors)
      if (behavior == name) b = value;
    if (!b)
      fail(w.at("behavior").str(), " '", behavior,
           "' is not supported (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
    const bool invert = bool_at(j, "invert", w, false);
    if (!(regex && *b == SplitBehavior::isolated && !invert && cuts_at_newlines_pattern(text)))
      info.cuts_at_newlines = false;
    else info.splits = true;
    return make_split(std::make_unique<Regex>(text, w.at("pattern").str(), !regex), *b, invert);
  }
  if (type == "Digits") {
    known_keys(j, w, {"type", "individual_digits"});
    const bool single = bool_at(j, "individual_digits", w, false);
    // The reference's char::is_numeric is the Unicode categories N*.
    return make_split(std::make_unique<Regex>(single ? R"(\p{N})" : R"(\p{N}+)", w.str()), SplitBehavior::isolated,
                      false);
  }
  if (type == "Metaspace") {
    auto [replacement, scheme] = read_metaspace(j, w);
    info.cuts_at_newlines = false;  // a cut's second part could gain a prefix
    return make_metaspace(std::move(replacement), scheme, bool_at(j, "split", w, true));
  }
  if (type == "Sequence") {
    known_keys(j, w, {"type", "pretokenizers"});
    const json* steps = member(j, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) fail(w.at("pretokenizers").str(), " must be an array");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < steps->size(); ++i) parts.push_back(read_pre_tokenizer((*steps)[i], w.at("pretokenizers").at(i), info));
    return make_sequence(std::move(parts));
  }
  unsupported(w, type, "ByteLevel, Split, Digits, Metaspace, Sequence");
}

std::unique_ptr<Decoder> read_decoder(const json& j, const Where& w) {
  const std::string type = type_of(j, w);
  if (type == "ByteLevel") {
    // Its options concern offsets, not the text.
    known_keys(j, w, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return make_byte_level_decoder();
  }
  if (type == "ByteFallback") {
    known_keys(j, w, {"type"});
    return make_byte_fallback_decoder();
  }
  if (type == "Fuse") {
    known_keys(j, w, {"type"});
    return make_fuse_decoder();
  }
  if (type == "Strip") {
    known_keys(j, w, {"type", "content", "start", "stop"});
    return make_strip_decoder(string_at(j, "content", w), count_at(j, "start", w, 1u << 20),
                              count_at(j, "stop", w, 1u << 20));
  }
  if (type == "Replace") {
    known_keys(j, w, {"type", "pattern", "content"});
    const json* pattern = member(j, "pattern");
    if (pattern == nullptr || !pattern->is_object() || !pattern->contains("String"))
      fail(w.at("pattern").str(), " must be {\"String\": ...} (a Regex pattern is not supported)");
    return make_replace_decoder(string_at(*pattern, "String", w.at("pattern")), string_at(j, "content", w));
  }
  if (type == "Metaspace") {
    auto [replacement, scheme] = read_metaspace(j, w);
    return make_metaspace_decoder(std::move(replacement), scheme == PrependScheme::never);
  }
  if (type == "Sequence") {
    known_keys(j, w, {"type", "decoders"});
    const json* steps = member(j, "decoders");
    if (steps == nullptr || !steps->is_array()) fail(w.at("decoders").str(), " must be an array");
    std::vector<std::unique_ptr<Decoder>> parts;
    for (size_t i = 0; i < steps->size(); ++i) parts.push_back(read_decoder((*steps)[i], w.at("decoders").at(i)));
    return make_sequence_decoder(std::move(parts));
  }
  unsupported(w, type, "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence");
}

std::unique_ptr<BpeModel> read_model(const json& j, const Where& w, bool byte_level) {
  const std::string type = type_of(j, w);
  if (type != "BPE") unsupported(w, type, "BPE");
  known_keys(j, w, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                    "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const json* dropout = member(j, "dropout"); dropout && !(dropout->is_number() && dropout->get<double>() == 0))
    fail(w.at("dropout").str(), " is ", dropout->dump(), ": BPE dropout (random merges) is not supported, expected null");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* v = member(j, affix); v && !(v->is_string() && v->get<std::string>().empty()))
      fail(w.at(affix).str(), " is ", v->dump(), ": not supported, expected null or \"\"");
  BpeOptions options;
  options.byte_level = byte_level;
  options.byte_fallback = bool_at(j, "byte_fallback", w, false);
  options.fuse_unk = bool_at(j, "fuse_unk", w, false);
  options.ignore_merges = bool_at(j, "ignore_merges", w, false);
  if (member(j, "unk_token")) options.unk = string_at(j, "unk_token", w);

  const json* vocab = member(j, "vocab");
  if (vocab == nullptr || !vocab->is_object()) fail(w.at("vocab").str(), " must be an object of token: id");
  std::vector<std::pair<std::string, TokenId>> tokens;
  tokens.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() >= (uint64_t{1} << 31))
      fail(w.at("vocab").str(), " '", it.key(), "': the id must be a whole number below 2^31");
    tokens.emplace_back(it.key(), it->get<TokenId>());
  }
  const json* merges = member(j, "merges");
  if (merges == nullptr || !merges->is_array()) fail(w.at("merges").str(), " must be an array");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    // "a b" (tokenizers before 0.20) or ["a", "b"].
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(w.at("merges").at(i).str(), " '", s, "' must be two tokens separated by one space");
      pairs.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(w.at("merges").at(i).str(), " must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  return std::make_unique<BpeModel>(tokens, pairs, std::move(options), w.file);
}

std::vector<AddedToken> read_added_tokens(const json* j, const Where& w) {
  std::vector<AddedToken> added;
  if (j == nullptr) return added;
  if (!j->is_array()) fail(w.str(), " must be an array");
  for (size_t i = 0; i < j->size(); ++i) {
    const json& t = (*j)[i];
    const Where here = w.at(i);
    object(t, here);
    known_keys(t, here, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken token{string_at(t, "content", here), static_cast<TokenId>(count_at(t, "id", here, (1u << 31) - 1)),
                     bool_at(t, "special", here, false)};
    token.normalized = bool_at(t, "normalized", here, !token.special);  // the reference's default
    for (const char* option : {"single_word", "lstrip", "rstrip"})
      if (bool_at(t, option, here, false))
        fail(here.at(option).str(), " is true for '", token.content, "': not supported, expected false");
    added.push_back(std::move(token));
  }
  return added;
}

// `local`: stays true while every normal form keeps cuts_at_newlines' cut.
std::unique_ptr<Normalizer> read_normalizer(const json& j, const Where& w, bool& local) {
  const std::string type = type_of(j, w);
  static const std::pair<const char*, NormalForm> kForms[] = {
      {"NFC", NormalForm::nfc}, {"NFD", NormalForm::nfd}, {"NFKC", NormalForm::nfkc}, {"NFKD", NormalForm::nfkd}};
  for (const auto& [name, form] : kForms) {
    if (type == name) {
      known_keys(j, w, {"type"});
      return make_unicode_normalizer(form);
    }
  }
  if (type == "Prepend") {
    known_keys(j, w, {"type", "prepend"});
    local = false;  // each part between added tokens gains the prefix
    return make_prepend_normalizer(string_at(j, "prepend", w));
  }
  if (type == "Replace") {
    known_keys(j, w, {"type", "pattern", "content"});
    local = false;  // a pattern may span the newline
    const auto [pattern, regex] = read_pattern(j, w);
    return make_replace_normalizer(pattern, regex, string_at(j, "content", w));
  }
  if (type == "Sequence") {
    known_keys(j, w, {"type", "normalizers"});
    const json* steps = member(j, "normalizers");
    if (steps == nullptr || !steps->is_array()) fail(w.at("normalizers").str(), " must be an array");
    if (steps->empty()) return nullptr;
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < steps->size(); ++i) {
      if (auto step = read_normalizer((*steps)[i], w.at("normalizers").at(i), local)) parts.push_back(std::move(step));
    }
    return make_sequence_normalizer(std::move(parts));
  }
  unsupported(w, type, "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
}

}  // namespace

std::unique_ptr<HfTokenizer> parse_hf_tokenizer_json(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, ": not a tokenizer.json: ", e.what());
  }
  const Where top{path, ""};
  object(doc, top);
  known_keys(doc, top, {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                        "post_processor", "decoder", "model"});
  for (const char* option : {"truncation", "padding"})
    if (member(doc, option)) fail(top.at(option).str(), " is set: not supported (it changes the ids), expected null");
  HfTokenizerParts parts;
  // Normal forms keep the cut of cuts_at_newlines: they change nothing across
  // a newline between two printable ASCII characters.
  bool local_normalizer = true;
  if (const json* normalizer = member(doc, "normalizer"))
    parts.normalizer = read_normalizer(*normalizer, top.at("normalizer"), local_normalizer);
  // The post-processor adds special tokens only when asked to
  // (add_special_tokens); encode never asks (tokenizer.h).
  if (const json* post = member(doc, "post_processor")) {
    const std::string type = type_of(*post, top.at("post_processor"));
    if (type != "ByteLevel" && type != "TemplateProcessing" && type != "Sequence" && type != "RobertaProcessing" &&
        type != "BertProcessing")
      unsupported(top.at("post_processor"), type, "ByteLevel, TemplateProcessing, Sequence, RobertaProcessing, BertProcessing");
  }
  PreTokenizerInfo info;
  if (const json* pre = member(doc, "pre_tokenizer")) parts.pre_tokenizer = read_pre_tokenizer(*pre, top.at("pre_tokenizer"), info);
  else info.cuts_at_newlines = false;
  const json* model = member(doc, "model");
  if (model == nullptr) fail(top.at("model").str(), " is missing");
  parts.model = read_model(*model, top.at("model"), info.byte_level);
  if (const json* decoder = member(doc, "decoder")) parts.decoder = read_decoder(*decoder, top.at("decoder"));
  parts.added = read_added_tokens(member(doc, "added_tokens"), top.at("added_tokens"));
  parts.cuts_at_newlines = info.cuts_at_newlines && info.splits && local_normalizer;
  for (const AddedToken& t : parts.added)
    if (t.content.find('\n') != std::string::npos) parts.cuts_at_newlines = false;
  return std::make_unique<HfTokenizer>(path, std::move(parts));
}

std::unique_ptr<HfTokenizer> read_hf_tokenizer_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the tokenizer file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hf_tokenizer_json(text.str(), path);
}

}  // namespace fsdpc
