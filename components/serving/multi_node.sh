#!/bin/sh
# One pod of a multi-node vLLM replica (a LeaderWorkerSet group). Usage:
#   multi_node.sh leader <vllm serve arguments...>   start the Ray head, wait for every worker, serve
#   multi_node.sh worker                             join the Ray cluster of the leader and block
# LeaderWorkerSet sets LWS_GROUP_SIZE (pods in the group) and LWS_LEADER_ADDRESS (the stable DNS
# name of the leader) in every pod of the group. The helper ships in the vLLM image (vllm-project/vllm,
# examples/online_serving/multi-node-serving.sh): `leader` starts the Ray head and returns once the
# cluster has LWS_GROUP_SIZE nodes (it gives up after 300 s, and this pod exits, so LeaderWorkerSet
# recreates the group); `worker` retries joining the head until it answers, then blocks.
set -eu
helper=/vllm-workspace/examples/online_serving/multi-node-serving.sh
role="${1:-}"
[ "$#" -gt 0 ] && shift
case "$role" in
  leader)
    bash "$helper" leader --ray_cluster_size="$LWS_GROUP_SIZE"
    exec vllm serve "$@"
    ;;
  worker)
    exec bash "$helper" worker --ray_address="$LWS_LEADER_ADDRESS"
    ;;
  *)
    echo "multi_node.sh: the first argument must be leader or worker, got '$role'" >&2
    exit 2
    ;;
esac
