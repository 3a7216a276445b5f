"""One module per HTTP resource of SPEC section 7 (cql, streams, relations, queries, entities, system,
metrics, openapi, index); ``web/routes.py`` wires them to paths."""
