#!/bin/bash
# h-kim's torchtitan run on Barcelona (CLUSTER-FACTS.md: the ConfigMap h-kim-training-script clones torchtitan
# into /workspace/torchtitan and runs train.py with llama3_8b.toml under torchrun --max_restarts=3).
# The launcher has checked memory pinning and the RDMA devices, and exported NNODES, NODE_RANK,
# NPROC_PER_NODE, MASTER_ADDR, MASTER_PORT and the NCCL_* settings before it runs this script.
# Do not raise the memlock limit here (`ulimit -l`): the pod pins memory with IPC_LOCK.
set -euo pipefail

repo=/workspace/torchtitan
if [ ! -d "$repo/.git" ]; then
  git clone --depth 1 https://github.com/pytorch/torchtitan "$repo"
fi
cd "$repo"

# torchtitan moved its entry point and configs into the package; accept either layout.
train=train.py
[ -f "$train" ] || train=torchtitan/train.py
config=train_configs/llama3_8b.toml
[ -f "$config" ] || config=torchtitan/models/llama3/train_configs/llama3_8b.toml

exec torchrun \
  --nnodes="$NNODES" --nproc_per_node="$NPROC_PER_NODE" --node_rank="$NODE_RANK" \
  --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" --max_restarts=3 \
  "$train" --job.config_file "$config"
