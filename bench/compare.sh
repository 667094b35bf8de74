#!/usr/bin/env bash
# One interleaved run of agent-bench and the peers' scripts on the same machine:
# every round runs each configuration once, ours and theirs alternating, so
# machine noise falls on both. Prints one JSON line per run to $OUT and a table
# of medians (with min–max) per configuration.
#
#   cargo build --release -p bench
#   bench/compare.sh bench/peers          # REPS=3 by default
set -euo pipefail
peers=${1:?usage: bench/compare.sh PEERS_DIR (the folder of langgraph_bench.py and plain_loop.py)}
cd "$(dirname "$0")/.."
bench=target/release/agent-bench
[[ -x $bench ]] || { echo "build it first: cargo build --release -p bench" >&2; exit 1; }
REPS=${REPS:-3}
OUT=${OUT:-$(mktemp "${TMPDIR:-/tmp}/agent-compare.XXXXXX.jsonl")}
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT

W="--sessions 200 --tool-steps 4"
configs=(
    "ours memory C=1|$bench run $W --store memory"
    "bare loop memory|python3 $peers/plain_loop.py $W"
    "LangGraph no saver|python3 $peers/langgraph_bench.py $W --checkpointer none"
    "LangGraph memory saver|python3 $peers/langgraph_bench.py $W --checkpointer memory"
    "ours sqlite C=1|$bench run $W --store sqlite --db $db/ours.db"
    "bare loop durable|python3 $peers/plain_loop.py $W --durable --db $db/plain.db"
    "LangGraph sqlite C=1|python3 $peers/langgraph_bench.py $W --checkpointer sqlite --db $db/lg.db"
    "ours sqlite C=50|$bench run $W --store sqlite --concurrency 50 --db $db/ours.db"
    "LangGraph sqlite C=50|python3 $peers/langgraph_bench.py $W --checkpointer sqlite --concurrency 50 --db $db/lg.db"
    "ours memory 20x10|$bench run --sessions 20 --tool-steps 10 --operation add --store memory"
    "ours memory 20x1000|$bench run --sessions 20 --tool-steps 1000 --operation add --store memory"
    "ours memory 10000 concurrent|$bench run --sessions 10000 --concurrency 10000 --store memory"
)
for round in $(seq "$REPS"); do
    for entry in "${configs[@]}"; do
        name=${entry%%|*}
        command=${entry#*|}
        echo "[round $round] $name" >&2
        $command | python3 -c 'import json, sys; r = json.loads(sys.stdin.read()); r["config"] = sys.argv[1]; print(json.dumps(r))' "$name" >>"$OUT"
    done
done
echo "runs: $OUT" >&2
python3 - "$OUT" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs.setdefault(r["config"], []).append(r)
print("| configuration | runs | us/step median (min–max) | steps/s | peak RSS MB | commits/step | fsyncs/step |")
print("|---|---|---|---|---|---|---|")
for name, rs in runs.items():
    us = [r["us_per_step"] for r in rs]
    med = lambda key: statistics.median(r[key] for r in rs) if all(r.get(key) is not None for r in rs) else None
    fmt = lambda v, d=1: "–" if v is None else f"{v:.{d}f}"
    print(f"| {name} | {len(rs)} | {statistics.median(us):.1f} ({min(us):.1f}–{max(us):.1f}) | {med('steps_per_s'):.0f} "
          f"| {fmt(med('peak_rss_mb'))} | {fmt(med('commits_per_step'), 2)} | {fmt(med('fsyncs_per_step'), 2)} |")
PY
