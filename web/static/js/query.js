// The query page: the plan graph with live statistics, the control-table editor of the entity clicked,
// memory plots of its queues and synopses, its results as a live table, and its EXPLAIN text and XML plan.

import { events, get, ndjson, quietly } from "./api.js";
import { clear, fmtBytes, fmtNs, fmtNum, h } from "./dom.js";
import { ControlTable } from "./editor.js";
import { PlanGraph } from "./graph.js";
import { MemoryPlot } from "./plot.js";

const RESULT_ROWS = 50;
const MIN_TS = "-9223372036854775808";

export function summaryLine(s) {
  return [
    h("span", { class: "pill" }, s.kind),
    h("span", { class: "pill ok" }, s.state),
    h("span", { class: s.exact ? "pill" : "pill warn", "data-exact": String(s.exact) }, s.exact ? "exact" : "approximate"),
    h("span", {}, "results ", h("strong", { "data-stat": "results_out" }, fmtNum(s.results_out))),
    h("span", {}, "rate ", h("strong", {}, `${fmtNum(s.result_rate_per_s, 1)}/s`)),
    h("span", { title: "input frontier minus the query's output frontier, in ticks (application time)" },
      "lag ", h("strong", {}, s.lag_ticks === null ? "–" : `${fmtNum(s.lag_ticks)} ticks`)),
  ];
}

