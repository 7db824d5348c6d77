"""Nexmark-shaped benchmark (issue 13): `gen` writes the streams, `queries` holds the queries udmkit can
express, `udfs` the benchmark's own UDFs, `_child` runs one query in a fresh process, ``python -m
bench.nexmark`` prints the table."""
