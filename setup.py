"""Maps the role folders into the one `udm` import package.

The folders stay named after their role (sdk/, host/, registry/, templates/) while users import
`udm.sdk`, `udm.host`, ...; setuptools' package-dir does the mapping for wheels and editable installs.
"""

from setuptools import find_namespace_packages, find_packages, setup

_ROOTS = {"sdk": "sdk", "host": "host", "registry": "registry", "templates": "templates"}

packages = ["udm"]
package_dir = {"udm": "udm"}
for name, folder in _ROOTS.items():
    package_dir[f"udm.{name}"] = folder
    packages.append(f"udm.{name}")
    if name == "templates":
        # template folders are data, but Python could import those with identifier names: list them as
        # packages (their files ship as package data) so setuptools does not warn that they would be ignored
        subs = [s for s in find_namespace_packages(where=folder) if all(p.isidentifier() for p in s.split("."))]
    else:
        subs = find_packages(where=folder)
    packages += [f"udm.{name}.{sub}" for sub in subs]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"udm.templates": ["**/*", "**/.*", "**/.*/**/*"], "udm": ["py.typed"],
                  "udm.host.spark": ["*.properties"]},
    include_package_data=True,
)
