# Hugging Face's tokenizers on the same input as `fsdpc tokenize`, for
# bench/tokenize_bench.sh (its venv; never a build or test dependency).
#   train  TOKENIZER_JSON CORPUS KIND   trains a byte-level BPE (vocabulary
#          50257 at most) on CORPUS with GPT-2's pre-tokenizer (KIND gpt2) or
#          Llama 3's split (KIND llama3) and saves it: no real GPT-2
#          tokenizer.json is on the machine and the bench has no network.
#   encode TOKENIZER_JSON INPUT THREADS IDS_OUT   encodes INPUT as one
#          document with encode_batch over the pieces fsdpc cuts it into
#          (after a '\n' between printable ASCII characters, about 1 MiB
#          each), on THREADS threads (RAYON_NUM_THREADS), writes the ids as
#          uint32 to IDS_OUT and prints one JSON line of timings.
import json, os, re, sys, time

LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

def train(path, corpus, kind):
    from tokenizers import Tokenizer, Regex, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=50257, show_progress=False, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([corpus], trainer)
    tok.save(path)

def cut_pieces(data, piece):
    # fsdpc's cut rule (tokenizer/tokenize_files.cpp: next_cut), on bytes.
    pieces, at = [], 0
    while at < len(data):
        p = len(data)
        search = max(at + piece, 2)
        while True:
            nl = data.find(b"\n", search - 1)
            if nl < 0:
                break
            q = nl + 1
            if q < len(data) and 0x21 <= data[q - 2] <= 0x7E and 0x21 <= data[q] <= 0x7E:
                p = q
                break
            search = q + 1
        pieces.append(data[at:p])
        at = p
    return pieces

def encode(path, input_path, threads, ids_out):
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    import numpy as np
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    t0 = time.perf_counter()
    data = open(input_path, "rb").read()
    pieces = [p.decode("utf-8") for p in cut_pieces(data, 1 << 20)]
    t1 = time.perf_counter()
    encodings = tok.encode_batch_fast(pieces, add_special_tokens=False) if hasattr(tok, "encode_batch_fast") \
        else tok.encode_batch(pieces, add_special_tokens=False)
    t2 = time.perf_counter()
    ids = np.concatenate([np.asarray(e.ids, dtype=np.uint32) for e in encodings]) if encodings else np.zeros(0, np.uint32)
    ids.tofile(ids_out)
    t3 = time.perf_counter()
    import tokenizers
    print(json.dumps({"impl": "hf-tokenizers " + tokenizers.__version__, "threads": threads, "pieces": len(pieces),
                      "tokens": int(ids.size), "encode_s": round(t2 - t1, 3), "total_s": round(t3 - t0, 3),
                      "encode_tokens_per_s": round(ids.size / (t2 - t1)), "total_tokens_per_s": round(ids.size / (t3 - t0))}))

if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        encode(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
