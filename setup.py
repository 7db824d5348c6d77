"""Maps the role folders into the one `udm` import package.

The folders stay named after their role (sdk/, host/, registry/, templates/) while users import
`udm.sdk`, `udm.host`, ...; setuptools' package-dir does the mapping for wheels and editable installs.
"""

from setuptools import find_packages, setup

_ROOTS = {"sdk": "sdk", "host": "host", "registry": "registry", "templates": "templates"}

packages = ["udm"]
package_dir = {"udm": "udm"}
for name, folder in _ROOTS.items():
    package_dir[f"udm.{name}"] = folder
    packages.append(f"udm.{name}")
    packages += [f"udm.{name}.{sub}" for sub in find_packages(where=folder)]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"udm.templates": ["**/*", "**/.*", "**/.*/**/*"], "udm": ["py.typed"]},
    include_package_data=True,
)
