#!/usr/bin/env bash
# vdr batch job: ingest a corpus, embed it with one or more ColPali-family models under torchrun,
# and evaluate the original queries against several rewrite variants. One folder per job:
#
#   $OUT_ROOT/<job id>/logs/{ingest,embed.<model>,evaluate.<model>}.log
#   $OUT_ROOT/<job id>/<model>/embed.json                 vdr embed report (pages/s, tokens/page, ...)
#   $OUT_ROOT/<job id>/<model>/results/                   results.json, per_query.csv, runs/
#   $OUT_ROOT/<job id>/job.env                            the settings this job ran with
#
# The job id is $SLURM_JOB_ID under SLURM, else a timestamp (or JOB_ID=...). The corpus
# ($OUT_ROOT/corpus unless CORPUS is given) and the embedding store ($OUT_ROOT/store unless STORE is
# given) are shared between jobs: re-ingesting skips unchanged PDFs and the store reuses every
# vector whose model, settings and page content are unchanged (an interrupted job resumes).
#
# Usage (every setting is an environment variable):
#
#   PDFS=/data/pdfs QUERIES=q.jsonl QRELS=qrels.tsv \
#   REWRITES="keywords=rw-kw.jsonl conversational=rw-conv.jsonl" \
#   MODELS="/models/colqwen2.5-v0.2 /models/colpali-v1.3" \
#   bash scripts/vdr_batch.sh
#
#   sbatch scripts/vdr_batch.sh            # with the #SBATCH lines below uncommented
#   DRY_RUN=1 bash scripts/vdr_batch.sh    # print the commands, run nothing
#
# Settings:
#   PDFS            folder of PDFs to ingest (or VIDORE=dataset name / local copy, or an ingested CORPUS)
#   CORPUS          an ingested corpus folder (default $OUT_ROOT/corpus, ingested from PDFS/VIDORE)
#   QUERIES, QRELS  original queries (BEIR queries.jsonl) and qrels (default: the corpus' own, ViDoRe)
#   REWRITES        space-separated NAME=FILE rewrite variants
#   MODELS          space-separated hub names or local checkpoint folders (none: text backends only)
#   BACKENDS        default multimodal,lexical,hybrid
#   K, DEPTH, SEED, BATCH_SIZE   passed to vdr (defaults 3,5,10 / 100 / 0 / 8)
#   NPROC_PER_NODE  processes per node (default: number of GPUs, 1 without any)
#   NNODES          nodes (default $SLURM_JOB_NUM_NODES or 1); more than one uses srun + torchrun's
#                   c10d rendezvous on the first node, port RDZV_PORT (default 29500)
#   OUT_ROOT        default ./vdr-jobs
#   PYTHON          default python; TORCHRUN default "$PYTHON -m torch.distributed.run"
#   DRY_RUN=1       echo the commands instead of running them
#
# ---- SLURM (uncomment by removing one '#' from each line) -----------------------------------
##SBATCH --job-name=vdr-eval
##SBATCH --nodes=1
##SBATCH --ntasks-per-node=1
##SBATCH --gpus-per-node=4
##SBATCH --cpus-per-task=32
##SBATCH --mem=256G
##SBATCH --time=04:00:00
##SBATCH --output=vdr-%j.out
# ----------------------------------------------------------------------------------------------

set -euo pipefail

PYTHON=${PYTHON:-python}
TORCHRUN=${TORCHRUN:-"$PYTHON -m torch.distributed.run"}
OUT_ROOT=${OUT_ROOT:-./vdr-jobs}
JOB_ID=${JOB_ID:-${SLURM_JOB_ID:-$(date +%Y%m%d-%H%M%S)}}
JOB_DIR="$OUT_ROOT/$JOB_ID"
CORPUS=${CORPUS:-$OUT_ROOT/corpus}
STORE=${STORE:-$OUT_ROOT/store}
BACKENDS=${BACKENDS:-multimodal,lexical,hybrid}
K=${K:-3,5,10}
DEPTH=${DEPTH:-100}
SEED=${SEED:-0}
BATCH_SIZE=${BATCH_SIZE:-8}
MODELS=${MODELS:-}
REWRITES=${REWRITES:-}
DRY_RUN=${DRY_RUN:-0}
if [[ -z "${NPROC_PER_NODE:-}" ]]; then
    NPROC_PER_NODE=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    [[ "$NPROC_PER_NODE" -ge 1 ]] 2>/dev/null || NPROC_PER_NODE=1
fi
NNODES=${NNODES:-${SLURM_JOB_NUM_NODES:-1}}
RDZV_PORT=${RDZV_PORT:-29500}

