// The CQL editor (register streams, relations, views and queries; errors shown at their line and column)
// and a form to push a few test elements into a stream (or updates into a relation).

import { ApiError, get, post } from "./api.js";
import { clear, h } from "./dom.js";

const EXAMPLE = `REGISTER STREAM Bid (item INT, price FLOAT, bidder STRING);
REGISTER QUERY busy AS
  SELECT item, COUNT(*) AS bids, MAX(price) AS top
  FROM Bid [RANGE 10 SECONDS] GROUP BY item;`;

function sample(cols) {
  const row = {};
  for (const c of cols) {
    row[c.name] = c.type === "INT" ? 1 : c.type === "FLOAT" ? 1.5 : c.type === "BOOLEAN" ? true
      : c.type === "TIMESTAMP" ? 0 : "x";
  }
  return [1000, 2000].map((ts) => JSON.stringify({ ts, row })).join("\n");
}

// Character offset of (line, column), both 1-based.
function offsetOf(text, line, column) {
  const lines = text.split("\n");
  let off = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length); i++) off += lines[i].length + 1;
  return off + Math.max(column - 1, 0);
}

export async function cqlPage(main) {
  const area = h("textarea", { id: "cql-text", class: "code", rows: 12, spellcheck: "false",
    "aria-describedby": "cql-error", "aria-label": "CQL statements" }, EXAMPLE);
  const gutter = h("pre", { class: "gutter", "aria-hidden": "true" });
  const err = h("div", { id: "cql-error", class: "msg", role: "alert" });
  const out = h("div", { id: "cql-result", role: "status" });
  const syncGutter = () => {
    const n = area.value.split("\n").length;
    gutter.textContent = Array.from({ length: n }, (_, i) => String(i + 1)).join("\n");
    gutter.scrollTop = area.scrollTop;
  };
  area.addEventListener("input", syncGutter);
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });

  const streamSel = h("select", { id: "push-stream" });
  const pushText = h("textarea", { id: "push-text", class: "code", rows: 6, spellcheck: "false", wrap: "off",
    "aria-label": "Elements as NDJSON" });
  const pushMsg = h("p", { id: "push-msg", class: "msg", role: "status" });
  let streams = [];
  const loadStreams = async () => {
    const [st, rel] = await Promise.all([get("/streams"), get("/relations")]);
    streams = [...st.streams, ...rel.relations];
    const keep = streamSel.value;
    clear(streamSel).append(...streams.map((s) => h("option", { value: s.name },
      s.kind === "relation" ? `${s.name} (relation: updates, "sign": -1 deletes)` : s.name)));
    if (streams.some((s) => s.name === keep)) streamSel.value = keep;
    const s = streams.find((x) => x.name === streamSel.value);
    if (s && !pushText.value) pushText.value = sample(s.columns);
  };
  streamSel.addEventListener("change", () => {
    const s = streams.find((x) => x.name === streamSel.value);
    if (s) pushText.value = sample(s.columns);
  });

  const run = async () => {
    err.textContent = "";
    err.className = "msg";
    area.removeAttribute("aria-invalid");
    clear(out);
    try {
      const doc = await post("/cql", area.value, "text/plain");
      out.append(h("ul", { class: "created" }, doc.results.map((r) => h("li", {},
        r.created ? [`created ${r.created} `, r.created === "query" || r.created === "view"
          ? h("a", { href: `#/query/${encodeURIComponent(r.id)}` }, r.name || r.id) : h("code", {}, r.name)]
          : r.dropped ? `dropped ${r.dropped}` : JSON.stringify(r)))));
      await loadStreams();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      const b = e.body;
      err.className = "msg err";
      area.setAttribute("aria-invalid", "true");
      const where = b.line ? h("strong", { class: "pos", "data-line": b.line, "data-column": b.column },
        `Line ${b.line}, column ${b.column}: `) : null;
      err.append(where || "", b.line ? e.message.replace(/^line \d+, column \d+: /, "") : e.message);
      if (b.expected && b.expected.length) err.append(h("div", { class: "muted" }, `expected: ${b.expected.slice(0, 12).join(", ")}`));
      if (b.done && b.done.length) err.append(h("div", { class: "muted" }, `${b.done.length} statement(s) before it were applied`));
      if (b.line) {
        const off = offsetOf(area.value, b.line, b.column || 1);
        area.focus();
        area.setSelectionRange(off, off + 1);
      }
    }
  };

  const push = async () => {
    pushMsg.className = "msg";
    pushMsg.textContent = "…";
    try {
      const target = streams.find((x) => x.name === streamSel.value);
      const path = target && target.kind === "relation"
        ? `/relations/${encodeURIComponent(target.name)}/updates` : `/streams/${encodeURIComponent(streamSel.value)}/elements`;
      const doc = await post(path, pushText.value, "application/x-ndjson");
      pushMsg.className = "msg ok";
      pushMsg.textContent = `accepted ${doc.accepted} element(s)${doc.heartbeat !== null ? `, heartbeat ${doc.heartbeat}` : ""}`;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      pushMsg.className = "msg err";
      pushMsg.textContent = (e.body.index !== undefined ? `line ${e.body.index + 1}: ` : "") + e.message;
    }
  };

  clear(main).append(
    h("h1", {}, "CQL editor"),
    h("div", { class: "split" },
      h("section", { class: "col", "aria-labelledby": "ed-h" },
        h("h2", { id: "ed-h" }, "Statements"),
        h("p", { class: "muted" }, "REGISTER STREAM / RELATION / VIEW / QUERY, DROP …; statements end with ';'. ",
          "Ctrl+Enter runs."),
        h("div", { class: "editor" }, gutter, area),
        h("div", { class: "actions" }, h("button", { type: "button", id: "cql-run", onclick: run }, "Run")),
        err, out),
      h("section", { class: "panel", "aria-labelledby": "push-h" },
        h("h2", { id: "push-h" }, "Push test input"),
        h("form", { onsubmit: (ev) => { ev.preventDefault(); push(); } },
          h("label", { for: "push-stream" }, "Stream or relation"), streamSel,
          h("label", { for: "push-text" }, "Elements, one JSON object a line: {\"ts\": ms, \"row\": {...}} or {\"heartbeat\": ms}"),
          pushText,
          h("div", { class: "actions" }, h("button", { type: "submit", id: "push-send" }, "Send"))),
        pushMsg)));
  area.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(); } });
  syncGutter();
  await loadStreams();
}
