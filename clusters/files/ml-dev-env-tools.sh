#!/bin/bash
# Cairo's ml-dev-env development pod (CLUSTER-FACTS.md: code-server on 8080, Jupyter on 8888, TensorBoard
# on 6006, debugpy on 5678). Starts each tool the image has, in the background, then keeps the pod up for
# `oc exec` sessions. The Routes reach rank 0's pod; code-server asks for the password in
# ~/.config/code-server/config.yaml, Jupyter for the token it logs (`oc logs ml-dev-env-0 | grep token`).
# TensorBoard has no authentication of its own: it has no Route (`oc port-forward ml-dev-env-0 6006`).
set -u
cd /workspace 2>/dev/null || cd /
mkdir -p /workspace/.logs 2>/dev/null || true
log=/workspace/.logs
if command -v code-server >/dev/null; then
  code-server --bind-addr 0.0.0.0:8080 /workspace >"$log/code-server.log" 2>&1 &
fi
if command -v jupyter >/dev/null; then
  jupyter lab --ip 0.0.0.0 --port 8888 --no-browser --allow-root --ServerApp.root_dir=/workspace >"$log/jupyter.log" 2>&1 &
fi
if command -v tensorboard >/dev/null; then
  tensorboard --logdir /workspace/runs --host 0.0.0.0 --port 6006 >"$log/tensorboard.log" 2>&1 &
fi
# debugpy (5678) is started by the user with the program to debug: python -m debugpy --listen 0.0.0.0:5678 ...
exec sleep infinity
