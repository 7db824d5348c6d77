"""Plugin projects the marketplace tests publish: written here, built and contract-checked by `publish` like any
third party's, and installed nowhere else (so installing one from a registry really installs it).

- ``udm-basket-stats``: ``basket_total`` and ``basket_count`` (incremental, algebraic UDAs), ``basket_median``
  (a holistic UDA) and ``basket_big`` (a UDF with a parameter).
- ``udm-basket-ops``: ``basket_top`` (a UDO) and ``basket_twa`` (a time-sensitive UDA).
- ``udm-hostile``: one UDA whose summary, docs, parameter description, distribution summary and README are
  script tags and HTML.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["ALGEBRAIC_UDAS", "HOSTILE_SNIPPETS", "OPS", "STATS", "hostile_source", "write_plugin"]

STATS = '''
from fractions import Fraction
from statistics import median

from pydantic import BaseModel, Field

from udm.sdk import UDA, UDF, IncrementalUDA, hookimpl, udm


@udm(name="basket_total", version="{version}", algebraic=True, input_type="float", output_type="float")
class BasketTotal(IncrementalUDA):
    """Total amount of the baskets in the window.

    Kept as an exact fraction, so adding and removing baskets never drifts.
    """

    def initial_state(self):
        return Fraction(0)

    def add(self, state, delta):
        return state + sum(Fraction(v) for v in delta)

    def remove(self, state, delta):
        return state - sum(Fraction(v) for v in delta)

    def merge(self, a, b):
        return a + b

    def compute(self, state):
        return float(state)


@udm(name="basket_count", version="{version}", algebraic=True, input_type="any", output_type="int")
class BasketCount(IncrementalUDA):
    """Number of baskets in the window."""

    def initial_state(self):
        return 0

    def add(self, state, delta):
        return state + len(delta)

    def remove(self, state, delta):
        return state - len(delta)

    def merge(self, a, b):
        return a + b

    def compute(self, state):
        return state


@udm(name="basket_median", version="{version}", input_type="float", output_type="float")
class BasketMedian(UDA):
    """Median basket amount (the mean of the two middle ones for an even count)."""

    def compute(self, payloads):
        return float(median(payloads)) if payloads else None


class BigParams(BaseModel):
    threshold: float = Field(100.0, description="smallest amount that counts as big")


@udm(name="basket_big", version="{version}", params=BigParams, input_type="float", output_type="bool")
class BasketBig(UDF):
    """True for a basket of at least ``threshold``."""

    def compute(self, amount):
        return isinstance(amount, (int, float)) and amount >= self.params.threshold


@hookimpl
def register_udms(register):
    for cls in (BasketTotal, BasketCount, BasketMedian, BasketBig):
        register(cls)
'''

OPS = '''
from pydantic import BaseModel, Field

from udm.sdk import UDO, TimeSensitiveUDA, hookimpl, udm


class TopParams(BaseModel):
    by: str = Field("amount", description="numeric field to rank by")


@udm(name="basket_top", version="{version}", params=TopParams, input_type="payload", output_type="payload")
class BasketTop(UDO):
    """The window's largest basket by ``by``."""

    def compute(self, payloads):
        rows = [p for p in payloads if isinstance(p, dict) and isinstance(p.get(self.params.by), (int, float))]
        if not rows:
            return []
        return [max(rows, key=lambda p: (p[self.params.by], sorted(p.items(), key=str)))]


@udm(name="basket_twa", version="{version}", input_type="float", output_type="float")
class BasketTwa(TimeSensitiveUDA):
    """Time-weighted average amount over the window."""

    def compute(self, events, window):
        total = sum(e.payload * (e.re - e.le) for e in events if isinstance(e.payload, (int, float)))
        return total / (window.re - window.le)


@hookimpl
def register_udms(register):
    register(BasketTop)
    register(BasketTwa)
'''

#: every string a publisher controls, each trying to run script or add an element in a reader's browser
HOSTILE_SNIPPETS = {
    "summary": '<script>window.__pwned = "summary"</script><b id="pwned-summary">bold</b>',
    "docs": '<img id="pwned-docs" src="x" onerror="window.__pwned = \'docs\'"> [click](javascript:window.__pwned=1)',
    "param": '<script>window.__pwned = "param"</script><iframe id="pwned-param"></iframe>',
    "dist": '<script>window.__pwned = "dist"</script>',
    "readme": '<script>window.__pwned = "readme"</script><div id="pwned-readme">x</div>',
}

HOSTILE = '''
from pydantic import BaseModel, Field

from udm.sdk import UDA, hookimpl, udm


class HostileParams(BaseModel):
    scale: float = Field(1.0, description={param!r})


@udm(name="hostile_sum", version="{version}", params=HostileParams, input_type="float", output_type="float",
     summary={summary!r})
class HostileSum(UDA):
    """Ignored first line: the decorator's summary wins.

    {docs}
    """

    def compute(self, payloads):
        return sum(p for p in payloads if isinstance(p, (int, float))) * self.params.scale


@hookimpl
def register_udms(register):
    register(HostileSum)
'''

ALGEBRAIC_UDAS = {"basket_total", "basket_count"}


def write_plugin(where: Path, distribution: str, source: str, *, version: str = "0.1.0",
                 summary: str = "UDMs for shop baskets.", readme: str = "") -> Path:
    """A pip-installable project ``where/distribution`` whose package ``udm_<...>`` holds ``source``."""
    package = distribution.replace("-", "_")
    root = where / f"{distribution}-{version}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text(textwrap.dedent(source).replace("{version}", version))
    readme_lines = f'readme = {{text = {readme!r}, content-type = "text/markdown"}}\n' if readme else ""
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{distribution}"\nversion = "{version}"\ndescription = {summary!r}\n{readme_lines}'
        'requires-python = ">=3.11"\ndependencies = ["udmkit"]\n\n'
        f'[project.entry-points.udm]\n{package} = "{package}"\n\n'
        f'[tool.setuptools]\npackages = ["{package}"]\n')
    return root


def hostile_source(version: str = "0.1.0") -> str:
    s = HOSTILE_SNIPPETS
    return (HOSTILE.replace("{param!r}", repr(s["param"])).replace("{summary!r}", repr(s["summary"]))
            .replace("{docs}", s["docs"]).replace("{version}", version))
