// The overview: streams and relations with their rates, queries with state, result rate and lag, the
// system control table (scheduler policy, memory budget, shedding), the memory governor's (mem:0: switch
// synopses to approximate kinds over the budget), and total memory over time.

import { events, get, quietly } from "./api.js";
import { clear, fmtBytes, fmtNum, h } from "./dom.js";
import { ControlTable } from "./editor.js";
import { MemoryPlot } from "./plot.js";

export async function overviewPage(main, signal) {
  const srcBody = h("tbody");
  const qBody = h("tbody");
  const sysBox = h("div", { class: "panel", id: "system-panel" });
  const govBox = h("div", { class: "panel", id: "governor-panel" });
  const plotBox = h("div", { class: "plots one" });
  const memNow = h("p", { class: "muted", id: "memory-now", role: "status" });
  clear(main).append(
    h("h1", {}, "Overview"),
    h("div", { class: "split" },
      h("div", { class: "col" },
        h("section", { "aria-labelledby": "q-h" }, h("h2", { id: "q-h" }, "Queries"),
          h("table", { id: "queries-table" }, h("thead", {}, h("tr", {}, ["query", "kind", "state", "exact",
            "results", "result rate", "lag (ticks)"].map((t) => h("th", { scope: "col" }, t)))), qBody)),
        h("section", { "aria-labelledby": "src-h" }, h("h2", { id: "src-h" }, "Streams and relations"),
          h("table", { id: "sources-table" }, h("thead", {}, h("tr", {}, ["name", "kind", "rate", "elements in",
            "frontier", "backlog"].map((t) => h("th", { scope: "col" }, t)))), srcBody))),
      h("div", { class: "col" },
        h("section", { "aria-labelledby": "m-h", class: "memory" }, h("h2", { id: "m-h" }, "Memory"), memNow, plotBox),
        sysBox, govBox)));
  const table = new ControlTable(sysBox, "sys:0");
  await table.load();
  // The memory governor is in no query's plan: its statistics are refreshed with the memory history (they
  // are not in the overview's snapshot).
  const governor = new ControlTable(govBox, "mem:0");
  await governor.load();
  const plot = new MemoryPlot(plotBox, "Queues and synopses, last minutes", { height: 150 });

  const drawSources = (sources) => {
    clear(srcBody);
    if (!sources.length) srcBody.append(h("tr", {}, h("td", { colspan: 6, class: "muted" },
      "No streams or relations yet: register some in the CQL editor.")));
    for (const s of sources) {
      srcBody.append(h("tr", { "data-source": s.name }, h("th", { scope: "row" }, s.name), h("td", {}, s.kind),
        h("td", { class: "num" }, `${fmtNum(s.rate_per_s, 1)}/s`), h("td", { class: "num" }, fmtNum(s.elements_in)),
        h("td", { class: "num" }, fmtNum(s.frontier)), h("td", { class: "num" }, fmtNum(s.backlog))));
    }
  };
  const drawQueries = (queries) => {
    clear(qBody);
    if (!queries.length) qBody.append(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No queries yet.")));
    for (const q of queries) {
      qBody.append(h("tr", { "data-query": q.id },
        h("th", { scope: "row" }, h("a", { href: `#/query/${encodeURIComponent(q.id)}`, title: q.text },
          q.name && q.name !== q.id ? `${q.id} ${q.name}` : q.id)),
        h("td", {}, q.kind), h("td", {}, q.state), h("td", {}, q.exact ? "exact" : "approximate"),
        h("td", { class: "num" }, fmtNum(q.results_out)), h("td", { class: "num" }, `${fmtNum(q.result_rate_per_s, 1)}/s`),
        h("td", { class: "num" }, fmtNum(q.lag_ticks))));
    }
  };
  quietly(events("/stats/stream?interval_ms=500", signal, (name, snap) => {
    if (name !== "message") return;
    drawSources(snap.sources);
    drawQueries(snap.queries);
    table.update(snap.system);
    const m = snap.memory;
    memNow.textContent = `now: ${fmtBytes(m.total)} (queues ${fmtBytes(m.queues)}, synopses ${fmtBytes(m.synopses)})`;
  }), (e) => { memNow.textContent = `statistics stream failed: ${e.message}`; });
  const refresh = async () => {
    const hist = await get("/stats/history");
    plot.set(hist.t, hist.series);
    governor.update(await get("/entities/mem:0"));
  };
  quietly(refresh());
  const timer = setInterval(() => quietly(refresh()), 2000);
  signal.addEventListener("abort", () => { clearInterval(timer); plot.destroy(); });
}
