# Run once by hand (not by the build or the tests) to make the tokenizer
# fixtures of test/tokenizer_fixtures.h and the ids test/tokenizer_test.cpp
# expects, with the reference libraries: Hugging Face `tokenizers` and
# `sentencepiece` from pip, in a venv outside the repository:
#   python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers sentencepiece
#   /tmp/tokvenv/bin/python test/tokenizers/make_reference.py OUTDIR
# It writes OUTDIR/gpt2_split.json, OUTDIR/llama3_split.json, OUTDIR/qwen2_split.json,
# test/tokenizers/sp_tiny.model (beside this script) and prints the expected
# ids as C++ initialisers. Versions used: tokenizers 0.23.3, sentencepiece 0.2.3.
import json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, Regex, AddedToken
import sentencepiece as spm

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
os.makedirs(out, exist_ok=True)

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Don't panic; we've seen it's fine, they'll say.",
    "Le café naïve à l'Ångström, Straße über ñandú, élève déjà vu.",
    "日本語のテキストと中文的文本，한국어 텍스트도 있습니다。",
    "Emoji: 👍🏽 👨‍👩‍👧 🎉🎉 ❤️ done.",
    "Numbers 12345678 and 3.14159, dates 2026-11-29, 1,000,000 items.",
    "def f(x):\n    return x**2  # square\n\nfor (int i = 0; i < n; ++i) { y[i] += x[i]; }\n",
    "Tabs\tand   spaces\n\n\n   newlines\r\n and\u00a0nbsp\u3000ideographic.",
]

GPT2_SPLIT = None  # ByteLevel(use_regex=True) is GPT-2's regular expression
QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

def train_bpe(pre, specials, vocab_size, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok

gpt2 = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], 400)
def save_compact(tok, path, merges_as_strings=False):
    doc = json.loads(tok.to_str())
    # Older tokenizers wrote merges as "a b" strings: the Llama 3 fixture keeps that form.
    if merges_as_strings:
        doc["model"]["merges"] = [" ".join(m) for m in doc["model"]["merges"]]
    with open(path, "w") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
    return Tokenizer.from_file(path)

gpt2 = save_compact(gpt2, os.path.join(out, "gpt2_split.json"))

llama = train_bpe(pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ["<|begin_of_text|>", "<|end_of_text|>"], 420, ignore_merges=True)
# A non-special added token, as fine-tuned vocabularies have.
llama.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
llama = save_compact(llama, os.path.join(out, "llama3_split.json"), merges_as_strings=True)

# Qwen2's layout: the NFC normalizer, Qwen2's split (digits one by one), a
# special token that is not normalized and an added token that is.
qwen = train_bpe(pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    ["<|endoftext|>", "<|im_end|>"], 400)
from tokenizers import normalizers
qwen.normalizer = normalizers.NFC()
qwen.add_tokens([AddedToken("café", special=False, normalized=True)])
qwen = save_compact(qwen, os.path.join(out, "qwen2_split.json"))

sp_prefix = os.path.join(here, "sp_tiny")
spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 20), model_prefix=sp_prefix, vocab_size=420,
                               model_type="bpe", byte_fallback=True, character_coverage=0.98,
                               normalization_rule_name="identity", remove_extra_whitespaces=False,
                               split_digits=True, user_defined_symbols=["<tool>"], num_threads=1, minloglevel=2)
os.remove(sp_prefix + ".vocab")
sp = spm.SentencePieceProcessor(model_file=sp_prefix + ".model")

CASES = [
    ("ascii", "Hello world, the quick brown fox."),
    ("contractions", "Don't DON'T we've It's THEY'LL"),
    ("accented", "café naïve Ångström Straße über"),
    ("cjk", "日本語のテキスト，中文文本"),
    ("emoji", "ok 👍🏽 👨‍👩‍👧 🎉!"),
    ("whitespace", "a  b\t\tc\n\n\n  d   \u00a0e\u3000f \r\n g    "),
    ("digits", "12345678 3.14159 2026-11-29 1,000"),
    ("code", "def f(x):\n    return x**2  # square\n\nfor (int i = 0; i < n; ++i) { y[i] += x[i]; }\n"),
    ("unseen", "Zebra ξ Ж ∑ 𝔘"),
    ("special", "a<|endoftext|>b<|end_of_text|> <tool>c"),
    ("decomposed", "Cafe\u0301 cafe\u0301 Ångstro\u0308m A\u030angstrom \uff21\u2460 e\u0301\u0301<|im_end|>"),
]

def cxx(s):
    return json.dumps(s, ensure_ascii=False)

def ids_line(name, ids):
    return "    {" + cxx(name) + ", {" + ", ".join(map(str, ids)) + "}},"

for label, tok in (("gpt2", gpt2), ("llama3", llama), ("qwen2", qwen)):
    print(f"// {label}")
    for name, text in CASES:
        print(ids_line(name, tok.encode(text, add_special_tokens=False).ids))
