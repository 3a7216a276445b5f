"""Physical operators: each reads batches from its input queues and writes one output queue
(digest-004 R-PLAN-03)."""
