"""The in-pod launcher: the program ships launcher.py verbatim in a ConfigMap and every training
container starts through it (`python3 -I /opt/launcher/launcher.py`: isolated, out of reach of the
user's PYTHON* variables). The file is plain standard-library Python so that it runs in any PyTorch
image; it knows nothing of Pulumi. Read the source from
LAUNCHER_PATH so that the ConfigMap holds exactly the tested file, not a copy.

Why launcher.py is one file of 2.4k lines: it is copied into an arbitrary PyTorch image and run with
`python3 -I`, standard library only, with no package to install (and -I leaves the script's own folder off
sys.path, so a second module beside it could not even be imported). One file is what the ConfigMap carries
(training.launcher_files: every module here but this one, verbatim) and what the tests run, so the file the
tests pass is the file the pod runs; any edit of it changes the rendered stacks' ConfigMaps. bandwidth.py
beside it, the bandwidth check's benchmark, is a separate program shipped the same way (the launcher execs it).

Map of launcher.py. Its module docstring is the environment contract (every LAUNCHER_* variable), then come
the exit codes, limits and patterns; then its sections, in order, as their `# ----` banners name them:

  Configuration: the contract parsed and checked, every problem at once (`load_config` -> `Config`, `environment_problems`)
  Facts: all the reading of sysfs, /proc and the kernel, and the mlock proof (`gather_facts` -> `Facts`, `prove_pinning`)
  Decisions: pure functions of Config and Facts: memlock, devices, network, NCCL, argv (`decide` -> `Plan`, `decide_nccl`)
  Output and the thin main: the report, the files an `oc exec` session reads, then exec (`render_report`, `run`, `main`)

tests/launcher/test_launcher_map.py holds this map to the banners and the functions it names to their sections.
"""

import pathlib

LAUNCHER_PATH = pathlib.Path(__file__).with_name("launcher.py")
