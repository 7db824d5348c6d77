"""Query model: spec (file/fluent API) and binding to catalog UDMs."""
