"""The web GUI in a real headless Chromium against a real ``dsms serve`` (SPEC section 1: "a web GUI shows
the query plans as live graphs and edits control tables"; docs/gui.md). Expected results come from the
reference evaluator, expected plans from the HTTP API the GUI draws them from."""

from __future__ import annotations

import re
from collections import Counter

from guikit import (
    TOKEN,
    Console,
    cell,
    op_of_kind,
    open_query,
    push_with_form,
    reference_rows,
    result_rows,
    run_cql,
    screenshot,
    watch,
)
from httpkit import Server
from playwright.sync_api import Browser, Page, expect


def test_editor_registers_a_stream_and_a_query_and_the_graph_draws_its_plan(page: Page, server: Server,
                                                                             uniq: str) -> None:
    run_cql(page, f"REGISTER STREAM {uniq} (item INT, price FLOAT);\n"
                  f"REGISTER QUERY {uniq}q AS SELECT item, COUNT(*) AS n, MAX(price) AS top\n"
                  f"  FROM {uniq} [RANGE 10 SECONDS] GROUP BY item;")
    link = page.locator("#cql-result a", has_text=f"{uniq}q")
    expect(link).to_be_visible()
    assert server.get(f"/streams/{uniq}").status == 200
    qid = server.get(f"/queries/{uniq}q").json()["id"]
    link.click()
    page.wait_for_selector("#plan-graph[data-nodes]")
    plan = server.get(f"/queries/{qid}/plan").json()
    entities = len(plan["operators"]) + len(plan["queues"]) + len(plan["synopses"])
    # a chain plan: one input queue, one output queue per operator, and state for the window and aggregate
    assert len(plan["queues"]) == len(plan["operators"]) + 1 and len(plan["synopses"]) >= 2
    assert int(page.get_attribute("#plan-graph", "data-nodes")) == entities
    expect(page.locator("#entity-table tbody tr")).to_have_count(entities)
    # the rows are drawn with "–" until the first statistics arrive: read the kinds once they have
    expect(page.locator("#entity-table td[data-col='kind']", has_text="–")).to_have_count(0)
    kinds = page.locator("#entity-table td[data-col='kind']").all_text_contents()
    assert {"range_window", "aggregate", "queue"} <= set(kinds)
    expect(page.locator("#explain-text")).to_contain_text("range_window: RANGE 10000")
    expect(page.locator("#explain-xml")).to_contain_text("<plan", use_inner_text=False)


def test_pushed_input_shows_in_the_statistics_and_the_results_table(context, console: Console, server: Server,
                                                                    uniq: str) -> None:
    setup = f"REGISTER STREAM {uniq} (item INT, price FLOAT)"
    query = f"SELECT item, COUNT(*) AS n FROM {uniq} [RANGE 10 SECONDS] GROUP BY item"
    server.cql(f"{setup}; REGISTER QUERY {uniq}q AS {query}")
    watching = watch(context.new_page(), console)
    plan = open_query(watching, server, f"{uniq}q")
    window = op_of_kind(plan, "range_window")
    expect(cell(watching, window, "tuples_in")).to_have_text("0")
    rows = [{"item": 1, "price": 2.0}, {"item": 1, "price": 3.0}, {"item": 2, "price": 4.0}]
    ts = [1000, 2000, 3000]
    push_with_form(watch(context.new_page(), console), uniq,
                   [{"ts": t, "row": r} for t, r in zip(ts, rows)] + [{"heartbeat": 5000}])
    expect(cell(watching, window, "tuples_in")).to_have_text(str(len(rows)))
    expected = reference_rows(setup, query, [(rows, ts)], 5000, ["item", "n"])
    expect(watching.locator("#results-info")).to_have_attribute("data-count", str(len(expected)))
    assert Counter(result_rows(watching, ["item", "n"])) == Counter(expected)
    expect(watching.locator("[data-stat='results_out']")).to_have_text(str(len(expected)))
    screenshot(watching, "query")
    assert console.unexpected() == []