export async function queryPage(main, qid, signal) {
  const q = await get(`/queries/${encodeURIComponent(qid)}`);
  let plan = await get(`/queries/${encodeURIComponent(qid)}/plan`);
  const summary = h("p", { class: "summary", id: "query-summary" });
  const graphBox = h("div", { class: "graph", id: "plan-graph", tabindex: "-1" });
  const panel = h("aside", { class: "panel", id: "ct-panel", "aria-label": "Control table" },
    h("p", { class: "muted" }, "Select an entity in the graph or in the table below to see and tune its control table."));
  const entBody = h("tbody");
  const resBody = h("tbody");
  const resInfo = h("p", { class: "muted", id: "results-info", role: "status" }, "waiting for results…");
  const plotsBox = h("div", { class: "plots" });
  const explainText = h("pre", { class: "explain", id: "explain-text" });
  const explainXml = h("pre", { class: "explain", id: "explain-xml" });
  clear(main).append(
    h("h1", {}, "Query ", h("code", {}, q.id), q.name && q.name !== q.id ? ` ${q.name}` : ""),
    summary,
    h("pre", { class: "cql" }, q.text),
    h("div", { class: "split" },
      h("section", { class: "graph-pane", "aria-label": "Plan graph" },
        h("div", { class: "graph-tools" },
          h("button", { type: "button", title: "zoom in", "aria-label": "zoom in", onclick: () => graph.zoomBy(1.25) }, "+"),
          h("button", { type: "button", title: "zoom out", "aria-label": "zoom out", onclick: () => graph.zoomBy(0.8) }, "−"),
          h("button", { type: "button", title: "show the whole plan", onclick: () => graph.fit() }, "fit")),
        graphBox,
        h("p", { class: "legend muted" }, "blue: operators · grey: queues (green: input) · yellow: synopses · ",
          "double border: shared with other queries · dashed: state of an operator")),
      h("div", { class: "col" }, panel,
        h("section", { "aria-labelledby": "res-h", class: "results-box" },
          h("h2", { id: "res-h" }, `Results (last ${RESULT_ROWS})`), resInfo,
          h("div", { class: "scroll-x" }, h("table", { class: "results", id: "results-table" },
            h("thead", {}, h("tr", {}, h("th", {}, "ts"), h("th", {}, "sign"), q.schema.map((c) => h("th", {}, c.name)))),
            resBody))))),
    h("section", { "aria-labelledby": "ent-h" }, h("h2", { id: "ent-h" }, "Entities"),
      h("table", { class: "entities", id: "entity-table" },
        h("thead", {}, h("tr", {}, ["entity", "kind", "tuples in", "tuples out", "selectivity", "queue tuples / capacity",
          "bytes", "cost/tuple", "shared by"].map((t) => h("th", { scope: "col" }, t)))), entBody)),
    h("section", { "aria-labelledby": "mem-h" }, h("h2", { id: "mem-h" }, "Memory over the last minutes"), plotsBox),
    h("section", { "aria-labelledby": "ex-h" }, h("h2", { id: "ex-h" }, "EXPLAIN"), explainText,
      h("details", {}, h("summary", {}, "XML plan"), explainXml)));
  summary.append(...summaryLine({ kind: q.kind, state: "running", exact: true, results_out: 0, result_rate_per_s: 0,
    lag_ticks: null }));

  let editor = null;
  let latest = {};
  const graph = new PlanGraph(graphBox, (id) => openEditor(id));
  const ownersOf = (id) => {
    const def = [...plan.operators, ...(plan.synopses || [])].find((x) => x.id === id);
    return def ? def.owners : [q.id];
  };
  async function openEditor(id) {
    graph.select(id);
    const owners = ownersOf(id).filter((o) => o !== q.id);
    const extra = owners.length ? h("p", { class: "shared-note" }, "Shared with ",
      owners.map((o, i) => [i ? ", " : "", h("a", { href: `#/query/${encodeURIComponent(o)}` }, o)])) : null;
    editor = new ControlTable(panel, id, { extra, onWrite: () => quietly(loadPlan()) });
    try {
      await editor.load();
      editor.update(latest[id]);
    } catch (e) {
      clear(panel).append(h("p", { class: "msg err" }, e.message));
    }
  }

  const rowCells = new Map();
  function drawEntityTable() {
    clear(entBody);
    rowCells.clear();
    const ids = [...plan.queues.map((x) => x.id), ...plan.operators.map((x) => x.id),
      ...(plan.synopses || []).map((x) => x.id)];
    ids.sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
    for (const id of ids) {
      const cells = {};
      for (const k of ["kind", "tuples_in", "tuples_out", "selectivity", "tuples", "bytes", "cost"]) {
        cells[k] = h("td", { class: k === "kind" ? "" : "num", "data-col": k }, "–");
      }
      const owners = id.startsWith("queue:") ? [] : ownersOf(id);
      rowCells.set(id, cells);
      entBody.append(h("tr", { "data-entity": id },
        h("th", { scope: "row" }, h("button", { class: "link", type: "button", onclick: () => openEditor(id) }, id)),
        cells.kind, cells.tuples_in, cells.tuples_out, cells.selectivity, cells.tuples, cells.bytes, cells.cost,
        h("td", {}, owners.length > 1 ? owners.join(", ") : "")));
    }
  }
  function updateEntityTable(entities) {
    for (const [id, st] of Object.entries(entities)) {
      const c = rowCells.get(id);
      if (!c) continue;
      c.kind.textContent = st.kind;
      c.tuples_in.textContent = fmtNum(st.tuples_in);
      c.tuples_out.textContent = fmtNum(st.tuples_out);
      c.selectivity.textContent = fmtNum(st.selectivity);
      c.tuples.textContent = st.capacity === null || st.capacity === undefined ? fmtNum(st.tuples)
        : `${fmtNum(st.tuples)} / ${fmtNum(st.capacity)}`;
      c.bytes.textContent = fmtBytes(st.bytes);
      c.cost.textContent = st.cost_ns_per_tuple === undefined ? "–" : fmtNs(st.cost_ns_per_tuple);
    }
  }

  async function loadPlan() {
    plan = await get(`/queries/${encodeURIComponent(qid)}/plan`);
    if (!graph.refresh(plan, latest)) {
      graph.draw(plan);
      if (editor) graph.select(editor.eid);
    }
    drawEntityTable();
    updateEntityTable(latest);
    explainText.textContent = await (await fetch(`/queries/${encodeURIComponent(qid)}/plan?format=text`)).text();
    explainXml.textContent = await (await fetch(`/queries/${encodeURIComponent(qid)}/plan?format=xml`)).text();
  }
  await loadPlan();
  let planVersion = null;
  let timer = null;

  quietly(events(`/stats/stream?query=${encodeURIComponent(q.id)}&interval_ms=250`, signal, (name, snap) => {
    if (name === "end") { summary.textContent = "This query was dropped."; clearInterval(timer); return; }
    latest = snap.entities;
    if (planVersion !== null && snap.plan_version !== planVersion) quietly(loadPlan());
    planVersion = snap.plan_version;
    clear(summary).append(...summaryLine(snap.query));
    graph.update(snap.entities);
    updateEntityTable(snap.entities);
    if (editor) editor.update(snap.entities[editor.eid]);
  }), (e) => { summary.textContent = `statistics stream failed: ${e.message}`; });

  let shown = 0;
  const rows = [];
  quietly(ndjson(`/queries/${encodeURIComponent(q.id)}/results?from=${MIN_TS}`, signal, (item) => {
    if (item.row) {
      shown += 1;
      const tr = h("tr", { class: item.sign < 0 ? "del" : "ins" }, h("td", { class: "num" }, String(item.ts)),
        h("td", { "aria-label": item.sign < 0 ? "delete" : "insert" }, item.sign < 0 ? "−" : "+"),
        q.schema.map((c) => h("td", { class: "num" }, item.row[c.name] === null ? "null" : String(item.row[c.name]))));
      rows.unshift(tr);
      resBody.prepend(tr);
      while (rows.length > RESULT_ROWS) rows.pop().remove();
      resInfo.textContent = `${shown} result elements received`;
      resInfo.dataset.count = String(shown);
    } else if (item.gap) {
      resInfo.textContent = `${shown} result elements received; ${item.gap.missed} missed by this reader`;
    }
  }), (e) => { resInfo.textContent = `result stream failed: ${e.message}`; });

  const qPlot = new MemoryPlot(plotsBox, "Queue bytes");
  const sPlot = new MemoryPlot(plotsBox, "Synopsis bytes");
  const refreshPlots = async () => {
    const hist = await get(`/stats/history?query=${encodeURIComponent(q.id)}`);
    const pick = (kind) => Object.fromEntries(Object.entries(hist.series).filter(([id]) => hist.kinds[id] === kind));
    qPlot.set(hist.t, pick("queue"));
    sPlot.set(hist.t, pick("synopsis"));
  };
  quietly(refreshPlots());
  timer = setInterval(() => quietly(refreshPlots()), 2000);
  signal.addEventListener("abort", () => { clearInterval(timer); graph.destroy(); qPlot.destroy(); sPlot.destroy(); });
}
