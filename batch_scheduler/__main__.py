"""``python -m batch_scheduler``."""

import sys

from batch_scheduler.main import main

sys.exit(main(prog="python -m batch_scheduler"))
