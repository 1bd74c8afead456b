"""The `robotmem` command line."""
