// Shared helpers of the labelling app's pages (plain JavaScript, no build step).
"use strict";

const AB = (function () {
  // The access token comes once in the page's address (?token=...); it is kept in localStorage,
  // which only pages of this origin (this host *and port*) can read, and sent in a header: no
  // cookie, so other services on this host never receive it.
  const TOKEN_KEY = "activebayes-token";
  const SESSION_KEY = "activebayes-session";
  (function takeTokenFromAddress() {
    const params = new URLSearchParams(location.search);
    if (!params.has("token")) return;
    localStorage.setItem(TOKEN_KEY, params.get("token"));
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  })();

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const token = localStorage.getItem(TOKEN_KEY);
    if (token) h["X-Token"] = token;
    const session = localStorage.getItem(SESSION_KEY);
    if (session) h["X-Session"] = session;
    return h;
  }

  async function call(method, path, body) {
    const options = { method: method, credentials: "omit", headers: headers() };
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

  // This browser's annotator session (kept across reloads and tabs); `name` renames it.
  async function session(name) {
    const body = {};
    const known = localStorage.getItem(SESSION_KEY);
    if (known) body.session = known;
    if (name) body.name = name;
    const data = await call("POST", "/api/session", body);
    localStorage.setItem(SESSION_KEY, data.session);
    return data.annotator;
  }

  // An API resource as an object URL (images and downloads need the token header too).
  async function blobURL(path) {
    const response = await fetch(path, { credentials: "omit", headers: headers() });
    if (!response.ok) {
      let message = "HTTP " + response.status;
      try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    return URL.createObjectURL(await response.blob());
  }

  async function download(path, filename) {
    const url = await blobURL(path);
    const link = el("a", { href: url, download: filename });
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
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

  function spread(ys, gap) {
    // text baselines ys moved apart, in their order, so that no two are closer than gap
    // (two end values of a chart at the same height would print over each other)
    const order = ys.map((y, i) => i).sort((a, b) => ys[a] - ys[b]);
    const out = ys.slice();
    for (let k = 1; k < order.length; k++) {
      const above = out[order[k - 1]];
      if (out[order[k]] - above < gap) out[order[k]] = above + gap;
    }
    return out;
  }

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
      restarting: (status.error || "the trainer stopped") + " (still serving the last ranking)",
      error: "training failed: " + (status.error || "?") + " (still serving the last ranking)",
    };
    node.replaceChildren(el("span", { class: "dot " + name }), document.createTextNode(
      (words[name] || name) + (since !== null && name !== "ready" ? " · " + seconds(since) : "")));
  }

  return { call: call, session: session, blobURL: blobURL, download: download, el: el, percent: percent, spread: spread, seconds: seconds, bars: bars, statusLine: statusLine };
})();
