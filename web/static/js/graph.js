// A query's plan as a graph (Cytoscape.js, laid out by dagre): operators, queues and synopses, with live
// statistics in their labels. Entities shared with other queries have a dashed double border.

import { fmtBytes, fmtNs, fmtNum } from "./dom.js";

if (window.cytoscape && window.cytoscapeDagre) window.cytoscape.use(window.cytoscapeDagre);

function short(s, n) { return s && s.length > n ? `${s.slice(0, n - 1)}…` : (s || ""); }

function opLabel(op, st) {
  const lines = [`${op.id}  ${op.kind}`];
  if (op.label) lines.push(short(op.label, 30));
  if (st) {
    lines.push(`in ${fmtNum(st.tuples_in)} · out ${fmtNum(st.tuples_out)} · sel ${fmtNum(st.selectivity)}`);
    lines.push(`${fmtNs(st.cost_ns_per_tuple)}/tuple`);
  }
  return lines.join("\n");
}

function queueLabel(q, st) {
  const src = q.source ? `  ← ${q.source.replace(/^source:/, "")}` : "";
  const t = st ? st.tuples : q.tuples;
  const b = st ? st.bytes : q.bytes;
  const cap = st && st.capacity !== null && st.capacity !== undefined ? ` / cap ${fmtNum(st.capacity)}` : "";
  return `${q.id}${src}\n${fmtNum(t)}${cap} tuples · ${fmtBytes(b)}`;
}

function synLabel(s, st) {
  const lines = [`${s.id}  ${s.kind}`];
  if (st) lines.push(`${fmtNum(st.size)} · ${fmtBytes(st.bytes)}${st.approximate ? " · approx" : ""}`);
  return lines.join("\n");
}

const MIN_READABLE = 0.8;

const STYLE = [
  { selector: "node", style: { label: "data(label)", "text-wrap": "wrap", "text-valign": "center",
    "text-halign": "center", "font-size": 11, "font-family": "system-ui, sans-serif", color: "#1f2328",
    "border-width": 1.5, "border-color": "#57606a", "background-color": "#fff" } },
  { selector: "node.op", style: { shape: "round-rectangle", width: 200, height: 58, "background-color": "#ddf4ff",
    "border-color": "#0969da" } },
  { selector: "node.queue", style: { shape: "rectangle", width: 160, height: 30, "background-color": "#f6f8fa" } },
  { selector: "node.source", style: { "background-color": "#dafbe1", "border-color": "#1a7f37" } },
  { selector: "node.syn", style: { shape: "barrel", width: 150, height: 32, "background-color": "#fff8c5",
    "border-color": "#9a6700" } },
  { selector: "node.shared", style: { "border-style": "double", "border-width": 5 } },
  { selector: "node:selected", style: { "border-color": "#cf222e", "border-width": 4 } },
  { selector: "edge", style: { width: 1.5, "line-color": "#8c959f", "target-arrow-color": "#8c959f",
    "target-arrow-shape": "triangle", "curve-style": "bezier" } },
  { selector: "edge.state", style: { "line-style": "dashed", "target-arrow-shape": "none", "line-color": "#d4a72c" } },
];

export class PlanGraph {
  constructor(container, onSelect) {
    this.container = container;
    this.onSelect = onSelect;
    this.cy = null;
    this.plan = null;
  }

