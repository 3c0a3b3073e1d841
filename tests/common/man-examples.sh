#!/bin/bash
# man-examples.sh - every example command in the EXAMPLES section of every
# man page is in the table below, with the exit status the page documents
# (0 unless it says otherwise); the ones that run here are run, in a
# scratch directory per page with the files the page assumes (cluster.json,
# plan.json, ckpt/ ...), and must exit with it.  Those that need Slurm, a
# GPU or an installed tree are not run, but every --option they use must be
# one the program documents (its --help, or hexiscale(8) for the plugin's).
# A new example without a row, or a row no page has any more, fails.
. "$top_srcdir/tests/tap.sh"
B=$top_builddir
export PATH="$B/scheduler:$B/checkpoint:$B/runtime:$B/profiler:$PATH"
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for p in hexiplan hexickpt hexitrain hexiprof; do
	command -v $p >/dev/null || hard "$p not built"
done
W=$(mktemp -d "${TMPDIR:-/tmp}/heximan.XXXXXX") || hard mktemp
trap 'rm -rf "$W"' EXIT
# shellcheck disable=SC2046 # list-pages prints the pages to build, one make target a word
make -s --no-print-directory -C "$B/man" $(make -s --no-print-directory -C "$B/man" list-pages) >/dev/null ||
	hard "man pages did not build"

# PAGE|EXIT|COMMAND: EXIT is the documented status, or "-reason" (not run
# here).  COMMAND is the example exactly as the page prints it (continuation
# lines joined with one space).
TABLE='hexickpt.1|0|hexickpt verify ckpt/
hexickpt.1|0|hexickpt info ckpt/
hexickpt.1|0|hexiplan plan cluster-b.json --model tiny-4l -o plan-b.json
hexickpt.1|0|hexickpt reshard ckpt/ --plan plan-b.json -o ckpt-b/
hexickpt.1|0|hexickpt diff ckpt/ ckpt-b/
hexickpt.1|0|hexickpt export ckpt/ -o model.h5
hexickpt.1|0|h5dump -H model.h5
hexickpt.1|-needs a checkpoint of a built-in model|hexickpt export ckpt/ --format hf --dtype bf16 -o hf-model/
hexickpt.1|-needs a Hugging Face model directory|hexickpt import hf-llama/ -o ckpt-hf/
hexickpt.1|-needs an imported checkpoint and a token file|hexitrain --model ckpt-hf/model.json --resume ckpt-hf/ --data train.tok
hexiplan.1|0|hexiplan plan examples/clusters/paper.json --model llama2-13b --global-batch 64 -o plan.json
hexiplan.1|0|hexiplan simulate plan.json
hexiplan.1|0|hexiplan show plan.json --svg plan.svg
hexiplan.1|0|hexiplan compare examples/clusters/paper.json --model llama2-7b
hexiplan.1|0|hexiplan simulate --cost-model reference --json plan.json
hexiprof.1|0|hexiprof --mode=cpu -o n1.json
hexiprof.1|0|mpirun -np 2 hexiprof --mode=cpu --quick -o prof.json
hexiprof.1|-Slurm|srun --mpi=pmix --ntasks-per-gpu=1 hexiprof -o /shared/profiles/%h.json
hexiscale-ckpt.5|0|h5dump -d '"'"'/slices/layers.0.mlp.w_up@64'"'"' ckpt/step-00000012/rank-00001.h5
hexiscale-cluster.5|-a GPU|hexiprof --gpu -o profiles/$(hostname).json   # on every node
hexiscale-cluster.5|-GPU profiles|hexiplan plan cluster.json --model llama2-13b --profiles profiles/
hexiscale-cluster.5|-developer (libFuzzer)|clang -g -O1 -fsanitize=fuzzer,address,undefined -I../.. -I../../../common -I../../../scheduler ../../../tests/scheduler/fuzz_plan.c -L../../scheduler/.libs -lhexisched -o fuzz_plan_lf
hexiscale-env.7|-Slurm|srun -N3 -n8 --gpus-per-task=1 --hexiscale=auto sh -c '"'"'echo $RANK $HEXISCALE_ROLE p$HEXISCALE_PIPELINE s$HEXISCALE_STAGE tp$HEXISCALE_TP_RANK/$HEXISCALE_TP_SIZE layers $HEXISCALE_LAYER_BEGIN-$HEXISCALE_LAYER_END'"'"'
hexiscale-data.5|-needs token files and a model file|hexitrain --model model.json --data train.tok --val-data train.val.tok --eval-every 100 --steps 1000
hexiscale-plan.5|0|hexiplan validate plan.json && hexiplan show plan.json --svg plan.svg
hexiscale.7|0|hexiplan plan cluster.json --model llama2-13b -o plan.json
hexiscale.7|0|hexiplan compare cluster.json --model llama2-13b
hexiscale.7|-Slurm|sbatch --hexiscale=plan.json job.sh
hexiscale.8|-Slurm|sbatch -N3 -n8 --gpus-per-task=1 --hexiscale=auto --hexiscale-model=llama2-13b --hexiscale-global-batch=128 job.sh
hexiscale.8|-Slurm|srun -N3 -n8 --gpus-per-task=1 --hexiscale=myplan.json ./train
hexiscale.8|-Slurm|srun -N3 -n8 --gpus-per-task=1 --hexiscale=auto --hexiscale-use-all-gpus ./train
hexiscale.8|-Slurm|HEXISCALE_MODE=off srun -n8 ./other-program
hexiscale.8|-Slurm|sbatch --hexiscale=auto -p a800 -n3 --gpus-per-task=1 : -p rtx4090 -n3 --gpus-per-task=1 job.sh
hexitrain.1|0|hexitrain --model tiny-8l --batch 12 --steps 20
hexitrain.1|-needs token files and a model file|hexitrain --model model.json --data train.tok --val-data train.val.tok --eval-every 100 --steps 2000 --lr 3e-3 --warmup 100 --lr-schedule cosine --min-lr 3e-4 --save-every 500 --keep 3 --ckpt-dir ck
hexitrain.1|0|OMPI_MCA_btl=self,tcp mpirun --oversubscribe -np 7 hexitrain --plan plan.json --steps 20 --json
hexitrain.1|-a GPU|hexitrain --backend nccl --dtype bf16 --model tiny-8l --batch 16 --steps 50
hexitrain.1|-Slurm|srun --mpi=pmix --hexiscale=auto hexitrain --steps 1000 --save-every 100 --ckpt-dir ck
libhexisched.3|-an installed tree (install.sh links with pkg-config hexiscale)|cc role.c $(pkg-config --cflags --libs hexiscale) -o role'

