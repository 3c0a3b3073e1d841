#!/bin/bash
# demo.sh - README's main-job command: install what is needed, build, and
# show HexiScale end to end on this machine.  Safe to run twice.
set -u
HEXI_SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$HEXI_SRC/tests/deps.sh"

hexi_install_deps || { echo "dependency install failed"; exit 1; }
hexi_build "$HEXI_SRC/build" --enable-werror || exit 1
B=$HEXI_SRC/build

if [ -x "$HEXI_SRC/examples/workflow.sh" ]; then
	exec bash "$HEXI_SRC/examples/workflow.sh" "$B"
fi
echo "== the paper's case-study cluster"
cat "$HEXI_SRC/examples/clusters/paper.json"
echo "== hexiplan plan (llama2-13b)"
"$B/scheduler/hexiplan" plan "$HEXI_SRC/examples/clusters/paper.json" \
	--model llama2-13b -o "$B/paper-plan.json" && \
	"$B/scheduler/hexiplan" show "$B/paper-plan.json"
