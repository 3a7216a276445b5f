// The dsms web GUI: a hash router over three pages (overview, CQL editor, query). Every number shown comes
// from the server (GET /stats/stream, /stats/history, /entities/{id}/attributes and the rest of the API).

import { cqlPage } from "./cql.js";
import { h } from "./dom.js";
import { overviewPage } from "./overview.js";
import { queryPage } from "./query.js";

const main = document.getElementById("main");
let current = null;

async function route() {
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  const hash = location.hash.replace(/^#/, "") || "/";
  const parts = hash.split("/").filter(Boolean).map(decodeURIComponent);
  const page = parts[0] || "overview";
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.toggleAttribute("aria-current", a.dataset.nav === page);
    if (a.dataset.nav === page) a.setAttribute("aria-current", "page");
  }
  try {
    if (page === "query" && parts[1]) {
      document.title = `dsms · query ${parts[1]}`;
      await queryPage(main, parts[1], signal);
    } else if (page === "cql") {
      document.title = "dsms · CQL editor";
      await cqlPage(main, signal);
    } else {
      document.title = "dsms · overview";
      await overviewPage(main, signal);
    }
    main.dataset.page = page;
  } catch (e) {
    if (e.name === "AbortError") return;
    main.replaceChildren(h("h1", {}, "Not available"), h("p", { class: "msg err", role: "alert" }, e.message),
      h("p", {}, h("a", { href: "#/" }, "Back to the overview")));
    main.dataset.page = "error";
  }
}

window.addEventListener("hashchange", route);
route();
