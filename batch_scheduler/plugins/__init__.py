"""The batch scheduler's plugins, one module each, named as in Volcano's conf.

priority, gang, conformance, drf, proportion, capacity (with ``capacity_tree``, its queue
figures), predicates, nodeorder, binpack, overcommit. Each subclasses
:class:`~batch_scheduler.framework.PluginBase`, implements the extension-point Protocols
it needs, and declares its arguments as an :class:`~batch_scheduler.arguments.Arguments`
Struct; :func:`batch_scheduler.registry.default_registry` names them.
"""