# The launcher: torchrun on one node; srun + torchrun (c10d rendezvous on the first node) on several.
if [[ "$NNODES" -gt 1 ]]; then
    # the first host name, read without a pipe into `head` (under pipefail, head exiting early can kill
    # scontrol with SIGPIPE and fail the job with status 141)
    HOSTS=$(scontrol show hostnames "${SLURM_JOB_NODELIST:?multi-node runs need SLURM}")
    HEAD=${HOSTS%%$'\n'*}
    [[ -n "$HEAD" ]] || { echo "scontrol gave no host name for $SLURM_JOB_NODELIST" >&2; exit 1; }
    LAUNCH=(srun --nodes "$NNODES" --ntasks-per-node 1 $TORCHRUN --nnodes "$NNODES" --nproc_per_node "$NPROC_PER_NODE"
            --rdzv_id "$JOB_ID" --rdzv_backend c10d --rdzv_endpoint "$HEAD:$RDZV_PORT")
else
    LAUNCH=($TORCHRUN --standalone --nnodes 1 --nproc_per_node "$NPROC_PER_NODE")
fi

# run LOG CMD...: print the command; unless DRY_RUN=1, run it with its output appended to LOG (and shown)
run() {
    local log=$1
    shift
    local arg
    printf '+'
    for arg in "$@"; do
        if [[ "$arg" =~ ^[A-Za-z0-9_./=:,@%+-]+$ ]]; then printf ' %s' "$arg"; else printf ' %q' "$arg"; fi
    done
    printf '\n'
    if [[ "$DRY_RUN" == 1 ]]; then
        return 0
    fi
    echo "# $(date -Is) $*" >>"$log"
    "$@" 2>&1 | tee -a "$log"
}

tag_of() {  # a file-name-safe tag for a model name or path
    local m=${1%/}
    m=${m##*/}
    echo "${m//[^A-Za-z0-9_.-]/_}"
}

if [[ "$DRY_RUN" != 1 ]]; then
    mkdir -p "$JOB_DIR/logs"
    {
        echo "JOB_ID=$JOB_ID"; echo "CORPUS=$CORPUS"; echo "STORE=$STORE"; echo "MODELS=$MODELS"
        echo "REWRITES=$REWRITES"; echo "BACKENDS=$BACKENDS"; echo "NNODES=$NNODES"; echo "NPROC_PER_NODE=$NPROC_PER_NODE"
        echo "HOST=$(hostname)"; echo "GIT=$(git -C "$(dirname "$0")" rev-parse HEAD 2>/dev/null || echo unknown)"
    } >"$JOB_DIR/job.env"
fi
echo "vdr job $JOB_ID: $NNODES node(s) x $NPROC_PER_NODE process(es) -> $JOB_DIR"

# 1. ingest (one process; vdr ingest has its own worker pool and skips unchanged PDFs)
if [[ -n "${PDFS:-}" ]]; then
    run "$JOB_DIR/logs/ingest.log" $PYTHON -m vdr ingest "$PDFS" --out "$CORPUS" --quiet
elif [[ -n "${VIDORE:-}" ]]; then
    run "$JOB_DIR/logs/ingest.log" $PYTHON -m vdr ingest --vidore "$VIDORE" --out "$CORPUS" --quiet
fi

QUERY_ARGS=()
[[ -n "${QUERIES:-}" ]] && QUERY_ARGS+=(--queries "$QUERIES")
[[ -n "${QRELS:-}" ]] && QUERY_ARGS+=(--qrels "$QRELS")
for rw in $REWRITES; do
    QUERY_ARGS+=(--rewrites "$rw")
done
EVAL_ARGS=(--backend "$BACKENDS" --k "$K" --depth "$DEPTH" --seed "$SEED" --batch-size "$BATCH_SIZE" --store "$STORE" --quiet)

# 2. embed + 3. evaluate, per model (all ranks of torchrun; rank 0 writes the outputs)
if [[ -z "$MODELS" ]]; then
    run "$JOB_DIR/logs/evaluate.log" "${LAUNCH[@]}" -m vdr evaluate "$CORPUS" "${QUERY_ARGS[@]}" "${EVAL_ARGS[@]}" \
        --out "$JOB_DIR/text-only/results"
fi
for model in $MODELS; do
    tag=$(tag_of "$model")
    [[ "$DRY_RUN" == 1 ]] || mkdir -p "$JOB_DIR/$tag"
    run "$JOB_DIR/logs/embed.$tag.log" "${LAUNCH[@]}" -m vdr embed "$CORPUS" --model "$model" --store "$STORE" \
        --batch-size "$BATCH_SIZE" --quiet --json "$JOB_DIR/$tag/embed.json"
    run "$JOB_DIR/logs/evaluate.$tag.log" "${LAUNCH[@]}" -m vdr evaluate "$CORPUS" "${QUERY_ARGS[@]}" "${EVAL_ARGS[@]}" \
        --model "$model" --out "$JOB_DIR/$tag/results"
done
echo "done: $JOB_DIR"