def test_changing_a_window_range_with_the_keyboard_changes_the_results(page: Page, server: Server,
                                                                       uniq: str) -> None:
    setup = f"REGISTER STREAM {uniq} (a INT)"
    server.cql(f"{setup}; REGISTER QUERY {uniq}q AS SELECT COUNT(*) AS n FROM {uniq} [RANGE 10 SECONDS]")
    before = ([{"a": 1}], [1000])
    server.ndjson(uniq, [{"ts": 1000, "row": {"a": 1}}, {"heartbeat": 12000}])
    plan = open_query(page, server, f"{uniq}q")
    window = op_of_kind(plan, "range_window")
    button = page.locator(f"#entity-table tr[data-entity='{window}'] button")
    button.press("Enter")            # focus and key in one action: the table may be redrawn between two
    knob = page.locator("#ct-panel form[data-knob='range']")
    field = knob.locator("input")
    expect(field).to_have_value("10000")
    field.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("1000")
    page.keyboard.press("Enter")
    expect(knob.locator(".msg.ok")).to_have_text("set to 1000")
    history = page.locator("#ct-panel .history-table tbody tr").first
    expect(history.locator("td")).to_have_text([re.compile(r"\d+"), "range", "10000", "1000", re.compile(".*")])
    assert server.get(f"/entities/{window}").json()["range"] == 1000
    after = ([{"a": 2}, {"a": 3}, {"a": 4}], [20000, 20500, 21000])
    server.ndjson(uniq, [{"ts": t, "row": r} for r, t in zip(*after)] + [{"heartbeat": 30000}])
    old = reference_rows(setup, f"SELECT COUNT(*) AS n FROM {uniq} [RANGE 10 SECONDS]", [before], 12000, ["n"])
    new = reference_rows(setup, f"SELECT COUNT(*) AS n FROM {uniq} [RANGE 1 SECOND]", [after], 30000, ["n"])
    unchanged = reference_rows(setup, f"SELECT COUNT(*) AS n FROM {uniq} [RANGE 10 SECONDS]", [after], 30000, ["n"])
    assert new != unchanged                          # the test can tell whether the new range acted
    expect(page.locator("#results-info")).to_have_attribute("data-count", str(len(old) + len(new)))
    assert sorted(result_rows(page, ["n"])) == sorted(old + new)    # order within one instant is open
    expect(page.locator("#explain-text")).to_contain_text(f"{window} range_window: RANGE 1000 ")
    expect(cell(page, window, "tuples_in")).to_have_text("4")
    expect(page.locator("#ct-panel .stats-table")).to_contain_text("range_from")
    screenshot(page, "control-table")


def test_an_entity_shared_with_another_query_is_marked_and_links_to_it(page: Page, server: Server,
                                                                        uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (item INT, price FLOAT); "
               f"REGISTER QUERY {uniq}a AS SELECT item, COUNT(*) AS n FROM {uniq} [RANGE 10 SECONDS] GROUP BY item")
    a = server.get(f"/queries/{uniq}a").json()["id"]
    before = open_query(page, server, a)
    assert not [op for op in before["operators"] if op["shared"]]
    # registered while the page is open: the page notices the plan changed and marks what is now shared
    server.cql(f"REGISTER QUERY {uniq}b AS SELECT item, MAX(price) AS m FROM {uniq} [RANGE 10 SECONDS] GROUP BY item")
    b = server.get(f"/queries/{uniq}b").json()["id"]
    plan = server.get(f"/queries/{a}/plan").json()
    shared = [op["id"] for op in plan["operators"] if op["shared"]]
    assert shared and all(set(op["owners"]) == {a, b} for op in plan["operators"] if op["shared"])
    row = page.locator(f"#entity-table tr[data-entity='{shared[0]}']")
    expect(row.locator("td").last).to_have_text(", ".join(sorted([a, b])))
    row.locator("button").click()
    link = page.locator("#ct-panel .shared-note a")
    expect(link).to_have_text(b)
    link.click()
    expect(page.locator("h1")).to_contain_text(b)
    page.wait_for_selector("#plan-graph[data-nodes]")
    other = server.get(f"/queries/{b}/plan").json()
    assert shared[0] in {op["id"] for op in other["operators"]}
    expect(page.locator(f"#entity-table tr[data-entity='{shared[0]}']")).to_have_count(1)


