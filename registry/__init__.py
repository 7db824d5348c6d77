"""udm.registry — the UDM marketplace: a static PEP 503 index plus a catalog of manifests.

A registry is a directory (or the same tree served over http(s)):

    simple/            PEP 503 index; links carry #sha256= fragments
    files/             the published wheels
    catalog.json       every release and the manifests of its UDMs (search/info read only this)
    index.html         the catalog site: every UDM, filterable by kind, property and text
    udm/NAME.html      one page per UDM: manifest, parameters, docs, versions, install line, query snippet
    static/            the site's stylesheet and its one small script

`publish` builds, validates and contract-checks before writing anything; `install` refuses a release
whose host API range excludes this host before pip runs, and pins the artifact's hash. `make_server`
previews a registry directory (site and index) on 127.0.0.1.
"""

from ._errors import RegistryError
from ._install import InstallPlan, install, plan_install
from ._location import ENV_VAR, Location, default_registry_dir, resolve_location
from ._publish import PublishResult, publish
from ._query import UdmHit, info, search
from ._records import RegistryCatalog, Release, UdmRecord
from ._serve import make_server, refresh_site
from ._site import SiteBuild
from ._site_model import kind_label
from ._store import read_catalog

__all__ = [
    "ENV_VAR",
    "InstallPlan",
    "Location",
    "PublishResult",
    "RegistryCatalog",
    "RegistryError",
    "Release",
    "SiteBuild",
    "UdmHit",
    "UdmRecord",
    "default_registry_dir",
    "info",
    "install",
    "kind_label",
    "make_server",
    "plan_install",
    "publish",
    "read_catalog",
    "refresh_site",
    "resolve_location",
    "search",
]
