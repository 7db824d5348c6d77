"""udmkit: user-defined modules over temporal event streams.

`udm.sdk` is what a UDM writer imports; `udm.host` is the framework (discovery, catalog, engines, CLI);
`udm.registry` is the marketplace. This top-level package stays empty so that importing `udm.sdk`
pulls in nothing heavier than pydantic.
"""

__version__ = "0.1.0"
