"""The temporal operators of query graphs (SEMANTICS §10), one module each.

Each is a `udm.host.engine.operator.Operator`: elements in per input port, elements and CTIs out, picklable state.
"""
