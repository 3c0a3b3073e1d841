#!/bin/sh
# gen-mixed.sh NGPUS [GPUS_PER_NODE] [INTER_BW_GBPS] > cluster.json
# A large mixed cluster for planner benchmarks: NGPUS GPUs, GPUS_PER_NODE
# (default 8) a node, node k gets the k-th of 4 types in turn (a100-80g,
# rtx4090, rtx3090, l40s), nodes named node0000...; the same rule as
# hexi_cluster_synthetic() with those four types.
set -eu
n=${1:?usage: gen-mixed.sh NGPUS [GPUS_PER_NODE] [INTER_BW_GBPS]}
per=${2:-8}
bw=${3:-10}
awk -v n="$n" -v per="$per" -v bw="$bw" 'BEGIN {
	split("a100-80g rtx4090 rtx3090 l40s", t, " ");
	nodes = int((n + per - 1) / per);
	printf "{\n  \"format\": \"hexiscale-cluster\",\n  \"version\": 1,\n  \"nodes\": [\n";
	for (i = 0; i < nodes; i++) {
		k = n - i * per; if (k > per) k = per;
		printf "    {\"name\": \"node%04d\", \"gpu\": \"%s\", \"count\": %d}%s\n",
			i, t[i % 4 + 1], k, (i + 1 < nodes) ? "," : "";
	}
	printf "  ],\n  \"inter_bw_gbps\": %s\n}\n", bw;
}'
