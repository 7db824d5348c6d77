"""udm.host — the framework between UDM writers and query writers."""

__all__: list[str] = []
