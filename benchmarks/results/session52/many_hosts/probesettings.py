from focused.settings import *  # noqa: F403

EXTENSIONS = {**EXTENSIONS, "probe.Probe": 900}  # noqa: F405
