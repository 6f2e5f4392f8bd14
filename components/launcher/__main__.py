"""`python3 -I /opt/launcher`, the pod's command: the ConfigMap's keys are flat, so the modules beside this file are
made the package `launcher` here, and import one another relatively, as they do as components.launcher."""

import importlib
import os
import sys
import types

if __name__ == "__main__":
    folder = types.ModuleType("launcher")
    folder.__path__ = [os.path.dirname(os.path.abspath(__file__))]
    sys.modules["launcher"] = folder
    sys.exit(importlib.import_module("launcher.launch").main())
