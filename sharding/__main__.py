import sys

from sharding.main import main

sys.exit(main(prog="python -m sharding"))