def test_a_refused_knob_value_shows_the_servers_message_next_to_the_field(page: Page, console: Console,
                                                                          server: Server, uniq: str) -> None:
    console.allow(400)
    server.cql(f"REGISTER STREAM {uniq} (a INT); REGISTER QUERY {uniq}q AS SELECT a FROM {uniq} WHERE a > 1")
    plan = open_query(page, server, f"{uniq}q")
    queue = plan["queues"][-1]["id"]
    page.click(f"#entity-table tr[data-entity='{queue}'] button")
    knob = page.locator("#ct-panel form[data-knob='capacity']")
    knob.locator("input").fill("0")
    knob.locator("button").click()
    refused = server.request("PATCH", f"/entities/{queue}", json_body={"capacity": 0})
    assert refused.status == 400
    expect(knob.locator(".msg.err")).to_have_text(refused.json()["detail"])
    expect(knob.locator("input")).to_have_attribute("aria-invalid", "true")
    assert server.get(f"/entities/{queue}").json()["capacity"] is None
    expect(page.locator("#ct-panel .history")).to_contain_text("No changes yet")
    expect(cell(page, queue, "tuples")).to_have_text("0")
    knob.locator("input").fill("50")                     # an accepted value: history, table and server agree
    knob.locator("button").click()
    expect(knob.locator(".msg.ok")).to_have_text("set to 50")
    expect(knob.locator("input")).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#ct-panel .history-table tbody tr").first.locator("td")).to_have_text(
        [re.compile(r"\d+"), "capacity", "none", "50", re.compile(".*")])
    expect(cell(page, queue, "tuples")).to_have_text("0 / 50")
    assert server.get(f"/entities/{queue}").json()["capacity"] == 50


def test_a_cql_parse_error_is_shown_at_its_line_and_column(page: Page, console: Console, server: Server,
                                                          uniq: str) -> None:
    console.allow(400)
    last = f"  FROM {uniq} WHERE a > ;"
    text = f"REGISTER STREAM {uniq} (a INT);\n\nSELECT a\n{last}"
    run_cql(page, text)
    pos = page.locator("#cql-error .pos")
    expect(pos).to_have_attribute("data-line", "4")
    column = len(last) - last.index(";")   # the ';' where an expression was expected, 1-based from the end
    column = len(last) - column + 1
    expect(pos).to_have_attribute("data-column", str(column))
    expect(page.locator("#cql-error")).to_contain_text("expected")
    offset = len(text) - len(last) + column - 1
    assert page.eval_on_selector("#cql-text", "t => t.selectionStart") == offset
    assert text[offset] == ";"
    assert server.get(f"/streams/{uniq}").status == 404       # a parse error applies nothing


def test_the_token_is_asked_once_and_never_put_in_a_url(browser: Browser, console: Console, server: Server,
                                                        uniq: str) -> None:
    console.allow(401)
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=f"http://127.0.0.1:{server.port}")
    ctx.set_default_timeout(10_000)
    requests: list = []
    try:
        page = watch(ctx.new_page(), console)
        page.on("request", lambda r: requests.append(r))
        run_cql(page, f"REGISTER STREAM {uniq} (a INT);")
        expect(page.locator("#token-dialog")).to_be_visible()
        page.keyboard.press("Escape")                     # declined: the server's 401 is shown, nothing stored
        expect(page.locator("#cql-error")).to_contain_text("Authorization: Bearer")
        assert server.get(f"/streams/{uniq}").status == 404
        page.click("#cql-run")
        expect(page.locator("#token-dialog")).to_be_visible()
        page.fill("#token-input", TOKEN)
        page.keyboard.press("Enter")
        expect(page.locator("#cql-result")).to_contain_text(f"created stream {uniq}")
        page.fill("#cql-text", f"REGISTER STREAM {uniq}b (a INT);")
        page.click("#cql-run")
        expect(page.locator("#cql-result")).to_contain_text(f"created stream {uniq}b")
        expect(page.locator("#token-dialog")).to_be_hidden()
        posts = [r for r in requests if r.method == "POST" and r.url.endswith("/cql")]
        assert [r.headers.get("authorization") for r in posts] == [None, None, f"Bearer {TOKEN}", f"Bearer {TOKEN}"]
        assert not [r.url for r in requests if TOKEN in r.url]
        assert page.evaluate("sessionStorage.getItem('dsms.token')") == TOKEN
    finally:
        ctx.close()
    assert console.unexpected() == []


