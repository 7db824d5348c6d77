"""UDMs for the conformance-kit tests: each broken in exactly one way a contract check must catch."""
