// The control-table editor: statistics read-only, knobs editable with their type, unit, range and
// description from the control-table metadata (GET /entities/{id}/attributes). The server validates every
// write; a refusal is shown next to the field, an accepted write in the change history.

import { ApiError, get, patch } from "./api.js";
import { clear, fmtValue, h } from "./dom.js";

function rangeText(a) {
  const parts = [];
  if (a.choices) parts.push(`one of ${a.choices.join(", ")}`);
  const r = a.range || {};
  if (r.ge !== undefined) parts.push(`≥ ${r.ge}`);
  if (r.gt !== undefined) parts.push(`> ${r.gt}`);
  if (r.le !== undefined) parts.push(`≤ ${r.le}`);
  if (r.lt !== undefined) parts.push(`< ${r.lt}`);
  return parts.join(", ");
}

// What the user typed, as the JSON value to send: numbers and booleans as such, empty or "none" as null
// (for a knob that allows None), anything else as the text itself, for the server to accept or refuse.
function parseInput(text, type) {
  const t = text.trim();
  if ((t === "" || t.toLowerCase() === "none") && type.includes("None")) return null;
  if (/^(int|float)/.test(type) && t !== "" && !Number.isNaN(Number(t))) return Number(t);
  if (type.startsWith("bool")) {
    if (t === "true") return true;
    if (t === "false") return false;
  }
  return t;
}

function knobInput(a, id) {
  if (a.choices) {
    return h("select", { id }, a.choices.map((c) => h("option", { value: c, selected: c === a.value }, c)));
  }
  if (a.type.startsWith("bool")) {
    return h("select", { id }, ["true", "false"].map((c) => h("option", { value: c, selected: String(a.value) === c }, c)));
  }
  return h("input", { id, type: "text", value: a.value === null ? "" : String(a.value),
    placeholder: a.type.includes("None") ? "none" : "", inputmode: /^(int|float)/.test(a.type) ? "decimal" : null,
    size: 12 });
}

export class ControlTable {
  // container: element to draw into; eid: entity id (sys:0 writes through PATCH /system)
  constructor(container, eid, { extra = null, onWrite = null } = {}) {
    this.container = container;
    this.eid = eid;
    this.extra = extra;
    this.onWrite = onWrite;
    this.statCells = new Map();
  }

  async load() {
    const doc = await get(`/entities/${encodeURIComponent(this.eid)}/attributes`);
    this.render(doc);
    return this;
  }

  render(doc) {
    const c = clear(this.container);
    const safe = this.eid.replace(/[^a-z0-9]/gi, "-");
    c.append(h("h2", { id: `ct-title-${safe}` }, "Control table ", h("code", {}, this.eid), " ",
      h("span", { class: "muted" }, doc.kind || "")));
    if (this.extra) c.append(this.extra);
    const knobs = doc.attributes.filter((a) => a.writable);
    const stats = doc.attributes.filter((a) => !a.writable);
    const kbox = h("div", { class: "knobs" });
    if (!knobs.length) kbox.append(h("p", { class: "muted" }, "No writable knobs."));
    for (const a of knobs) {
      const id = `knob-${safe}-${a.name}`;
      const input = knobInput(a, id);
      const msg = h("p", { class: "msg", id: `${id}-msg`, role: "status", "aria-live": "polite" });
      input.setAttribute("aria-describedby", `${id}-msg ${id}-doc`);
      const set = async () => {
        msg.className = "msg";
        msg.textContent = "…";
        const value = parseInput(input.value, a.type);
        try {
          const path = this.eid === "sys:0" ? "/system" : `/entities/${encodeURIComponent(this.eid)}`;
          const after = await patch(path, { [a.name]: value });
          msg.className = "msg ok";
          msg.textContent = `set to ${fmtValue(after[a.name])}`;
          input.removeAttribute("aria-invalid");
          this.refreshHistory();
          if (this.onWrite) this.onWrite(a.name);
        } catch (e) {
          if (!(e instanceof ApiError)) throw e;
          msg.className = "msg err";
          msg.textContent = e.message;
          input.setAttribute("aria-invalid", "true");
        }
      };
      const form = h("form", { class: "knob", "data-knob": a.name, onsubmit: (ev) => { ev.preventDefault(); set(); } },
        h("label", { for: id }, h("strong", {}, a.name), " ",
          h("span", { class: "meta" }, [a.type, a.unit, rangeText(a)].filter(Boolean).join(" · "))),
        h("div", { class: "row" }, input, h("button", { type: "submit" }, "Set")),
        msg,
        h("p", { class: "doc", id: `${id}-doc` }, a.doc || ""));
      kbox.append(form);
    }
    c.append(h("h3", {}, "Knobs"), kbox);
    this.history = h("div", { class: "history" });
    c.append(h("h3", {}, "Change history"), this.history);
    const tbody = h("tbody");
    for (const a of stats) {
      const cell = h("td", { class: "num" }, fmtValue(a.value));
      this.statCells.set(a.name, cell);
      tbody.append(h("tr", { title: a.doc || "" }, h("th", { scope: "row" }, a.name), cell,
        h("td", { class: "muted" }, a.unit || "")));
    }
    c.append(h("h3", {}, "Statistics"),
      h("table", { class: "stats-table" }, h("thead", {}, h("tr", {}, h("th", {}, "statistic"), h("th", {}, "value"),
        h("th", {}, "unit"))), tbody));
    this.showHistory(doc.history || []);
  }

  showHistory(changes) {
    const box = clear(this.history);
    if (!changes.length) { box.append(h("p", { class: "muted" }, "No changes yet.")); return; }
    const rows = changes.slice().reverse().map((ch) => h("tr", {},
      h("td", { class: "num" }, ch.seq ?? ""), h("td", {}, ch.attr ?? ""),
      h("td", {}, fmtValue(ch.old)), h("td", {}, fmtValue(ch.new)),
      h("td", { class: "num" }, ch.at === null || ch.at === undefined ? "–" : String(ch.at))));
    box.append(h("table", { class: "history-table" },
      h("thead", {}, h("tr", {}, ["#", "knob", "old", "new", "at (app time)"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)));
  }

  async refreshHistory() {
    try {
      const doc = await get(`/entities/${encodeURIComponent(this.eid)}/attributes`);
      this.showHistory(doc.history || []);
      this.update(Object.fromEntries(doc.attributes.map((a) => [a.name, a.value])));
    } catch { /* the entity went away; the page says so elsewhere */ }
  }

  // Live statistics from a snapshot: {attribute: value}
  update(values) {
    if (!values) return;
    for (const [k, cell] of this.statCells) {
      if (k in values) cell.textContent = fmtValue(values[k]);
    }
  }
}