def test_overview_lists_sources_and_queries_and_switches_the_scheduler_policy(page: Page, server: Server,
                                                                              uniq: str) -> None:
    server.cql(f"REGISTER STREAM {uniq} (a INT); REGISTER QUERY {uniq}q AS SELECT a FROM {uniq}")
    server.ndjson(uniq, [{"ts": 1, "row": {"a": 1}}, {"ts": 2, "row": {"a": 2}}, {"heartbeat": 3}])
    qid = server.get(f"/queries/{uniq}q").json()["id"]
    page.goto("/#/")
    expect(page.locator(f"#sources-table tr[data-source='{uniq}'] td").nth(2)).to_have_text("2")
    row = page.locator(f"#queries-table tr[data-query='{qid}']")
    expect(row.locator("td").nth(3)).to_have_text("2")
    expect(row.locator("td").nth(2)).to_have_text("exact")
    policy = page.locator("#system-panel form[data-knob='policy']")
    start = server.get("/system").json()["policy"]
    target = "fifo" if start != "fifo" else "round_robin"
    policy.locator("select").select_option(target)
    policy.locator("button").click()
    expect(policy.locator(".msg.ok")).to_have_text(f"set to {target}")
    assert server.get("/system").json()["policy"] == target
    first = page.locator("#system-panel .history-table tbody tr").first
    expect(first.locator("td")).to_have_text([re.compile(r"\d+"), "policy", start, target, re.compile(".*")])
    expect(page.locator("#memory-now")).to_contain_text("now:")
    page.wait_for_selector("#main .plot .uplot")
    screenshot(page, "overview")
    policy.locator("select").select_option(start)
    policy.locator("button").click()
    expect(policy.locator(".msg.ok")).to_have_text(f"set to {start}")
    assert server.get("/system").json()["policy"] == start


def test_overview_edits_the_memory_governor(page: Page, console: Console, server: Server) -> None:
    """mem:0 is in no query's plan, so the overview carries its control table: a refused value says why and
    changes nothing; an accepted one reaches the server and the change history."""
    console.allow(400)
    page.goto("/#/")
    panel = page.locator("#governor-panel")
    expect(panel.locator("h2")).to_contain_text("mem:0")
    low = panel.locator("form[data-knob='low_water']")
    low.locator("input").fill("1.5")
    low.locator("button").click()
    expect(low.locator(".msg.err")).to_contain_text("not below 1.0")
    assert server.get("/entities/mem:0").json()["low_water"] == 0.5
    auto = panel.locator("form[data-knob='auto_kind']")
    start = server.get("/entities/mem:0").json()["auto_kind"]
    auto.locator("select").select_option(str(not start).lower())
    auto.locator("button").click()
    expect(auto.locator(".msg.ok")).to_have_text(f"set to {str(not start).lower()}")
    assert server.get("/entities/mem:0").json()["auto_kind"] is (not start)
    expect(panel.locator(".history-table tbody tr").first.locator("td").nth(1)).to_have_text("auto_kind")
    expect(panel.locator(".stats-table")).to_contain_text("switches")
    auto.locator("select").select_option(str(start).lower())
    auto.locator("button").click()
    expect(auto.locator(".msg.ok")).to_have_text(f"set to {str(start).lower()}")
