"""One colour per memory component, the same on every page: the guides' charts
(``macros/charts.py``) and the calculator's bar (:mod:`calc_view.render`) both name a
component's colour with :func:`component_class`.

The colours themselves are CSS variables, ``--calc-comp-<name>``, set once for Material's
light and dark schemes in ``docs/stylesheets/guides.css`` (loaded on every page); this
module only says which class a component gets, so a component is never coloured by its
position in one chart's list.
"""

from __future__ import annotations

from calc.memory import COMPONENTS

#: What a bar draws above the components: the allocator's reserve over the allocated peak,
#: the CUDA context and buffers up to the device total, and the two together (the guides'
#: charts draw them as one segment, coloured as the reserve).
EXTRAS = ("reserved_extra", "context_extra")
ALIASES = {"reserve_context": "reserved_extra"}

#: Every name that has a colour, in the order a bar stacks them.
NAMES = (*COMPONENTS, *EXTRAS)


def component_class(name: str) -> str:
    """The CSS class that colours ``name`` (a ``calc.memory.COMPONENTS`` entry, one of
    :data:`EXTRAS` or an alias); a component unknown here (added to calc later) gets the
    neutral ``calc-comp-other`` instead of another component's colour."""
    name = ALIASES.get(name, name)
    return "calc-comp-" + (name.replace("_", "-") if name in NAMES else "other")
