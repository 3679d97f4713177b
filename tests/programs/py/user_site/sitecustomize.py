"""A program's own sitecustomize: it must still run under torchprof-run."""

import os

os.environ["TP_USER_SITECUSTOMIZE_RAN"] = "yes"
