"""The caldera command line: audit, bench, demo, and the subcommands that start each process."""