# Example commands of a built page: .Dl lines and literal lines of the
# EXAMPLES section whose program is one of ours or a launcher / tool the
# pages use ("$ " prompts dropped, "\e" continuations joined).
examples() {
	awk '/^\.Sh EXAMPLES/{e=1;next} /^\.Sh /{e=0} !e{next}
		/^\.(Bd|Ed|Pp|Pa|Dv|Ql|Ev|Xr|Sx|\\")/{next}
		{ l=$0; sub(/^\.Dl /,"",l); sub(/^\$ /,"",l); sub(/^ +/,"",l)
		  if (cont!="") { l=cont " " l; cont="" }
		  if (l ~ /\\e$/) { sub(/ *\\e$/,"",l); cont=l; next }
		  w=l; while (w ~ /^[A-Za-z_]+=[^ ]* /) sub(/^[A-Za-z_]+=[^ ]* /,"",w)
		  split(w, a, " ")
		  if (a[1] ~ /^(hexiplan|hexickpt|hexitrain|hexiprof|srun|sbatch|salloc|mpirun|h5dump|cc|clang)$/)
			print l }' "$1" | sed 's/\\(mu/x/g; s/\\e/\\/g'
}

pages=$(cd "$B/man" && make -s --no-print-directory list-pages)
found=$W/found
: >"$found"
for p in $pages; do
	examples "$B/man/$p" | sed "s|^|$p\||" >>"$found"
done
rows=$(printf '%s\n' "$TABLE" | awk -F'|' '{print $1 "|" substr($0, length($1 $2) + 3)}')
while IFS= read -r line; do
	printf '%s\n' "$rows" | grep -qxF -- "$line" && pass "in the table: $line" ||
		fail "example without a table row: $line"
done <"$found"
while IFS= read -r line; do
	grep -qxF -- "$line" "$found" || fail "table row no page has: $line"
done <<<"$rows"

# Open MPI and PMIx keep allocations to the end that LeakSanitizer reports
# (a sanitizer build): MPI runs go without leak checks, as in the other MPI
# tests; everything else keeps them.
MPI_ASAN="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"

# Files each page's examples assume.
setup() {
	local d=$W/run/$1
	mkdir -p "$d" && cd "$d" || return 1
	ln -sfn "$top_srcdir/examples" examples
	case $1 in
	hexickpt.1)
		cp "$top_srcdir/examples/clusters/cpu-2x2.json" cluster-b.json
		hexitrain --model tiny-4l --steps 2 --save-every 2 --ckpt-dir ckpt >/dev/null ;;
	hexiscale-ckpt.5)
		"$B/tests/runtime/mkplan" tiny-4l "8/2:2x4" plan.json &&
			ASAN_OPTIONS=$MPI_ASAN mpirun --oversubscribe -np 2 hexitrain \
				--plan plan.json --steps 12 \
				--save-every 12 --ckpt-dir ckpt >/dev/null ;;
	hexiscale-plan.5)
		cp "$top_srcdir/examples/plans/tiny-8l-tp123.json" plan.json ;;
	hexiscale.7)
		cp "$top_srcdir/examples/clusters/paper.json" cluster.json ;;
	hexitrain.1)
		"$B/tests/runtime/mkplan" tiny-8l "8/2:2x3,1x5;4/2:3x8,1x0" plan.json 2>/dev/null ||
			"$B/tests/runtime/mkplan" tiny-8l "8/2:2x3,1x5;4/4:2x4,2x4" plan.json ;;
	esac
}

