#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs each for
# FUZZ_SECONDS (default 60), FUZZ_JOBS at a time (default 1). Seeds come from
# native/fuzz/corpus/ (tools/make_fuzz_corpus.py); what a run adds lands in
# build-fuzz/corpus/<run>/, crashes in build-fuzz/artifacts/, logs in build-fuzz/logs/.
# Usage: scripts/fuzz.sh [run...]   (default: every run below). Exit status 1 on a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh

PY=${PYTHON:-python3}
SECONDS_EACH=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-1}
BUILD=${FUZZ_BUILD:-build-fuzz}

command -v clang++ >/dev/null && [ -n "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null | grep /)" ] \
    || apt_install clang libclang-rt-dev
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_TESTS=OFF \
    -DEMBER_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j"${JOBS:-2}" --target fuzz_gguf fuzz_tokenize fuzz_detokenize fuzz_sampler fuzz_grammar

VOCAB="${EMBER_VOCAB_DIR:-$($PY tools/fetch_assets.py suites | awk '$1 == "vocab" {print $2}')}"
vocabs() { local out="" n; for n in "$@"; do out+="${out:+:}$VOCAB/ggml-vocab-$n.gguf"; done; echo "$out"; }

# run name | binary | seed corpus | vocabularies | max input length
RUNS=(
    "gguf|fuzz_gguf|gguf||65536"
    "sampler|fuzz_sampler|sampler||8192"
    "grammar|fuzz_grammar|grammar||4096"
    "tokenize-spm|fuzz_tokenize|tokenize|$(vocabs llama-spm phi-3 baichuan)|4096"
    "tokenize-bpe|fuzz_tokenize|tokenize|$(vocabs llama-bpe qwen2 gpt-2 deepseek-coder deepseek-llm falcon starcoder command-r refact mpt)|4096"
    "tokenize-wpm|fuzz_tokenize|tokenize|$(vocabs bert-bge)|4096"
    "detokenize|fuzz_detokenize|detokenize|$(vocabs llama-spm llama-bpe qwen2 gpt-2 bert-bge gemma-4)|4096"
)
wanted=("$@")

run_one() {
    local name=$1 bin=$2 seeds=$3 vocab=$4 max_len=$5
    mkdir -p "$BUILD/corpus/$name" "$BUILD/artifacts" "$BUILD/logs"
    EMBER_FUZZ_VOCAB="$vocab" ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$BUILD/native/fuzz/$bin" "$BUILD/corpus/$name" "native/fuzz/corpus/$seeds" \
        -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=30 -rss_limit_mb=4096 \
        -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$name-" >"$BUILD/logs/$name.log" 2>&1
}

pids=() names=()
for r in "${RUNS[@]}"; do
    IFS='|' read -r name bin seeds vocab max_len <<<"$r"
    if ((${#wanted[@]})) && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
    while (($(jobs -rp | wc -l) >= FUZZ_JOBS)); do wait -n || true; done
    echo "== fuzz $name (${SECONDS_EACH}s)"
    run_one "$name" "$bin" "$seeds" "$vocab" "$max_len" &
    pids+=($!) names+=("$name")
done

status=0
for i in "${!pids[@]}"; do
    name=${names[$i]}
    if wait "${pids[$i]}"; then result=ok; else result=FINDING; status=1; fi
    log="$BUILD/logs/$name.log"
    # the last status line: "#<execs> ... cov: <edges> ft: <features> corp: <units>/<size> ..."
    line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    printf '%-14s %-8s %s\n' "$name" "$result" "$line"
    [ "$result" = ok ] || tail -40 "$log"
done
exit $status
