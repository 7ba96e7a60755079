# Sourced by the GPU scripts: run each part under its own time limit within a budget for the
# whole call (device time is scarce), everything appended to $LOG.
#   step NAME LIMIT_S command...
START=${START:-$(date +%s)}
BUDGET_S=${BUDGET_S:-400}

step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET_S - ($(date +%s) - START)))
    if ((left < 15)); then echo "=== SKIP $name (budget)" | tee -a "$LOG"; return; fi
    ((limit > left)) && limit=$left
    echo "=== $name (limit ${limit}s, t=$(($(date +%s) - START))s)" | tee -a "$LOG"
    timeout "$limit" "$@" 2>&1 | grep -v -e "Warning" -e "warnings.warn" -e "^Loading" | tee -a "$LOG"
    echo "=== $name rc=${PIPESTATUS[0]} t=$(($(date +%s) - START))s" | tee -a "$LOG"
}
