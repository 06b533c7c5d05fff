#!/usr/bin/env bash
# Prints, as shell assignments, the names and addresses a node in RUN_DIR gets, all derived from
# the absolute path of RUN_DIR (which must exist), so that two nodes on one machine never share
# them and controlplane/up.sh --node can make the node's address before the node starts:
#
#   node/net.sh RUN_DIR
#   NODE_ID=1a2b3c4d  CGROUP_ROOT=/vl-node-1a2b3c4d  CNI_BRIDGE=vl1a2b3c4d
#   POD_SUBNET=10.154.43.0/24  NODE_IP=10.154.43.1
#
# The node's address is the gateway address of its own pod bridge: the kubelet refuses a loopback
# node IP ("failed to validate nodeIP: nodeIP can't be loopback address"), and an address on a
# bridge of this machine's own exists here only.
set -euo pipefail
run=${1:?usage: node/net.sh RUN_DIR}
run=$(cd "$run" && pwd)
id=$(printf '%s' "$run" | sha256sum | cut -c1-8)
net="10.$((16#${id:0:2} % 64 + 128)).$((16#${id:2:2}))"
cat <<EOF
NODE_ID=$id
CGROUP_ROOT=/vl-node-$id
CNI_BRIDGE=vl$id
POD_SUBNET=$net.0/24
NODE_IP=$net.1
EOF
