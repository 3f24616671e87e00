// Shared helpers of the labelling app's pages (plain JavaScript, no build step).
"use strict";

const AB = (function () {
  async function call(method, path, body) {
    const options = { method: method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const message = data && data.error ? data.error : "HTTP " + response.status;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function percent(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"; }

  function seconds(x) {
    if (x === null || x === undefined) return "–";
    return x < 1 ? (1000 * x).toFixed(0) + " ms" : x.toFixed(1) + " s";
  }

  function bars(container, rows) {
    // rows: [{name, value (0..1), label, top}]
    container.replaceChildren();
    for (const row of rows) {
      const fill = el("span");
      fill.style.width = Math.max(0, Math.min(1, row.value)) * 100 + "%";
      container.appendChild(el("div", { class: "row" + (row.top ? " top" : "") }, [
        el("span", { class: "name", text: row.name }),
        el("span", { class: "bar" }, [fill]),
        el("span", { class: "num", text: row.label }),
      ]));
    }
  }

  function statusLine(node, state) {
    const status = state.status || {};
    const name = status.state || "starting";
    const since = status.since ? Math.max(0, state.now - status.since) : null;
    const words = {
      starting: "starting the trainer",
      queued: "queued: " + state.pending + " new labels wait for the next round",
      training: "training round " + status.round + "'s model on " + status.labels + " labels",
      scoring: "scoring the pool for round " + status.round,
      ready: "ready: round " + state.round + " ranking (" + state.pending + " of " + state.batch_size + " labels toward the next round)",
      error: "training failed: " + (status.error || "?") + " (still serving the last ranking)",
    };
    node.replaceChildren(el("span", { class: "dot " + name }), document.createTextNode(
      (words[name] || name) + (since !== null && name !== "ready" ? " · " + seconds(since) : "")));
  }

  return { call: call, el: el, percent: percent, seconds: seconds, bars: bars, statusLine: statusLine };
})();
