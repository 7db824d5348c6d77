"""The `udm` command line (typer + rich)."""
