"""The caldera command line: audit, bench, demo, dry-run, status, and the subcommands that start each process."""
