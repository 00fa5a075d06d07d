import sys

from agent_scheduler.main import main

sys.exit(main(prog="python -m agent_scheduler"))
