"""The URL table of the HTTP API (SPEC section 7); ``web/openapi.py`` describes the same routes."""

from __future__ import annotations

from aiohttp import web

from web.handlers import (
    attributes,
    cql,
    entities,
    gui,
    index,
    metrics,
    openapi,
    queries,
    relations,
    replays,
    stats,
    streams,
    system,
)

ROUTES: list[tuple[str, str, object]] = [
    ("GET", "/", index.index),
    ("POST", "/cql", cql.post_cql),
    ("GET", "/streams", streams.list_streams),
    ("POST", "/streams", streams.create_stream),
    ("GET", "/streams/{name}", streams.get_stream),
    ("DELETE", "/streams/{name}", streams.delete_stream),
    ("POST", "/streams/{name}/elements", streams.post_elements),
    ("GET", "/relations", relations.list_relations),
    ("POST", "/relations", relations.create_relation),
    ("GET", "/relations/{name}", relations.get_relation),
    ("DELETE", "/relations/{name}", relations.delete_relation),
    ("POST", "/relations/{name}/updates", relations.post_updates),
    ("GET", "/queries", queries.list_queries),
    ("POST", "/queries", queries.create_query),
    ("GET", "/queries/{id}", queries.get_query),
    ("PATCH", "/queries/{id}", queries.patch_query),
    ("DELETE", "/queries/{id}", queries.delete_query),
    ("GET", "/queries/{id}/results", queries.get_results),
    ("GET", "/queries/{id}/plan", queries.get_plan),
    ("GET", "/replays", replays.list_replays),
    ("POST", "/replays", replays.post_replay),
    ("GET", "/replays/{id}", replays.get_replay),
    ("GET", "/replays/{id}/results", replays.get_replay_results),
    ("GET", "/entities", entities.list_entities),
    ("GET", "/entities/{id}", entities.get_entity),
    ("PATCH", "/entities/{id}", entities.patch_entity),
    ("GET", "/entities/{id}/attributes", attributes.get_attributes),
    ("GET", "/system", system.get_system),
    ("PATCH", "/system", system.patch_system),
    ("GET", "/stats/stream", stats.stream),
    ("GET", "/stats/history", stats.history),
    ("GET", "/metrics", metrics.get_metrics),
    ("GET", "/openapi.json", openapi.get_openapi),
]


def setup_routes(app: web.Application) -> None:
    for method, path, handler in ROUTES:
        app.router.add_route(method, path, handler)  # type: ignore[arg-type]
    gui.setup(app)
    replays.setup(app)
