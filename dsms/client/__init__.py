"""The dsms client: ``dsms shell`` (an interactive CQL prompt) and ``dsms run FILE.cql`` against a running
server, over the HTTP API only (docs/shell.md). It imports nothing of the engine: what it knows of CQL is where
a statement ends (``statements.py``) and the words it offers to complete."""
