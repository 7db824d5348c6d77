"""udm.registry — the UDM marketplace: a static PEP 503 index plus a catalog of manifests.

A registry is a directory (or the same tree served over http(s)):

    simple/            PEP 503 index; links carry #sha256= fragments
    files/             the published wheels
    catalog.json       every release and the manifests of its UDMs (search/info read only this)
    index.html         a static catalog page to browse and filter

`publish` builds, validates and contract-checks before writing anything; `install` refuses a release
whose host API range excludes this host before pip runs, and pins the artifact's hash.
"""

from ._errors import RegistryError
from ._install import InstallPlan, install, plan_install
from ._location import ENV_VAR, Location, default_registry_dir, resolve_location
from ._publish import PublishResult, publish
from ._query import UdmHit, info, search
from ._records import RegistryCatalog, Release, UdmRecord
from ._store import read_catalog

__all__ = [
    "ENV_VAR",
    "InstallPlan",
    "Location",
    "PublishResult",
    "RegistryCatalog",
    "RegistryError",
    "Release",
    "UdmHit",
    "UdmRecord",
    "default_registry_dir",
    "info",
    "install",
    "plan_install",
    "publish",
    "read_catalog",
    "resolve_location",
    "search",
]
