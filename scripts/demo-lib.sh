# Shared by scripts/demo.sh and scripts/campaign-demo.sh (sourced): strict mode, the qrelkit
# executable (QRELKIT=path/to/qrelkit to use a given one), the protocol file, a fresh output
# folder, and the step headings.
set -euo pipefail
Q=${QRELKIT:-qrelkit}
CFG=configs/trec-dl-2022.toml
fresh_dir() { rm -rf "$1"; mkdir -p "$1"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
