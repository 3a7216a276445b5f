// Memory plots over the last minutes (uPlot), drawn from the server's sampled history (GET /stats/history).

import { fmtBytes, h } from "./dom.js";

const COLORS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#0e7490", "#bf3989", "#57606a"];

export class MemoryPlot {
  constructor(container, title, { height = 180 } = {}) {
    this.container = container;
    this.title = title;
    this.height = height;
    this.names = null;
    this.plot = null;
    this.box = h("div", { class: "plot", role: "img", "aria-label": title });
    container.append(h("h3", {}, title), this.box);
  }

  // t: sample times in ms; series: {name: [bytes or null]}
  set(t, series) {
    const names = Object.keys(series);
    const key = names.join("|");
    const data = [t.map((x) => x / 1000), ...names.map((n) => series[n])];
    if (!names.length) {
      this.box.textContent = "No queues or synopses.";
      this.names = null;
      return;
    }
    if (this.plot && key === this.names) { this.plot.setData(data); return; }
    if (this.plot) this.plot.destroy();
    this.box.textContent = "";
    this.names = key;
    const width = Math.max(this.box.clientWidth || this.container.clientWidth || 400, 240);
    this.plot = new uPlot({
      width, height: this.height,
      scales: { x: { time: true } },
      axes: [{}, { values: (u, vals) => vals.map(fmtBytes), size: 70 }],
      series: [{}, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: n === "total" ? 2.5 : 1.5,
        dash: n === "total" ? [6, 4] : undefined, spanGaps: false, value: (u, v) => fmtBytes(v) }))],
      legend: { live: false },
    }, data, this.box);
  }

  destroy() { if (this.plot) this.plot.destroy(); this.plot = null; }
}
