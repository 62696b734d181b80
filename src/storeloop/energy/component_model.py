"""The one adapter from storeloop's plug-in contract (:mod:`storeloop.energy.contract`) to
hwcomponents' ``ComponentModel``: a plug-in writes its estimate once, and
:func:`component_model` makes the hwcomponents model of it, so that Accelergy-style tools
(``hwcomponents.get_models``) price a component with the same numbers storeloop does.

hwcomponents reads a model's parameters from its ``__init__``'s code (names and defaults) and
its actions from its ``@action`` methods; the class made here has both, taken from the
plug-in's ``params`` function and action names."""

from __future__ import annotations

import inspect
from typing import Callable, Sequence

from hwcomponents import ActionCost, ComponentModel, action

PJ, UM2 = 1e-12, 1e-12          # pJ -> J, µm² -> m²


def component_model(plugin, cls: str, names: Sequence[str], params: Callable[..., dict], actions: Sequence[str],
                    timing: Callable[[dict], dict[str, tuple[float, float]]] | None = None,
                    priority: float = 0.9, doc: str = "", class_name: str = "") -> type[ComponentModel]:
    """An hwcomponents model class of ``plugin``'s component class ``cls``.

    ``names``: the component names hwcomponents matches (``"Disk"``). ``params``: a function whose
    parameters (names and defaults) are the model's, returning the storeloop attributes to estimate
    with (``tech_node`` -> ``technology``...). ``actions``: the estimate's actions the model has.
    ``timing(attributes)``: per action, (latency in s, actions per s); by default (0, inf).
    ``class_name``: the class's name (default: the first name + ``Model``)."""
    sig = inspect.signature(params)
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values()):
        raise TypeError(f"{params.__name__}: a model's parameters are plain named ones (no *, *args or **kwargs)")
    names_ = list(sig.parameters)

    def setup(self, *values) -> None:
        attrs = params(*values)
        self._estimate = plugin.estimate(cls, attrs)
        self._timing = timing(attrs) if timing else {}
        ComponentModel.__init__(self, leak_power=self._estimate.leak_W, area=self._estimate.area_um2 * UM2)

    # hwcomponents reads __init__.__code__ (co_varnames, __defaults__): a real function with these names
    scope = {"_setup": setup}
    exec(f"def __init__(self, {', '.join(names_)}):\n    _setup(self, {', '.join(names_)})", scope)
    init = scope["__init__"]
    init.__defaults__ = tuple(p.default for p in sig.parameters.values() if p.default is not p.empty) or None

    def make_action(name: str):
        def act(self) -> ActionCost:
            latency, rate = self._timing.get(name, (0.0, float("inf")))
            return ActionCost(energy=self._estimate.actions[name] * PJ, latency=latency, throughput=rate)
        act.__name__ = act.__qualname__ = name
        act.__doc__ = f"One {name} of a {names[0]} (energy from the {plugin.name} plug-in)."
        return action(act)

    body = {"component_name": list(names), "priority": priority, "__init__": init,
            "__doc__": doc or f"hwcomponents model of a {names[0]}, priced by the {plugin.name} plug-in.",
            "__module__": type(plugin).__module__, **{a: make_action(a) for a in actions}}
    return type(class_name or f"{names[0]}Model", (ComponentModel,), body)
