"""The query model: what a query is, checked before any event is read.

`spec` is the one pydantic model behind query files and the fluent API (INTERFACES §2); `graph` resolves a
spec's steps into a graph (names, edges, order); `plan` binds it to catalog UDMs (`build_plan`: a query in
any form to its bound plan); `stream_properties` derives what each step's output promises. The engine, the
oracle and every Spark path read the same bound plan; running one is `udm.host.query.runners.make_runner`.
"""
