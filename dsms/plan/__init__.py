"""Query plans: the binder (ast -> logical plan), the logical nodes, and the physical planner (logical ->
operators, queues and synopses, with sharing)."""
