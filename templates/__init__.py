"""udm.templates — the `udm new` project template (jinja2) and the registry's HTML templates.

The template files live next to this module and ship as package data; `render_project` turns a
validated `ProjectOptions` into a pip-installable plugin project.
"""

from ._options import KINDS, NewProjectError, ProjectOptions
from ._render import TEMPLATE_VERSION, render_project, template_context

__all__ = ["KINDS", "TEMPLATE_VERSION", "NewProjectError", "ProjectOptions", "render_project", "template_context"]