# Each --long option of one of our programs (up to the next program word
# of the line) must be in that program's --help; --hexiscale* options of
# srun/sbatch/salloc in hexiscale(8).  Slurm's and Open MPI's own options
# are theirs to document.
options_ok() {
	local prog="" w opt bad=""
	for w in $1; do
		case ${w##*/} in
		hexiplan|hexickpt|hexitrain|hexiprof) prog=${w##*/}; continue ;;
		srun|sbatch|salloc) prog=plugin; continue ;;
		mpirun|cc|clang|h5dump|sh) prog=""; continue ;;
		esac
		case $w in --[a-z]*) ;; *) continue ;; esac
		opt=${w%%=*}
		case $prog in
		"") ;;
		plugin) case $opt in --hexiscale*)
			grep -q -- "^\.It Fl -${opt#--}\b" "$B/man/hexiscale.8" ||
				grep -q -- "Fl -${opt#--}" "$B/man/hexiscale.8" || bad="$bad $opt" ;; esac ;;
		*) "$prog" --help 2>&1 | grep -q -- "$opt\b" || bad="$bad $prog:$opt" ;;
		esac
	done
	[ -z "$bad" ] || { echo "# undocumented options:$bad"; return 1; }
}

last=""
while IFS='|' read -r page want cmd; do
	check "$page: options documented: $cmd" options_ok "$cmd"
	case $want in -*) echo "# not run here (needs ${want#-}): $cmd"; continue ;; esac
	if [ "$page" != "$last" ]; then
		setup "$page" </dev/null || { fail "$page: setting up its files"; continue; }
		last=$page
	fi
	case $cmd in h5dump*) command -v h5dump >/dev/null || { echo "# no h5dump"; continue; } ;; esac
	case $cmd in
	*mpirun*) ASAN_OPTIONS=$MPI_ASAN timeout -k 5 300 bash -c "$cmd" >"$W/out" 2>&1 </dev/null ;;
	*) timeout -k 5 300 bash -c "$cmd" >"$W/out" 2>&1 </dev/null ;;
	esac
	st=$?
	expect_eq "$page: '$cmd' exits $want" "$st" "$want"
	[ "$st" = "$want" ] || sed 's/^/#   /' "$W/out" | tail -n 5
done <<<"$TABLE"
# -h/-V on every CLI; --json on the commands that only wrote files.
for p in hexiplan hexickpt hexitrain hexiprof; do
	"$p" -h >/dev/null 2>&1
	expect_eq "$p -h exits 0" "$?" 0
	expect_eq "$p -V prints the version" "$("$p" -V 2>&1 | grep -c "$p (.*) [0-9]")" 1
done
cd "$W/run/hexickpt.1" || hard "no hexickpt.1 run directory"
for c in "export ckpt/ -o j.h5" "reshard ckpt/ --plan plan-b.json -o ckpt-j/"; do
	hexickpt $c --json >j.json 2>j.err
	st=$?
	expect_eq "hexickpt ${c%% *} --json exits 0" "$st" 0
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["command"] == sys.argv[2] and j["output"] and j["step"] == 2, j' \
		j.json "${c%% *}" && pass "hexickpt ${c%% *} --json: one JSON object (command, output, step)" ||
		fail "hexickpt ${c%% *} --json: $(head -c 200 j.json)"
done
cd / || true
done_testing
