"""The in-pod launcher: the program ships launcher.py verbatim in a ConfigMap and every training
container starts through it (`python3 -I /opt/launcher/launcher.py`: isolated, out of reach of the
user's PYTHON* variables). The file is plain standard-library Python so that it runs in any PyTorch
image; it knows nothing of Pulumi. Read the source from
LAUNCHER_PATH so that the ConfigMap holds exactly the tested file, not a copy."""

import pathlib

LAUNCHER_PATH = pathlib.Path(__file__).with_name("launcher.py")