  // plan: GET /queries/{id}/plan JSON
  draw(plan) {
    this.plan = plan;
    this.byId = new Map();
    const els = [];
    for (const q of plan.queues) {
      this.byId.set(q.id, { kind: "queue", def: q });
      els.push({ group: "nodes", data: { id: q.id, label: queueLabel(q) },
        classes: ["queue", q.source ? "source" : "", q.shared ? "shared" : ""].join(" ") });
    }
    for (const op of plan.operators) {
      this.byId.set(op.id, { kind: "op", def: op });
      els.push({ group: "nodes", data: { id: op.id, label: opLabel(op) }, classes: `op ${op.shared ? "shared" : ""}` });
    }
    for (const s of plan.synopses || []) {
      this.byId.set(s.id, { kind: "syn", def: s });
      els.push({ group: "nodes", data: { id: s.id, label: synLabel(s) }, classes: `syn ${s.shared ? "shared" : ""}` });
    }
    let n = 0;
    for (const e of plan.edges) {
      if (this.byId.has(e.from) && this.byId.has(e.to)) {
        els.push({ group: "edges", data: { id: `e${n++}`, source: e.from, target: e.to } });
      }
    }
    for (const s of plan.synopses || []) {
      for (const op of s.operators) {
        if (this.byId.has(op)) els.push({ group: "edges", data: { id: `e${n++}`, source: op, target: s.id }, classes: "state" });
      }
    }
    if (this.cy) this.cy.destroy();
    this.cy = window.cytoscape({ container: this.container, elements: els, style: STYLE, minZoom: 0.2, maxZoom: 2, boxSelectionEnabled: false, autoungrabify: true });
    this.cy.layout({ name: "dagre", rankDir: "TB", nodeSep: 16, rankSep: 16, padding: 6, fit: false }).run();
    this.fit(true);
    this.cy.on("tap", "node", (ev) => this.onSelect(ev.target.id()));
    this.container.dataset.nodes = String(this.cy.nodes().length);
    this.container.dataset.edges = String(this.cy.edges().length);
  }

  // A fresh plan of the same entities (labels change when a knob does, e.g. a window's range): new labels,
  // same layout. Returns false when the entities differ and the graph must be drawn again.
  refresh(plan, entities) {
    const ids = [...plan.queues, ...plan.operators, ...(plan.synopses || [])].map((x) => x.id).sort().join(",");
    if (!this.cy || ids !== [...this.byId.keys()].sort().join(",")) return false;
    const sharing = (x) => `${x.id}:${Boolean(x.shared)}`;
    const was = [...this.byId.values()].map((v) => sharing(v.def)).sort().join(",");
    const now = [...plan.queues, ...plan.operators, ...(plan.synopses || [])].map(sharing).sort().join(",");
    if (was !== now) return false;
    for (const x of [...plan.queues, ...plan.operators, ...(plan.synopses || [])]) this.byId.get(x.id).def = x;
    this.plan = plan;
    this.update(entities);
    return true;
  }

  // entities: {id: control-table values}
  update(entities) {
    if (!this.cy) return;
    this.cy.batch(() => {
      for (const [id, st] of Object.entries(entities)) {
        const info = this.byId.get(id);
        if (!info) continue;
        const fn = info.kind === "op" ? opLabel : info.kind === "queue" ? queueLabel : synLabel;
        this.cy.getElementById(id).data("label", fn(info.def, st));
      }
    });
  }

  // Fit the plan into the view, but no smaller than MIN_READABLE: a large plan starts at its inputs (top)
  // and is panned by dragging, the wheel or the zoom buttons.
  fit(readable = false) {
    if (!this.cy) return;
    this.cy.fit(undefined, 8);
    if (readable && this.cy.zoom() < MIN_READABLE) {
      const bb = this.cy.elements().boundingBox();
      const z = MIN_READABLE;
      this.cy.zoom(z);
      this.cy.pan({ x: (this.container.clientWidth - bb.w * z) / 2 - bb.x1 * z, y: 8 - bb.y1 * z });
    }
  }

  zoomBy(factor) {
    if (!this.cy) return;
    const c = { x: this.container.clientWidth / 2, y: this.container.clientHeight / 2 };
    this.cy.zoom({ level: this.cy.zoom() * factor, renderedPosition: c });
  }

  select(id) {
    if (!this.cy) return;
    this.cy.nodes().unselect();
    this.cy.getElementById(id).select();
  }

  destroy() { if (this.cy) this.cy.destroy(); this.cy = null; }
}