print("// sp")
for name, text in CASES:
    print(ids_line(name, sp.encode(text)))
# Decoding: ids that cut a multi-byte character, and special tokens kept or skipped.
lossy = gpt2.encode("é日").ids
print("// decode gpt2", lossy, cxx(gpt2.decode(lossy[:-1])), cxx(gpt2.decode(lossy[1:])))
sp_ids = gpt2.encode("a<|endoftext|>b").ids
print("// decode gpt2", sp_ids, cxx(gpt2.decode(sp_ids, skip_special_tokens=False)), cxx(gpt2.decode(sp_ids)))
sp_ids = sp.encode("é日")
print("// decode sp", sp_ids, cxx(sp.decode(sp_ids[:-1])), cxx(sp.decode(sp_ids[1:])))

# Byte fallback and the unknown token: a hand-made tokenizer.json that
# tokenizer_test.cpp builds the same way (fallback_json there): <unk> = 0,
# <0x00>..<0xFF> = 1..256, then the characters and merges below; words are
# split before each space (Split on the String " ", MergedWithNext).
def fallback_json(byte_fallback):
    vocab = {"<unk>": 0}
    for b in range(256):
        vocab["<0x%02X>" % b] = 1 + b
    for t in ["a", "b", "c", " ", "é", "ab", "abc", " a", " ab"]:
        vocab[t] = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": byte_fallback,
                  "ignore_merges": False, "vocab": vocab,
                  "merges": [["a", "b"], ["ab", "c"], [" ", "a"], [" a", "b"]]},
    }

for fallback in (True, False):
    tok = Tokenizer.from_str(json.dumps(fallback_json(fallback)))
    for name, text in (("mixed", "abc ab é日 cab  x"), ("unknown", "xyz ab"), ("bytes", "日本")):
        ids = tok.encode(text, add_special_tokens=False).ids
        print(f"// fallback={fallback}", ids_line(name, ids), "decodes to", cxx(tok.decode(ids)))

# Pre-tokenizer and normalizer variants of the GPT-2 fixture (tokenizer_test.cpp's
# "every split behaviour" case): the top-level keys of each replaced, one text.
BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
TEXT = "Hi, there;  we've 12345 ﬁne ①Ａ.\r\n\tcafe\u0301<|endoftext|>x y"
VARIANTS = []
for beh in ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous']:
    for inv in [False, True]:
        VARIANTS.append((f"Split {beh}{' inverted' if inv else ''}", {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+|[,.;]"}, "behavior": beh, "invert": inv}, BL]}}))
VARIANTS.append(("Split on a string", {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False}, BL]}}))
VARIANTS.append(("Digits one by one", {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}}))
VARIANTS.append(("Digits grouped", {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": False}, BL]}}))
VARIANTS.append(("ByteLevel with a prefix space", {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}}))
VARIANTS.append(("NFKC", {"normalizer": {"type": "NFKC"}}))
VARIANTS.append(("NFD", {"normalizer": {"type": "NFD"}}))
VARIANTS.append(("a Sequence of NFD and NFC", {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "NFC"}]}}))
for name, edit in VARIANTS:
    d = json.loads(gpt2.to_str()); d.update(edit)
    ids = Tokenizer.from_str(json.dumps(d)).encode(TEXT, add_special_tokens=False).ids
    print('    {"%s", R"(%s)", {%s}},' % (name, json.dumps(edit), ", ".join(map(str, ids))))

# Llama 2's tokenizer.json layouts: SentencePiece-style BPE over characters
# with byte fallback (<0x00>..<0xFF> added to the vocabulary as the
# converted Llama 2 has them) and <unk>; "legacy" is Prepend("▁") and
# Replace(" ", "▁") normalizers with no pre-tokenizer, "metaspace" the
# Metaspace pre-tokenizer (prepend_scheme first, split) and decoder.
from tokenizers import normalizers as norms
def sp_style(name, normalizer, pre, decoder):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre is not None:
        tok.pre_tokenizer = pre
    tok.decoder = decoder
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer)
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    for b in range(256):
        if "<0x%02X>" % b not in vocab:
            vocab["<0x%02X>" % b] = len(vocab)
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
    return Tokenizer.from_file(path)

legacy = sp_style("llama2_legacy", norms.Sequence([norms.Prepend("▁"), norms.Replace(" ", "▁")]), None,
                  decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)]))
metaspace = sp_style("llama2_metaspace", None, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True),
                     decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first")]))
SP_STYLE_CASES = CASES + [("after_special", "<s>Hello world</s> again  two")]
for label, tok in (("llama2 legacy", legacy), ("llama2 metaspace", metaspace)):
    print(f"// {label}")
    for name, text in SP_STYLE_CASES:
        ids = tok.encode(text, add_special_tokens=False).ids
        print(ids_line(name, ids), "//", cxx(tok.decode(ids, skip_special_tokens=False)))
